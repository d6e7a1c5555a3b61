"""The memory-quality regions: LoCoMo, LongMemEval, their joint cross-validation, ingestion."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.render.common import cell, load, machine, num, table


def _locomo_row(label: str, result: dict[str, Any], cats: list[str]) -> list[str]:
    by = result["by_category"]
    return [
        label,
        *(f"{by[c]:.2f}" for c in cats),
        f"{result['overall_1_4']:.3f}",
        num(result["tokens_mean"], 0),
    ]


def render_locomo_table(root: Path) -> str:
    """Evidence recall per category and method, the headline first."""
    d = load(root, "locomo")
    names = d["config"]["categories"]
    cats = sorted(names)
    cv = d["cross_validated"]
    rows = [
        _locomo_row(
            f"**{d['config']['methods']['memory_in_budget']}**",
            d["results"]["memory_in_budget"],
            cats,
        )
    ]
    rows.append(
        _locomo_row("the same, knobs cross-validated (leave one conversation out)", cv, cats)
    )
    order = ["hybrid", "bm25", "dense", "dense_chunks5", "memory", "window", "full"]
    rows += [_locomo_row(d["config"]["methods"][m], d["results"][m], cats) for m in order]
    head = ["method", *(names[c] for c in cats), "overall 1–4", "tokens"]
    data = d["data"]
    scored_cats = [str(c) for c in d["config"]["scored_categories"]]
    scored = sum(d["results"]["memory_in_budget"]["questions"][c] for c in scored_cats)
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
    keys = list(cv["grid"])
    *row_keys, col_key = keys
    scores = cv["in_sample_overall_1_4"]

    def point(values: dict[str, Any]) -> str:
        return ",".join(f"{k}={values[k]}" for k in keys)

    def rows_of(i: int, prefix: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if i == len(row_keys):
            yield prefix
            return
        for value in cv["grid"][row_keys[i]]:
            yield from rows_of(i + 1, {**prefix, row_keys[i]: value})

    rows = []
    for values in rows_of(0, {}):
        cells = [str(values[k]) for k in row_keys]
        for col in cv["grid"][col_key]:
            key = point({**values, col_key: col})
            cell = f"{scores[key]:.3f}" if key in scores else "-"
            cells.append(f"**{cell}**" if key == cv["default"] else cell)
        rows.append(cells)
    head = [f"`{k}`" for k in row_keys] + [f"`{col_key}` = {c}" for c in cv["grid"][col_key]]
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
    config = load(root, "locomo")["config"]
    cats, names = [str(c) for c in config["scored_categories"]], config["categories"]
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
    config = load(root, "locomo")["config"]
    cats, names = [str(c) for c in config["scored_categories"]], config["categories"]
    cv = d["cross_validated"]
    default = cv["default"]

    def lme(result: dict[str, Any]) -> list[str]:
        return [f"{result['turn_recall']['overall']:.3f}", num(result["tokens"]["overall"], 0)]

    rows = []
    for key, s in d["shares"].items():
        label = f"**{key}**" if key == default else key
        by, lo = s["locomo"]["by_category"], s["locomo"]
        rows.append(
            [
                label,
                *(f"{by[c]:.2f}" for c in cats),
                f"{lo['overall_1_4']:.3f}",
                num(lo["tokens_mean"], 0),
                *lme(s["longmemeval_in_thread"]),
                f"{s['longmemeval_in_budget']['turn_recall']['overall']:.3f}",
            ]
        )
    first = next(iter(d["shares"].values()))
    hybrid = first["locomo_hybrid"]
    lme_hybrid = first["longmemeval_hybrid"]["turn_recall"]["overall"]
    rows.append(
        ["hybrid", *(f"{hybrid[c]:.2f}" for c in cats), "", "", f"{lme_hybrid:.3f}", "", ""]
    )
    head = [
        "share",
        *(f"LoCoMo {names[c]}" for c in cats),
        "LoCoMo overall",
        "tokens",
        "LongMemEval in the thread",
        "tokens",
        "LongMemEval, a session of its own",
    ]
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
    ours = r["memory_in_budget"]["overall_1_4"]
    return (
        f"LoCoMo evidence recall, window and recall inside "
        f"{num(d['config']['budget_tokens'], 0)} tokens: **{ours:.3f}**"
        f" (cross-validated with LongMemEval {cv:.3f}) against "
        f"{r['hybrid']['overall_1_4']:.3f} for hybrid dense + BM25 search over raw turns; "
        f"on {machine(d)}."
    )


LME_ORDER = ["memory_in_budget", "memory_in_thread", "hybrid", "hybrid_in_thread", "bm25"]
LME_ORDER += ["dense", "dense_chunks5", "window"]
"""The methods of the LongMemEval table, those a run has (older runs lack some)."""


def shipped_point() -> str:
    """The grid point the shipped `Context` defaults make (`bench.locomo_cv.default_key`)."""
    from bench.locomo_cv import default_key  # imports the graph's Context: only when needed

    return default_key()


def lme_at_point(d: dict[str, Any], key: str) -> dict[str, dict[str, float]]:
    """Each measure per question type and overall at grid point ``key``, from the questions."""
    by: dict[str, dict[str, list[float]]] = {}
    for q in d["questions"]:
        for measure, value in q["grid"][key].items():
            for group in (q["question_type"], "overall"):
                by.setdefault(measure, {}).setdefault(group, []).append(float(value))
    return {m: {g: sum(v) / len(v) for g, v in groups.items()} for m, groups in by.items()}


def _run_differs(d: dict[str, Any], key: str) -> list[str]:
    """The grid knobs whose value in the run differs from the point ``key``."""
    point = dict(part.split("=", 1) for part in key.split(","))
    run = d["config"]["context"]
    return [f"{k} {run[k]}" for k, v in point.items() if str(run.get(k)) != v]


def render_longmemeval_table(root: Path) -> str:
    """Turn-level recall per question type and method; session recall and tokens overall."""
    d = load(root, "longmemeval")
    results, types = d["results"], d["config"]["question_types"]
    key = shipped_point()
    differs = _run_differs(d, key)
    rows = []

    def row(label: str, r: dict[str, Any]) -> list[str]:
        return [
            label,
            *(f"{r['turn_recall'][t]:.2f}" for t in types),
            f"{r['turn_recall']['overall']:.3f}",
            f"{r['session_recall']['overall']:.3f}",
            num(r["tokens"]["overall"], 0),
        ]

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
    r = d["results"]
    cv = load(root, "joint_cv")["cross_validated"]["longmemeval"]
    ours = lme_at_point(d, shipped_point())["turn_recall"]["overall"]
    return (
        f"LongMemEval evidence recall (one user and an assistant over ~48 sessions, "
        f"{d['data']['questions']} dev questions), recall inside "
        f"{num(d['config']['budget_tokens'], 0)} tokens: "
        f"**{ours:.3f}** (cross-validated "
        f"with LoCoMo {cv:.3f}) against {r['hybrid']['turn_recall']['overall']:.3f} for "
        f"hybrid search over raw turns; on {machine(d)}."
    )


def render_joint_cv(root: Path) -> str:
    """Each grid point's in-sample recall on both datasets, the chosen and default marked."""
    cv = load(root, "joint_cv")
    rows = []
    for key, scores in sorted(
        cv["points"].items(), key=lambda kv: -(kv[1]["locomo"] + kv[1]["longmemeval"])
    ):
        name = key.replace(",", ", ")
        marks = [
            m for m, k in (("default", cv["default"]), ("best", cv["best_in_sample"])) if k == key
        ]
        label = f"**{name}** ({', '.join(marks)})" if marks else name
        mean = (scores["locomo"] + scores["longmemeval"]) / 2
        rows.append(
            [label, f"{scores['locomo']:.3f}", f"{scores['longmemeval']:.3f}", f"{mean:.3f}"]
        )
    held = cv["cross_validated"]
    folds = sum(cv["chosen_in_folds"].values())
    chose = cv["chosen_in_folds"].get(cv["default"], 0)
    note = (
        f"\n\n{chose} of {folds} folds (one LoCoMo conversation or one LongMemEval question "
        f"held out) choose the default. Cross-validated: LoCoMo {held['locomo']:.3f}, "
        f"LongMemEval {held['longmemeval']:.3f}."
    )
    return table(["grid point", "LoCoMo 1–4", "LongMemEval", "mean"], rows) + note


def render_ingestion_table(root: Path) -> str:
    """Turns per second into memory, raw and with a chat model, on the same turns."""
    d = load(root, "ingestion")
    rows = [
        [
            "raw summaries, no model"
            if r["mode"] == "raw"
            else f"summaries etc. by `{r['model']}`",
            num(r["turns"], 0),
            num(r["seconds"], 0),
            num(r["turns_per_s"], 2),
            ", ".join(f"{n} {kind}" for kind, n in sorted(r["stored"].items())),
        ]
        for r in d["runs"]
    ]
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
