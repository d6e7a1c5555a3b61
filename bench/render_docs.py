"""Render the figures of the README and docs/ from the committed results, never by hand.

A markdown file marks each generated region with a start and an end marker::

    <!-- bench:locomo-table -->
    (generated)
    <!-- /bench -->

``python -m bench.render_docs`` rewrites every region of ``README.md`` and ``docs/*.md``
from ``bench/results/*.json`` (and the configuration tables from the fields of
`graph.context.Context` and the pydantic models of `memory_graph_agent.settings`);
``python -m bench.render_docs --check`` changes nothing and exits 1 if a region is stale,
unknown or has no end.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

ROOT = Path(__file__).resolve().parents[1]
START = re.compile(r"<!-- bench:([a-z0-9-]+) -->")
END = "<!-- /bench -->"
README_KNOBS = (
    "user_id",
    "model",
    "memory_mode",
    "recall_mode",
    "window_size",
    "window_token_share",
    "reflect_after",
    "memory_token_budget",
    "context_window_tokens",
    "ttl_policy",
)
"""The knobs the README's table shows (every knob is in docs/configuration.md)."""
FIRST_SENTENCE = re.compile(r"(?<!e\.g\.)(?<=\.)\s+(?=['A-Z])")


def load(root: Path, name: str) -> dict[str, Any]:
    """One results file, ``bench/results/<name>.json``, parsed."""
    return json.loads((root / "bench" / "results" / f"{name}.json").read_text())


def num(value: float | None, digits: int = 1) -> str:
    """``value`` with thousands separators and ``digits`` decimals; ``-`` for None."""
    return "-" if value is None else f"{value:,.{digits}f}"


def pair(stats: dict[str, Any] | None, digits: int = 1) -> str:
    """``p50 / p95`` of a percentile record."""
    if not stats or stats.get("p50") is None:
        return "-"
    return f"{num(stats['p50'], digits)} / {num(stats['p95'], digits)}"


def machine(data: dict[str, Any]) -> str:
    """The machine and date a results file records, in one phrase."""
    m = data.get("machine", {})
    text = f"a {m.get('cores', '?')}-core {m.get('cpu_model', 'unknown CPU')}"
    cpu = m.get("cpu_id")
    if cpu:
        text += f" (family {cpu['family']} model {cpu['model']}"
        text += ", AVX-512)" if cpu.get("avx512f") else ")"
    when = m.get("timestamp") or data.get("created_at")
    if when:
        text += f", {when[:10]} {when[11:16]} UTC"
    load_avg = m.get("loadavg_at_start")
    if load_avg:
        text += f", load average {load_avg[0]:.1f} at start"
    return text


def table(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def context_knobs(root: Path) -> list[dict[str, str]]:
    """Name, tier, variable, default, bounds and description of every configuration field.

    The run's `Context` fields (tier ``user``, ``memory_of`` the ``scheduler``'s), then every
    setting of `Settings` (tier ``operator``), named by its path (``window.size``).
    """
    from dataclasses import fields

    from graph.context import Context
    from memory_graph_agent.settings import ENV_PATHS, Settings

    hints = get_type_hints(Context)
    knobs = [
        _knob(f.name, f.name.upper(), "scheduler" if f.name == "memory_of" else "user",
              f.default, [], hints[f.name], f.metadata["description"])
        for f in fields(Context)
    ]  # fmt: skip
    for env, path in ENV_PATHS.items():
        model: Any = Settings
        for part in path[:-1]:
            model = model.model_fields[part].annotation
        info = model.model_fields[path[-1]]
        knobs.append(
            _knob(".".join(path), env, "operator", info.default, info.metadata,
                  info.annotation, info.description or "")
        )  # fmt: skip
    return knobs


def _knob(
    name: str, env: str, tier: str, value: Any, bounds: list[Any], kind: Any, description: str
) -> dict[str, str]:
    shown = "(empty)" if value == "" else f"`{value}`"
    return {"name": name, "env": env, "tier": tier, "default": shown,
            "bounds": _bounds(bounds, kind), "description": description}  # fmt: skip


def _bounds(bounds: list[Any], kind: Any) -> str:
    if get_origin(kind) is Literal:
        return " \\| ".join(f"`{c}`" for c in get_args(kind))
    found = {n: getattr(b, n) for b in bounds for n in ("ge", "gt", "le") if hasattr(b, n)}
    low = f"≥ {found['ge']}" if "ge" in found else f"> {found['gt']}" if "gt" in found else ""
    high = f"≤ {found['le']}" if "le" in found else ""
    return ", ".join(b for b in (low, high) if b)


def render_context_knobs(root: Path) -> str:
    """The run's `Context`, then the deployment's `Settings`: variable, default, bounds."""
    knobs = context_knobs(root)
    parts = []
    for tier, title in (
        ("user", "**The run's context** (`Context`, Studio's form; a client of the server "
                 "may set it per run):"),
        ("operator", "**The deployment's settings** (`Settings`, read once from the "
                     "environment or built in code; refused from a client of the server, 403):"),
        ("scheduler", "**Set by the memory scheduler** on the memory runs it starts (refused "
                      "from a client of the server on any other run, 403):"),
    ):  # fmt: skip
        rows = [
            [f"`{k['name']}`", f"`{k['env']}`", k["default"], k["bounds"] or "-",
             _cell(k["description"])]
            for k in knobs
            if k["tier"] == tier
        ]  # fmt: skip
        head = ["field", "environment", "default", "bounds", "meaning"]
        parts.append(f"{title}\n\n{table(head, rows)}")
    return "\n\n".join(parts)


def render_readme_knobs(root: Path) -> str:
    """The README's ten knobs: where they live, their variable and the first sentence."""
    by_env = {k["env"]: k for k in context_knobs(root)}
    rows = []
    for name in README_KNOBS:
        k = by_env[name.upper()]
        first = FIRST_SENTENCE.split(" ".join(k["description"].split()), maxsplit=1)[0]
        where = "`Context`" if k["tier"] == "user" else "`Settings`"
        rows.append([f"`{k['name']}`", where, f"`{k['env']}`", k["default"], _cell(first)])
    return table(["name", "in", "environment", "default", "what it does"], rows)


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
    """The levers `bench.locomo_loop` tried on one replay: recall per category, tokens."""
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


LME_ORDER = ["memory_in_budget", "memory_in_thread", "hybrid", "bm25", "dense"]
LME_ORDER += ["dense_chunks5", "window"]


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

    rows.append(
        row("**the headline at the shipped defaults (its grid point)**", lme_at_point(d, key))
    )
    for method in LME_ORDER:
        label = d["config"]["methods"][method]
        if method.startswith("memory") and differs:
            label += f" (the run's defaults: {', '.join(differs)})"
        rows.append(row(label, results[method]))
    head = ["method", *types, "turn recall", "session recall", "tokens"]
    ku = lme_at_point(d, key).get("newest_first", {}).get("knowledge-update")
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


READ_PATH, READ_PATH_EXIT = "ours: read path", "ours: read path, CLI turn"
PEER_FIRST, PEER_LAST = ["floor"], ["ours: MemoryStore.search", READ_PATH, READ_PATH_EXIT]


def _peer_order(systems: dict[str, Any]) -> list[str]:
    middle = sorted(n for n in systems if n not in PEER_FIRST + PEER_LAST + ["query embedding"])
    return [n for n in PEER_FIRST + middle + PEER_LAST if n in systems]


def render_peers_table(root: Path) -> str:
    """Per system and size: p50 / p95 with the embedding (× floor, returned), pre-embedded p50."""
    d = load(root, "peers")
    sizes = d["sizes"]
    head = ["system", *(f"{num(s['size'], 0)}: p50 / p95 ms (× floor, returned)" for s in sizes)]
    head.append("pre-embedded p50 ms, " + " / ".join(num(s["size"], 0) for s in sizes))
    rows = []
    for name in _peer_order(sizes[-1]["systems"]):
        cells = [f"**{name}**" if name in (READ_PATH, READ_PATH_EXIT) else name]
        for s in sizes:
            w = s["systems"].get(name, {}).get("with_embedding")
            if not w:
                cells.append("-")
                continue
            ret = w.get("returned") or {}
            got = (
                f"{ret['mean']:.1f} items"
                if name in (READ_PATH, READ_PATH_EXIT)
                else f"{ret.get('mean', 0):.2f} / {ret.get('k', '?')}"
            )
            cells.append(f"{pair(w['latency'])} ({w.get('x_floor_p50', 0):.2f}×, {got})")
        pre = [s["systems"].get(name, {}).get("pre_embedded") for s in sizes]
        cells.append(" / ".join(num(p["latency"]["p50"], 2) if p else "-" for p in pre))
        rows.append(cells)
    c = d["config"]
    note = (
        f"\n\n{c['queries']} questions per size, k = {c['k']}, the benchmark user among "
        f"{c['other_users']} users of {num(c['per_other_user'], 0)} memories; on {machine(d)}, "
        f"PostgreSQL {d['machine'].get('postgres')} + pgvector {d['machine'].get('pgvector')}."
    )
    return table(head, rows) + note


PARTS = {
    "read_path": "read path (from `ainvoke` to the model call)",
    "read_path_excl_embedding": "read path without the embedding",
    "embed_query": "the query embedding, started with the run",
    "embed_wait": "what recall still waited for it",
    "load_profile": "load_profile, beside recall",
    "recall": "recall",
    "search": "of which the searches",
    "touch": "access stats, after the reply",
    "graph_overhead": "the graph's own overhead",
}


def render_peers_parts(root: Path) -> str:
    """The read path's parts at each size, p50 / p95 ms."""
    d = load(root, "peers")
    sizes = d["sizes"]
    rows = []
    for key, label in PARTS.items():
        cells = [label]
        for s in sizes:
            cells.append(pair(s["systems"]["ours: read path"]["breakdown"].get(key), 1))
        rows.append(cells)
    return table(["part", *(f"{num(s['size'], 0)}: p50 / p95 ms" for s in sizes)], rows)


def render_peers_headline(root: Path) -> str:
    """One sentence: the read path at the largest size against the floor and the peers."""
    d = load(root, "peers")
    s = d["sizes"][-1]
    sy = s["systems"]
    rp, ours = sy["ours: read path"]["with_embedding"], sy["ours: MemoryStore.search"]
    peers = [n for n in _peer_order(sy) if n not in PEER_FIRST + PEER_LAST]
    best = min(peers, key=lambda n: sy[n]["with_embedding"]["latency"]["p50"])
    search = ours["with_embedding"]["latency"]["p50"]
    cli = sy.get(READ_PATH_EXIT, {}).get("with_embedding")
    cli_part = (
        f", {num(cli['latency']['p50'])} ms ({cli['x_floor_p50']:.2f}×) for a CLI turn "
        "(its checkpoint written once, at its end)"
        if cli
        else ""
    )
    return (
        f"Read path of a turn at {num(s['size'], 0)} memories of the user (profile, recall with "
        f"its embedding, the graph's steps, up to the model call): "
        f"**{num(rp['latency']['p50'])} ms p50** ({rp['x_floor_p50']:.2f}× a bare pgvector "
        f"query with its embedding){cli_part}; our search alone {num(search)} ms, the fastest "
        f"peer ({best}) {num(sy[best]['with_embedding']['latency']['p50'])} ms; "
        f"on {machine(d)}."
    )


LATENCY_MODES = {
    "respond_only": "respond only (no memory)",
    "inline": "memory inline",
    "background": "**memory in the background (default)**",
    # measured while memory work gave way to turns' read paths (the default row then);
    # give-way is removed since, and new results have no such mode
    "background_no_give_way": "background, give-way off (then an option)",
    "agent_only": "`create_agent`, no middleware (no memory)",
    "middleware_background": "`create_agent` + `MemoryMiddleware` (background)",
}
LATENCY_BASELINES = ("respond_only", "agent_only")
LATENCY_METRICS = ("ttft", "time_to_reply", "run_end", "next_turn_waits")


def render_latency_table(root: Path) -> str:
    """p50 / p95 ms per agent, turns that formed memory apart from the others."""
    d = load(root, "latency")
    rows = []
    for mode, label in LATENCY_MODES.items():
        m = d["modes"].get(mode)
        if not m:
            continue
        for kind, name in (("memory_turns", "memory"), ("other_turns", "other")):
            part = m[kind]
            if not part["n"]:
                continue
            turns = f"{name}: {part['n']}" if m["memory_turns"]["n"] else str(part["n"])
            rows.append([label, turns, *(pair(part[k], 0) for k in LATENCY_METRICS)])
            label = ""
    head = [
        "agent",
        "turns",
        "time to first token",
        "whole reply",
        "end of the run",
        "next turn waits",
    ]
    c = d["config"]
    note = (
        f"\n\nFake model: {c['first_token_s'] * 1000:.0f} ms to the first token, then "
        f"{c['tokens_per_s']:.0f} tokens/s ({c['reply_tokens']}-token replies); "
        f"{c['turns']} turns of one LoCoMo conversation; on {machine(d)}."
    )
    return table(head, rows) + note


def render_latency_adds(root: Path) -> str:
    """What memory adds to the time to first token, and the drain and check after the run."""
    d = load(root, "latency")
    rows = []
    for mode, label in LATENCY_MODES.items():
        m = d["modes"].get(mode)
        if not m or mode in LATENCY_BASELINES or "memory_adds_to_ttft" not in m:
            continue
        v = m.get("verification") or {}
        baseline = m.get("baseline", "respond_only")  # runs before it was recorded: respond
        against = "" if baseline == "respond_only" else f" (against {LATENCY_MODES[baseline]})"
        rows.append(
            [
                label + against,
                pair(m["memory_adds_to_ttft"]),
                pair(m["memory_adds_to_ttft_excluding_embedding"]),
                f"{m['drain_after_last_turn_s']:.1f} s",
                f"{v.get('summarized', '-')} of {v.get('left_window', '-')}; "
                f"lost {v.get('lost', '-')}, duplicated {v.get('duplicated', '-')}",
            ]
        )
    head = [
        "agent",
        "adds to TTFT, p50 / p95 ms",
        "without the embedding",
        "drain after last",
        "messages summarized",
    ]
    return table(head, rows)


def render_latency_cost(root: Path) -> str:
    """Memory's own model calls and tokens per conversation turn."""
    d = load(root, "latency")["memory_cost_per_turn"]
    rows = [
        [
            num(c["turns"], 0),
            f"{c['calls_per_turn']:.2f}",
            num(c["input_tokens_per_turn"], 0),
            num(c["output_tokens_per_turn"], 0),
        ]
        for c in d["conversations"]
    ]
    return table(
        ["conversation turns", "calls / turn", "input tokens / turn", "output tokens / turn"], rows
    )


def render_latency_headline(root: Path) -> str:
    """One sentence: the next turn's wait and what memory adds to the first token."""
    d = load(root, "latency")
    bg, inline = d["modes"]["background"], d["modes"]["inline"]
    return (
        f"With memory in the background the next turn waits "
        f"**{pair(bg['memory_turns']['next_turn_waits'], 0)} ms** (p50 / p95) after a reply "
        f"that formed memory, against {pair(inline['memory_turns']['next_turn_waits'], 0)} ms "
        f"inline; memory adds {pair(bg['memory_adds_to_ttft_excluding_embedding'])} ms to the "
        f"time to first token without the query embedding; on {machine(d)}."
    )


OVERHEAD_ROWS = {
    "search_only_pre_embedded": "pgvector search only, pre-embedded",
    "embed_query": "query embedding",
    "embed_wait": "of which recall waited for",
    "hot_path_excl_embedding": "load_profile ∥ recall without the embedding",
    "graph_overhead": "graph and checkpoint overhead",
    "memory_excl_embedding": "all memory work without the embedding (turns that summarize too)",
    "turn": "whole turn (memory inline)",
}


def render_overhead_table(root: Path) -> str:
    """Per size, p50 / p95 ms of each part of a turn (memory inline, instant fake model)."""
    d = load(root, "overhead")
    sizes = d["sizes"]
    rows = []
    for key, label in OVERHEAD_ROWS.items():
        cells = [label]
        for s in sizes:
            stats = s[key] if key == "search_only_pre_embedded" else s["full"].get(key)
            cells.append(pair(stats))
        rows.append(cells)
    head = [
        "p50 / p95 ms",
        *(f"{num(s['size'], 0)} memories ({num(s['index']['table_rows'], 0)} rows)" for s in sizes),
    ]
    return table(head, rows) + f"\n\n{d['config']['turns']} turns per size; on {machine(d)}."


def render_graph_floor_table(root: Path) -> str:
    """LangGraph's own time to the model node, per checkpointer and durability."""
    d = load(root, "graph_floor")
    rows = [[v["label"], pair(v["to_respond"]), num(v["run"]["p50"])] for v in d["variants"]]
    c = d["config"]
    note = (
        f"\n\nStand-in nodes that do no work; a window of {c['window']} messages and "
        f"{c['items']} recalled items; {c['turns']} turns per variant; on {machine(d)}."
    )
    return (
        table(
            ["checkpointer, durability", "to the model node p50 / p95 ms", "whole run p50 ms"], rows
        )
        + note
    )


def render_throughput_table(root: Path) -> str:
    """Turns per second and turn latency per number of concurrent conversations."""
    d = load(root, "throughput")
    rows = []
    for lv in d["levels"]:
        v = lv["verification"]
        lat = lv["latency"]
        rows.append(
            [
                str(lv["concurrency"]),
                num(lv["turns"], 0),
                num(lv["turns_per_s"]),
                f"{num(lat['p50'] / 1000, 2)} / {num(lat['p95'] / 1000, 2)} s",
                f"{lv['embedding_busy_fraction'] * 100:.0f} %",
                f"{v['lost']} / {v['duplicated']}",
            ]
        )
    head = [
        "conversations",
        "turns",
        "turns/s",
        "turn p50 / p95",
        "embedder busy",
        "lost / duplicated",
    ]
    return table(head, rows) + f"\n\nOn {machine(d)}."


def _size(n: float) -> str:
    """``n`` bytes in KiB or MiB."""
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def render_growth_table(root: Path) -> str:
    """Per user, first and last sample, retention on and off: checkpoints and everything."""
    d = load(root, "growth")
    users = d["users"]
    runs = {r["retention"]: r["samples"] for r in d["runs"]}

    def span(samples: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]) -> str:
        first, last = samples[0], samples[-1]
        return f"{_size(value(first) / users)} → {_size(value(last) / users)}"

    measures: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
        ("checkpoint rows, live bytes", lambda s: s["postgres"]["checkpoints"]),
        ("checkpoint tables on disk, after VACUUM", lambda s: s["postgres_disk"]["checkpoints"]),
        ("Redis (window, seen-set, recap, profile, queue...)", lambda s: sum(s["redis"].values())),
        (
            "episodic log and its index (kept: what recall cites)",
            lambda s: s["postgres"].get("episodes", 0) + s["postgres"].get("episode_index", 0),
        ),
        (
            "everything (Redis + Postgres live rows)",
            lambda s: sum(s["redis"].values()) + sum(s["postgres"].values()),
        ),
    ]
    rows = [[label, *(span(runs[r], f) for r in ("keep_latest", "off"))] for label, f in measures]
    reads = {r["retention"]: r.get("read_path_ms") for r in d["runs"]}
    if all(reads.values()):
        rows.append(
            [
                "read path p50 (`retrieve`, embedding included), first → last sample",
                *(
                    f"{num(reads[r]['start']['p50'])} → {num(reads[r]['end']['p50'])} ms"
                    for r in ("keep_latest", "off")
                ),
            ]
        )
    first, last = runs["off"][0], runs["off"][-1]
    turns = f"{first['turns_per_user']} → {last['turns_per_user']} turns"
    clock = ""
    if "days_per_pass" in d:  # runs before simulated time have neither days nor memory counts
        turns += f" (day {first['day']:g} → {last['day']:g})" if d["days_per_pass"] else ""

        def memories(sample: dict[str, Any]) -> str:
            m = sample["memories_per_user"]
            return f"{m['active']:g} of {m['rows']:g}"

        rows.append(
            [
                "memories, active of all rows",
                *(
                    f"{memories(runs[r][0])} → {memories(runs[r][-1])}"
                    for r in ("keep_latest", "off")
                ),
            ]
        )
        clock = (
            f"{d['days_per_pass']:g} simulated days before each pass (every {d['every']} turns)"
            if d["days_per_pass"]
            else "no simulated time (decay removes nothing)"
        ) + "; "
    head = [f"per user, {turns}", "retention on (`keep_latest`)", "retention off"]
    return table(head, rows) + f"\n\n{users} users; {clock}on {machine(d)}."


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


def render_soak_summary(root: Path) -> str:
    """Totals and the exactly-once check of the soak."""
    d = load(root, "soak")
    t, v, c = d["totals"], d["verification"], d["config"]
    causes = ", ".join(f"{k} {n}" for k, n in t["failed_by_cause"].items())
    rows = [
        [
            "turns",
            f"{num(t['turns'], 0)} in {num(t['workload_s'], 0)} s ({num(t['turns_per_s'])}"
            f" turns/s; completed turn p50 / p95 {pair(t['latency_completed'], 0)} ms)",
        ],
        [
            "**messages lost / duplicated**",
            f"**{v['messages_lost']} / {v['messages_duplicated']}"
            f"** of {num(v['logged'], 0)} logged ({num(v['summarized'], 0)} in "
            f"{num(v['summaries'], 0)} summaries, {v['in_window']} in windows, {v['pending']} "
            f"pending, {v['processing']} claimed, {v['dead_lettered']} dead letters)",
        ],
        ["turns failed", f"{t['failed']} ({causes}); every message kept: {v['failed_kept']}"],
        ["turns completed degraded", str(t["completed_degraded"])],
        ["memory runs failed", str(t["memory_run_failures"])],
        *_soak_retention_rows(d),
    ]
    note = (
        f"\n\n{c['users']} users × {c['turns']} turns, {c['concurrency']} at a time; {machine(d)}."
    )
    return table(["", ""], rows) + note


def _soak_retention_rows(d: dict[str, Any]) -> list[list[str]]:
    """The maintenance passes run during the soak, and the checkpoints they left."""
    m, cp = d["totals"].get("maintenance"), d["growth"].get("checkpoints")
    if not m:
        return [["maintenance passes", "none (`--maintain-every 0`)"]]
    failed = ", ".join(f"{k} {n}" for k, n in m["failed_by_cause"].items()) or "none"
    removed = ", ".join(
        f"{m[k]} {k.replace('_', ' ')}"
        for k in ("expired", "evicted", "compacted", "decisions_pruned", "threads_archived")
    )
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(m["pruned_by_kind"].items()))
    held = ", ".join(f"{n} {r}" for r, n in sorted(m["held_by_reason"].items())) or "none"
    rows = [
        [
            f"maintenance passes (every {num(d['config']['maintain_every'], 0)} s, and one at "
            "the end)",
            f"{m['passes']} ({m['completed']} completed; failed: {failed}); checkpoints of "
            f"{num(m['checkpoints_pruned'], 0)} threads pruned to their latest ({kinds}), "
            f"{num(m['checkpoints_held'], 0)} held whole ({held}); {removed}",
        ]
    ]
    if cp:
        threads = "; ".join(
            f"{num(c['checkpoints'], 0)} checkpoints in {c['threads']} {kind} threads "
            f"(most {num(c['most'], 0)})"
            for kind, c in cp["by_thread"].items()
        )
        counts = ", ".join(f"{num(n, 0)} {t.replace('_', ' ')}" for t, n in cp["rows"].items())
        rows.append(
            [
                "checkpoints at the end",
                f"{counts}; {num(cp['live_bytes'] / 2**20)} MiB of rows, "
                f"{num(cp['disk_bytes'] / 2**20)} MiB on disk; {threads}",
            ]
        )
    return rows


def render_soak_recovery(root: Path) -> str:
    """Seconds from each fault to the first completed and the first healthy turn."""
    d = load(root, "soak")
    rows = []
    for f in d["faults"]:
        down = f"{f['down_s']:.1f} s" if "down_s" in f else "–"
        rows.append(
            [
                f"{f['kind'].replace('_', ' ')} (at {f['at_s']:.0f} s)",
                down,
                f"{f['first_ok_turn_s']:.1f}",
                f"{f['healthy_turn_s']:.1f}",
                str(f["turns_failed_until_healthy"]),
            ]
        )
    head = [
        "fault",
        "down",
        "first completed turn (s)",
        "first healthy turn (s)",
        "turns failed until healthy",
    ]
    return table(head, rows)


def render_soak_headline(root: Path) -> str:
    """One sentence: the soak's turns, faults and the exactly-once result."""
    d = load(root, "soak")
    t, v, c = d["totals"], d["verification"], d["config"]
    upkeep = (
        f", with the maintenance pass pruning checkpoints every {num(c['maintain_every'], 0)} s"
        if c.get("maintain_every")
        else ""
    )
    return (
        f"Soak: {num(t['turns'], 0)} turns of {c['users']} users with Redis `kill -9`, "
        f"PostgreSQL restarts, a worker killed during a memory run and injected model "
        f"faults{upkeep}: **{v['messages_lost']} lost / {v['messages_duplicated']} duplicated** of "
        f"{num(v['logged'], 0)} messages; on {machine(d)}."
    )


def render_recall_path_table(root: Path) -> str:
    """``retrieve`` after the embedding, this code beside the older code run at the same time."""
    d = load(root, "recall_path")
    older = {s["size"]: s for s in d.get("main_same_time", [])}
    rows = []
    for s in d["sizes"]:
        o = older.get(s["size"], {})
        rows.append(
            [
                f"{num(s['size'], 0)} ({num(s['bench_user_turns'], 0)} turns)",
                pair(s["retrieve_after_embedding"]),
                pair(o.get("retrieve_after_embedding")),
                f"{s['mean_items']:.1f}",
            ]
        )
    head = ["memories of the user", "p50 / p95 ms", "the code before, beside it", "items"]
    return table(head, rows) + f"\n\nOn {machine(d)}."


def render_embedding_table(root: Path) -> str:
    """One query's time per runtime, and how far the vectors agree."""
    d = load(root, "embedding")
    rows = [[name, pair(q), num(q["p99"])] for name, q in d["query_ms"].items()]
    nb = d["neighbours"]
    int8 = nb["int8_queries"]
    note = (
        f"\n\nONNX fp32 against torch: top-20 neighbours identical for "
        f"{num(nb['identical_top20_lists'], 0)} of {num(nb['questions'], 0)} LoCoMo questions "
        f"(min cosine {nb['min_cosine_torch_vs_onnx_over_turns']}). int8 queries: "
        f"{int8['mean_top20_overlap'] * 100:.1f} % of each top-20 the same, min cosine to torch "
        f"{int8['min_cosine_vs_torch']}. Batches: {num(nb['batch_texts_per_s']['onnx'])} texts/s"
        f" on ONNX, {num(nb['batch_texts_per_s']['torch'])} on torch; on {machine(d)}."
    )
    return table(["runtime", "one query p50 / p95 ms", "p99 ms"], rows) + note


def render_readme_headlines(root: Path) -> str:
    """The README's headline figures, one line each."""
    parts = (
        render_locomo_headline,
        render_longmemeval_headline,
        render_peers_headline,
        render_latency_headline,
        render_soak_headline,
    )
    return "\n".join(f"- {part(root)}" for part in parts)


RENDERERS: dict[str, Callable[[Path], str]] = {
    "readme-headlines": render_readme_headlines,
    "readme-knobs": render_readme_knobs,
    "context-knobs": render_context_knobs,
    "locomo-headline": render_locomo_headline,
    "locomo-table": render_locomo_table,
    "locomo-grid": render_locomo_grid,
    "locomo-levers": render_locomo_levers,
    "window-share": render_window_share,
    "longmemeval-table": render_longmemeval_table,
    "longmemeval-headline": render_longmemeval_headline,
    "joint-cv": render_joint_cv,
    "peers-headline": render_peers_headline,
    "peers-table": render_peers_table,
    "peers-parts": render_peers_parts,
    "latency-headline": render_latency_headline,
    "latency-table": render_latency_table,
    "latency-adds": render_latency_adds,
    "latency-cost": render_latency_cost,
    "overhead-table": render_overhead_table,
    "graph-floor-table": render_graph_floor_table,
    "throughput-table": render_throughput_table,
    "growth-table": render_growth_table,
    "ingestion-table": render_ingestion_table,
    "soak-headline": render_soak_headline,
    "soak-summary": render_soak_summary,
    "soak-recovery": render_soak_recovery,
    "recall-path-table": render_recall_path_table,
    "embedding-table": render_embedding_table,
}
"""Region name -> the function that renders its body."""


def regions(text: str) -> list[tuple[str, int, int]]:
    """``(name, body start, body end)`` of each marked region of ``text``.

    Raises:
        ValueError: a start marker without an end before the next start, or a stray end.
    """
    found, pos = [], 0
    for match in START.finditer(text):
        if match.start() < pos:
            raise ValueError(f"region {match.group(1)!r} starts inside the previous one")
        end = text.find(END, match.end())
        nxt = START.search(text, match.end())
        if end < 0 or (nxt and nxt.start() < end):
            raise ValueError(f"region {match.group(1)!r} has no {END}")
        found.append((match.group(1), match.end(), end))
        pos = end + len(END)
    if text.count(END) != len(found):
        raise ValueError(f"{END} without a start marker")
    return found


def render_text(text: str, root: Path) -> str:
    """``text`` with every marked region's body rendered afresh.

    Raises:
        ValueError: a region is unknown or unterminated.
    """
    out, last = [], 0
    for name, start, end in regions(text):
        if name not in RENDERERS:
            raise ValueError(f"unknown region {name!r} (known: {', '.join(RENDERERS)})")
        out += [text[last:start], "\n", RENDERERS[name](root).rstrip("\n"), "\n"]
        last = end
    return "".join(out) + text[last:]


def documents(root: Path) -> list[Path]:
    """The files that may hold regions: the README and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the regions, or with ``--check`` report the stale ones; 0 when all is current."""
    parser = argparse.ArgumentParser(prog="python -m bench.render_docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a region is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: here)")
    args = parser.parse_args(argv)
    stale = []
    for path in documents(args.root):
        if not path.exists():
            continue
        text = path.read_text()
        try:
            new = render_text(text, args.root)
        except ValueError as exc:
            print(f"{path.relative_to(args.root)}: {exc}", file=sys.stderr)
            return 1
        if new != text:
            stale.append(path.relative_to(args.root))
            if not args.check:
                path.write_text(new)
    verb = "stale" if args.check else "rewritten"
    for path in stale:
        print(f"{verb}: {path}", file=sys.stderr if args.check else sys.stdout)
    if args.check and stale:
        print("run `python -m bench.render_docs` and commit the result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
