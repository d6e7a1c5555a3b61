"""The memory-quality regions: LoCoMo, LongMemEval, their joint cross-validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.render import cell, load, machine, num, table

LOCOMO_METHODS = ("memory_in_budget", "hybrid", "full")
LME_METHODS = ("memory_in_budget", "memory_in_thread", "hybrid", "hybrid_in_thread")
"""The methods the tables show, in order (older runs have others, and may lack some)."""


def _locomo_row(label: str, result: dict[str, Any], cats: list[str]) -> list[str]:
    by = result["by_category"]
    overall, tokens = f"{result['overall_1_4']:.3f}", num(result["tokens_mean"], 0)
    return [label, *(f"{by[c]:.2f}" for c in cats), overall, tokens]


def render_locomo_table(root: Path) -> str:
    """Evidence recall per category and method, the headline first."""
    d = load(root, "locomo")
    names, methods, results = d["config"]["categories"], d["config"]["methods"], d["results"]
    cats = sorted(names)
    rows = [_locomo_row(methods[m], results[m], cats) for m in LOCOMO_METHODS if m in results]
    rows[0][0] = f"**{rows[0][0]}**"
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
        f"on {machine(d, dated=False)}."
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
    for method in (m for m in LME_METHODS if m in results):
        label = d["config"]["methods"][method]
        if method.startswith("memory") and differs:
            label += f" (the run's defaults: {', '.join(differs)})"
        rows.append(row(label, results[method]))
    at = lme_at_point(d, key) if all(key in q["grid"] for q in d["questions"]) else {}
    if at and differs:  # the run's defaults are not the shipped ones: the shipped point first
        rows.insert(0, row("the headline at the shipped defaults (its grid point)", at))
    rows[0][0] = f"**{rows[0][0]}**"
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
        f"for hybrid search over raw turns; on {machine(d, dated=False)}."
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
