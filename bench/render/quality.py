"""The memory-quality regions: LoCoMo, LongMemEval, their joint cross-validation, ingestion."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from bench.render.common import cell, load, machine, num, table

LME_ORDER = ["memory_in_budget", "memory_in_thread", "hybrid", "hybrid_in_thread", "bm25"]
LME_ORDER += ["dense", "dense_chunks5", "window"]
"""The methods of the LongMemEval table, those a run has (older runs lack some)."""


def _locomo_row(label: str, result: dict[str, Any], cats: list[str]) -> list[str]:
    by = result["by_category"]
    overall, tokens = f"{result['overall_1_4']:.3f}", num(result["tokens_mean"], 0)
    return [label, *(f"{by[c]:.2f}" for c in cats), overall, tokens]


def _categories(root: Path) -> tuple[list[str], dict[str, str]]:
    config = load(root, "locomo")["config"]
    return [str(c) for c in config["scored_categories"]], config["categories"]


def render_locomo_table(root: Path) -> str:
    """Evidence recall per category and method, the headline first."""
    d = load(root, "locomo")
    names, methods, results = d["config"]["categories"], d["config"]["methods"], d["results"]
    cats = sorted(names)
    rows = [
        _locomo_row(f"**{methods['memory_in_budget']}**", results["memory_in_budget"], cats),
        _locomo_row("the same, knobs cross-validated (leave one conversation out)",
                    d["cross_validated"], cats),
    ]  # fmt: skip
    order = ["hybrid", "bm25", "dense", "dense_chunks5", "memory", "window", "full"]
    rows += [_locomo_row(methods[m], results[m], cats) for m in order]
    head = ["method", *(names[c] for c in cats), "overall 1–4", "tokens"]
    data, counts = d["data"], results["memory_in_budget"]["questions"]
    scored = sum(counts[str(c)] for c in d["config"]["scored_categories"])
    note = (
        f"\n\n{data['conversations']} conversations, {num(data['turns'], 0)} turns, "
        f"{num(scored, 0)} scored questions (categories 1–4; adversarial, 5, is shown but "
        f"not scored), budget {num(d['config']['budget_tokens'], 0)} tokens. Run on "
        f"{machine(d)}, {d['runtime_s'] / 60:.0f} min."
    )
    return table(head, rows) + note


def render_locomo_grid(root: Path) -> str:
    """In-sample overall recall of each grid point; rows by all knobs but the last."""
    cv = load(root, "locomo")["cross_validated"]
    grid, scores = cv["grid"], cv["in_sample_overall_1_4"]
    *row_keys, col_key = list(grid)
    rows = []
    for values in itertools.product(*(grid[k] for k in row_keys)):
        cells = [str(v) for v in values]
        for col in grid[col_key]:
            key = ",".join(f"{k}={v}" for k, v in zip(grid, (*values, col), strict=True))
            cell = f"{scores[key]:.3f}" if key in scores else "-"
            cells.append(f"**{cell}**" if key == cv["default"] else cell)
        rows.append(cells)
    head = [f"`{k}`" for k in row_keys] + [f"`{col_key}` = {c}" for c in grid[col_key]]
    folds = cv["folds"]
    chose = sum(f["chosen"] == cv["default"] for f in folds)
    held = [f["held_out_overall_1_4"] for f in folds]
    note = (
        f"\n\nBold: the default. {chose} of {len(folds)} folds choose it; the held-out "
        f"conversations score {min(held):.3f}–{max(held):.3f}; cross-validated overall "
        f"{cv['overall_1_4']:.3f}. A grid point that adds a round trip must win by more "
        f"than {cv['min_gain_for_round_trip'] * 100:.1f} point."
    )
    return table(head, rows) + note


def render_locomo_levers(root: Path) -> str:
    """The levers tried on one LoCoMo replay (``locomo_levers.json``): recall per category."""
    d = load(root, "locomo_levers")
    cats, names = _categories(root)
    hybrid = d["hybrid"]["by_category"]
    rows = [["hybrid (the last full run)", *(f"{hybrid[c]:.2f}" for c in cats), "", ""]]
    for variant, result in d["variants"].items():
        label = "the defaults" if not variant else f"`{variant.replace(',', ', ')}`"
        rows.append(_locomo_row(label, result, cats))
    cv = d["cross_validated"]
    chosen = ", ".join(f"`{k or 'the defaults'}` in {n}" for k, n in cv["chosen_in_folds"].items())
    note = (
        f"\n\nLeave one conversation out over these rows, the folds choose {chosen}; "
        f"cross-validated overall {cv['overall_1_4']:.3f}. Budget "
        f"{num(d['budget'], 0)} tokens, window included. Run on {machine(d)}."
    )
    head = ["variant", *(names[c] for c in cats), "overall 1–4", "tokens"]
    return table(head, rows) + note


def render_window_share(root: Path) -> str:
    """Per window share: LoCoMo per category, LongMemEval in the thread and on its own."""
    d = load(root, "window_share")
    cats, names = _categories(root)
    cv = d["cross_validated"]
    rows = []
    for key, s in d["shares"].items():
        label = f"**{key}**" if key == cv["default"] else key
        in_thread = s["longmemeval_in_thread"]
        rows.append(
            _locomo_row(label, s["locomo"], cats) + [
                f"{in_thread['turn_recall']['overall']:.3f}",
                num(in_thread["tokens"]["overall"], 0),
                f"{s['longmemeval_in_budget']['turn_recall']['overall']:.3f}",
            ]
        )  # fmt: skip
    first = next(iter(d["shares"].values()))
    hybrid, lme_hybrid = first["locomo_hybrid"], first["longmemeval_hybrid"]
    lme = f"{lme_hybrid['turn_recall']['overall']:.3f}"
    rows.append(["hybrid", *(f"{hybrid[c]:.2f}" for c in cats), "", "", lme, "", ""])
    head = ["share", *(f"LoCoMo {names[c]}" for c in cats), "LoCoMo overall", "tokens",
            "LongMemEval in the thread", "tokens", "LongMemEval, a session of its own"]  # fmt: skip
    chosen = ", ".join(f"{k} in {n}" for k, n in cv["chosen_in_folds"].items())
    held = cv["cross_validated"]
    note = (
        f"\n\nBold: the default. Holding out one LoCoMo conversation or one LongMemEval "
        f"question at a time, the folds choose the share {chosen}; cross-validated, LoCoMo "
        f"{held['locomo']:.3f} and LongMemEval in the thread {held['longmemeval']:.3f}."
    )
    return table(head, rows) + note


def render_locomo_headline(root: Path) -> str:
    """One sentence: the recall figure against the best baseline."""
    d = load(root, "locomo")
    r = d["results"]
    cv = load(root, "joint_cv")["cross_validated"]["locomo"]
    return (
        f"LoCoMo evidence recall, window and recall inside "
        f"{num(d['config']['budget_tokens'], 0)} tokens: "
        f"**{r['memory_in_budget']['overall_1_4']:.3f}**"
        f" (cross-validated with LongMemEval {cv:.3f}) against "
        f"{r['hybrid']['overall_1_4']:.3f} for hybrid dense + BM25 search over raw turns; "
        f"on {machine(d)}."
    )


def lme_at_point(d: dict[str, Any], key: str | None = None) -> dict[str, dict[str, float]]:
    """Each measure per question type and overall at grid point ``key`` (the shipped one)."""
    if key is None:
        from bench.joint_cv import default_key  # imports the settings: only when needed

        key = default_key()
    by: dict[str, dict[str, list[float]]] = {}
    for q in d["questions"]:
        for measure, value in q["grid"][key].items():
            for group in (q["question_type"], "overall"):
                by.setdefault(measure, {}).setdefault(group, []).append(float(value))
    return {m: {g: sum(v) / len(v) for g, v in groups.items()} for m, groups in by.items()}


def render_longmemeval_table(root: Path) -> str:
    """Turn-level recall per question type and method; session recall and tokens overall."""
    from bench.joint_cv import default_key

    d = load(root, "longmemeval")
    results, types, key = d["results"], d["config"]["question_types"], default_key()
    run = d["config"]["context"]
    point = dict(part.split("=", 1) for part in key.split(","))
    differs = [f"{k} {run[k]}" for k, v in point.items() if str(run.get(k)) != v]

    def row(label: str, r: dict[str, Any]) -> list[str]:
        recall, sessions = r["turn_recall"], r["session_recall"]["overall"]
        return [label, *(f"{recall[t]:.2f}" for t in types), f"{recall['overall']:.3f}",
                f"{sessions:.3f}", num(r["tokens"]["overall"], 0)]  # fmt: skip

    rows = []
    at = lme_at_point(d, key) if all(key in q["grid"] for q in d["questions"]) else {}
    if at:  # a run with a grid of its own may leave the shipped point out
        rows.append(row("**the headline at the shipped defaults (its grid point)**", at))
    for method in (m for m in LME_ORDER if m in results):
        label = d["config"]["methods"][method]
        if method.startswith("memory") and differs:
            label += f" (the run's defaults: {', '.join(differs)})"
        rows.append(row(label, results[method]))
    head = ["method", *types, "turn recall", "session recall", "tokens"]
    ku = at.get("newest_first", {}).get("knowledge-update")
    ku_hybrid = results["hybrid"].get("newest_first", {}).get("knowledge-update")
    data, ingest = d["data"], d["ingestion"]
    note = (
        f"\n\n{data['questions']} questions, {num(data['turns'], 0)} turns, budget "
        f"{num(d['config']['budget_tokens'], 0)} tokens. Knowledge updates with the newest "
        f"evidence in the context and above every stale one, at the shipped defaults: "
        f"{num(ku, 2)} (hybrid {num(ku_hybrid, 2)}). Ingestion: "
        f"{num(ingest['turns_per_s'], 1)} turns/s ({ingest['mode']} summaries). Run on "
        f"{machine(d)}, {d['runtime_s'] / 60:.0f} min."
    )
    return table(head, rows) + note


def render_longmemeval_headline(root: Path) -> str:
    """One sentence: turn-level recall against hybrid search."""
    d = load(root, "longmemeval")
    cv = load(root, "joint_cv")["cross_validated"]["longmemeval"]
    ours = lme_at_point(d)["turn_recall"]["overall"]
    return (
        f"LongMemEval evidence recall (one user and an assistant over ~48 sessions, "
        f"{d['data']['questions']} dev questions), recall inside "
        f"{num(d['config']['budget_tokens'], 0)} tokens: **{ours:.3f}** (cross-validated "
        f"with LoCoMo {cv:.3f}) against {d['results']['hybrid']['turn_recall']['overall']:.3f} "
        f"for hybrid search over raw turns; on {machine(d)}."
    )


def render_joint_cv(root: Path) -> str:
    """Each grid point's in-sample recall on both datasets, the chosen and default marked."""
    cv = load(root, "joint_cv")
    rows = []
    for key, s in sorted(
        cv["points"].items(), key=lambda kv: -(kv[1]["locomo"] + kv[1]["longmemeval"])
    ):
        marks = [
            m for m, k in (("default", cv["default"]), ("best", cv["best_in_sample"])) if k == key
        ]
        name = key.replace(",", ", ")
        label = f"**{name}** ({', '.join(marks)})" if marks else name
        mean = (s["locomo"] + s["longmemeval"]) / 2
        rows.append([label, f"{s['locomo']:.3f}", f"{s['longmemeval']:.3f}", f"{mean:.3f}"])
    held, chosen = cv["cross_validated"], cv["chosen_in_folds"]
    note = (
        f"\n\n{chosen.get(cv['default'], 0)} of {sum(chosen.values())} folds (one LoCoMo "
        f"conversation or one LongMemEval question held out) choose the default. "
        f"Cross-validated: LoCoMo {held['locomo']:.3f}, LongMemEval {held['longmemeval']:.3f}."
    )
    return table(["grid point", "LoCoMo 1–4", "LongMemEval", "mean"], rows) + note


def render_ingestion_table(root: Path) -> str:
    """Turns per second into memory, raw and with a chat model, on the same turns."""
    d = load(root, "ingestion")
    rows = [
        ["raw summaries, no model" if r["mode"] == "raw" else f"summaries etc. by `{r['model']}`",
         num(r["turns"], 0), num(r["seconds"], 0), num(r["turns_per_s"], 2),
         ", ".join(f"{n} {kind}" for kind, n in sorted(r["stored"].items()))]
        for r in d["runs"]
    ]  # fmt: skip
    head = ["ingestion", "turns", "seconds", "turns/s", "stored"]
    return table(head, rows) + (
        f"\n\nThe first {d['data']['turns']} turns of LongMemEval question "
        f"`{d['data']['question_id']}`, memory inline; on {machine(d)}."
    )


def render_in_session_table(root: Path) -> str:
    """Evidence in the context per question kind and method; the idle budget of ours."""
    d = load(root, "in_session")
    results, kinds = d["results"], d["config"]["kinds"]
    counts = {k: sum(q["kind"] == k for q in d["questions"]) for k in kinds}
    rows = [
        [
            cell(d["config"]["methods"][m]),
            *(f"{r['recall'][k]:.2f}" for k in kinds),
            f"{r['recall']['overall']:.3f}",
            num(r["tokens"]["overall"], 0),
        ]
        for m, r in ((m, results[m]) for m in d["config"]["methods"])
    ]
    weight = d["config"].get("conversation_weight")
    if weight is not None:
        rows[0][0] += f" (`conversation_weight={weight}`)"
    rows[1:1] = [  # the grid's points, after the run's own settings
        [f"the same, `{key}`", *(f"{r[k]:.2f}" for k in kinds), f"{r['overall']:.3f}", ""]
        for key, r in results.get("grid", {}).items()
    ]
    head = ["method", *(f"{k} ({counts[k]})" for k in kinds), "overall", "tokens"]
    idle, data = results["memory"]["idle"], d["data"]
    note = (
        f"\n\n{data['conversations']} conversations of {data['exchanges']} exchanges "
        f"(replies of {d['config']['reply_tokens'][0]}–{d['config']['reply_tokens'][1]} "
        f"tokens), {data['questions']} questions, budget "
        f"{num(d['config']['budget_tokens'], 0)} tokens. Questions whose context left more "
        f"than {d['config']['idle_share']:.0%} of the budget unused while older messages of "
        f"the conversation were left out: {idle['questions']} of {idle['of']}. Run on "
        f"{machine(d)}, {d['runtime_s'] / 60:.0f} min."
    )
    return table(head, rows) + note
