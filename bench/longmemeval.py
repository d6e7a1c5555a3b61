"""LongMemEval evidence recall of the memory pipeline, against retrieval baselines.

    python -m bench longmemeval [--per-type N] [--offset K] [--budget 1800]

Each question's haystack (`bench.longmemeval_data`) is its own user: its sessions, in date
order, become threads; each exchange enters through the memory nodes as one live turn
would (`bench.locomo_pipeline`, raw summaries, no model), and every session but the last
then ends. The question goes through the ``recall`` node within the budget twice: in the
last session's thread before it ends, beside its window (``memory_in_thread``), then in a
session of its own at ``question_date`` (``memory_in_budget``, the headline, and every
point of `bench.locomo_cv.GRID`). Per method: turn-level and session-level evidence recall
and, for knowledge updates, whether the newest evidence is in the context (``newest_in``)
and above every stale one (``newest_first``); baselines as `bench.locomo`'s; and the
replay's turns per second (docs/benchmarks.md). Writes ``<out>/longmemeval.json`` and
``<out>/longmemeval.png`` and shows the docs' table.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from langchain_core.messages import HumanMessage

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import main, write_results
from bench.locomo_cv import GRID, parse_grid, points_by_weight
from bench.locomo_pipeline import (
    RECALL_K,
    GuardChatModel,
    PerSettings,
    Run,
    accesses_rolled_back,
    build_recall_graph,
    build_replay_graph,
    check_fresh,
    memory_state,
    recall_context,
    reindex_turns,
    replay_context,
)
from bench.locomo_report import git_commit
from bench.locomo_scoring import (
    BM25,
    CHUNK_TURNS,
    fill_budget,
    line_tokens,
    message_tokens,
    ranking,
    rrf,
)
from bench.longmemeval_data import QUESTION_TYPES, Haystack, load_longmemeval
from bench.seeding import embed_batched
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import Services, services_session

DEFAULT_DATA = os.environ.get(
    "LONGMEMEVAL_DATA", "/work/shared/data/longmemeval/longmemeval_s_dev60.json"
)
METHODS = {
    "memory_in_budget": "memory pipeline, the headline: the question opens a session of its "
    "own at question_date (the last one ended), recall within the budget",
    "memory_in_thread": "memory pipeline, the question asked in the last session's thread "
    "before it ends: its window (at least the newest two turns) + recall, within the budget",
    "window": "the last session's last window_size messages only",
    "dense": "dense top-k over raw turns (MiniLM, cosine), budget-filled",
    "bm25": "BM25 over raw turns, budget-filled",
    "hybrid": "RRF (k=60) of dense and BM25 over raw turns, budget-filled",
    "hybrid_in_thread": "a plain agent asked in the last session's thread: its newest two "
    "turns whole, then hybrid over the other raw turns in what they leave of the budget",
    "dense_chunks5": f"dense top-k over {CHUNK_TURNS}-turn chunks (the mean of their turns' "
    "vectors: five turns are far past MiniLM's 256 word pieces), budget-filled",
}
Shown = tuple[list[str], int]
"""What a method puts in the context: the turn ids, best ranked first, and their tokens."""


async def replay_haystack(graph: PerSettings, hay: Haystack, ctx: Run) -> int:
    """Feed every exchange as a live turn; end every session but the last. Turns fed."""
    fed = 0
    for n, session in enumerate(hay.sessions):
        config = {"configurable": {"thread_id": session.thread_id}}
        for exchange in session.exchanges():
            messages = [t.message() for t in exchange]
            await graph.ainvoke({"messages": messages}, config, context=ctx)
            fed += len(exchange)
        if n < len(hay.sessions) - 1:
            await graph.ainvoke({"messages": [], "end_session": True}, config, context=ctx)
    return fed


async def recall_ranked(
    graph: PerSettings, hay: Haystack, ctx: Run, thread_id: str | None = None
) -> tuple[list[str], int]:
    """Turn ids the recall node's items hold, best score first, and the items' tokens.

    The question is asked in ``thread_id`` (its window in the prompt), by default in a
    thread of its own.
    """
    question = HumanMessage(hay.question, id="question")
    config = {"configurable": {"thread_id": thread_id or hay.thread_id}}
    state = await graph.ainvoke({"messages": [question]}, config, context=ctx)
    items = sorted(state.get("recalled") or [], key=lambda item: -(item.get("score") or 0.0))
    ids = [sid for item in items for sid in item.get("source_ids") or []]
    return list(dict.fromkeys(ids)), sum(int(item.get("tokens", 0)) for item in items)


THREAD_TURNS = 2
"""The newest turns (user message and reply) a plain agent carries in its thread."""


def baselines(
    hay: Haystack, vectors: np.ndarray, qvec: np.ndarray, budget: int
) -> dict[str, Shown]:
    """Each baseline's context for the question: raw turns ranked, budget-filled."""
    turns = hay.turns
    lines = [t.line() for t in turns]
    costs = [line_tokens(x) for x in lines]
    dense = ranking((vectors @ qvec).tolist())
    sparse = ranking(BM25(lines).scores(hay.question))

    def filled(order: Sequence[int], budget: int = budget) -> Shown:
        taken = fill_budget(order, costs, budget)
        return [turns[i].dia_id for i in taken], sum(costs[i] for i in taken)

    # in the thread: the newest two turns as messages, newest first, then hybrid in the rest
    carried = [t for ex in hay.sessions[-1].exchanges()[-THREAD_TURNS:] for t in ex]
    carried_ids = {t.dia_id for t in carried}
    carried_tokens = message_tokens([t.message() for t in carried])
    rest = [i for i in rrf([dense, sparse]) if turns[i].dia_id not in carried_ids]
    found, found_tokens = filled(rest, max(0, budget - carried_tokens))
    in_thread = ([t.dia_id for t in reversed(carried)] + found, carried_tokens + found_tokens)

    chunks = [list(range(i, min(i + CHUNK_TURNS, len(turns)))) for i in range(0, len(turns), 5)]
    chunk_lines = ["\n".join(lines[j] for j in c) for c in chunks]
    chunk_costs = [line_tokens(x) for x in chunk_lines]
    chunk_vecs = np.stack([vectors[c].mean(axis=0) for c in chunks])
    taken = fill_budget(ranking((chunk_vecs @ qvec).tolist()), chunk_costs, budget)
    return {
        "dense": filled(dense),
        "bm25": filled(sparse),
        "hybrid": filled(rrf([dense, sparse])),
        "hybrid_in_thread": in_thread,
        "dense_chunks5": (
            [turns[j].dia_id for i in taken for j in chunks[i]],
            sum(chunk_costs[i] for i in taken),
        ),
    }


def score(hay: Haystack, found: Shown) -> dict[str, Any]:
    """Turn and session recall of one context; for an update, where the newest evidence is."""
    ids, tokens = found
    held = set(ids)
    evidence = hay.evidence
    session_of = {t.dia_id: t.session_id for t in hay.turns}
    sessions = {session_of.get(i) for i in held}
    out: dict[str, Any] = {
        "turn_recall": sum(e in held for e in evidence) / len(evidence),
        "session_recall": sum(s in sessions for s in hay.answer_session_ids)
        / len(hay.answer_session_ids),
        "tokens": tokens,
    }
    update = hay.newest_and_stale() if hay.question_type == "knowledge-update" else None
    if update is not None:
        newest, stale = update
        rank = {i: n for n, i in enumerate(ids)}
        out["newest_in"] = newest in held
        out["newest_first"] = newest in held and all(
            rank[newest] < rank[s] for s in stale if s in held
        )
    return out


async def evaluate(
    hay: Haystack,
    services: Services,
    replay_graph: PerSettings,
    recall_graph: PerSettings,
    model_spec: str,
    budget: int,
    knobs: dict[str, tuple[Any, ...]] = GRID,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Replay one haystack, then score the question for every method and grid point."""
    await check_fresh(services, hay)
    ctx = replay_context(hay, model_spec)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    fed = await replay_haystack(replay_graph, hay, ctx)
    replay_s = time.perf_counter() - t0
    fit = recall_context(hay, model_spec, budget, RECALL_K)  # type: ignore[arg-type]
    contexts: dict[str, Shown] = {}
    # asked in the last session's thread, before it ends: its window is in the prompt
    last = SimpleNamespace(user_id=hay.user_id, thread_id=hay.sessions[-1].thread_id)
    window_messages = await services.window.window(hay.user_id, last.thread_id)
    window_ids = [m.id for m in reversed(window_messages)]  # newest first: shown verbatim
    window_tokens = message_tokens([m.to_message() for m in window_messages])
    async with accesses_rolled_back(services, hay.user_id):
        ids, tokens = await recall_ranked(recall_graph, hay, fit, last.thread_id)
    contexts["memory_in_thread"] = (window_ids + ids, tokens + window_tokens)
    # then the session ends, and the question opens a session of its own, at question_date
    t0 = time.perf_counter()
    config = {"configurable": {"thread_id": last.thread_id}}
    await replay_graph.ainvoke({"messages": [], "end_session": True}, config, context=ctx)
    replay_s += time.perf_counter() - t0
    mem = await memory_state(services, hay)  # type: ignore[arg-type]
    grid: dict[str, dict[str, Any]] = {}

    async def probe(points: dict[str, Run]) -> None:
        for key, point_ctx in points.items():
            async with accesses_rolled_back(services, hay.user_id):
                grid[key] = score(hay, await recall_ranked(recall_graph, hay, point_ctx))

    replayed = ctx.settings.recall.weights.turn_context_weight  # what the replay indexed with
    by_weight = points_by_weight(fit, replayed, knobs)
    for weight in [w for w in by_weight if w != replayed]:
        await reindex(services, hay, weight)
        await probe(by_weight[weight])
        await reindex(services, hay, replayed)
    await probe(by_weight.get(replayed, {}))
    contexts["memory_in_budget"] = await recall_ranked(recall_graph, hay, fit)
    shown = hay.sessions[-1].turns[-ctx.settings.window.size :]
    contexts["window"] = (
        [t.dia_id for t in reversed(shown)],
        message_tokens([t.message() for t in shown]),
    )
    vectors = await embed_batched(services.embeddings, [t.line() for t in hay.turns])
    qvec = (await embed_batched(services.embeddings, [hay.question]))[0]
    contexts.update(baselines(hay, vectors, qvec, budget))
    record = {
        "question_id": hay.question_id,
        "question_type": hay.question_type,
        "evidence": list(hay.evidence),
        "methods": {m: score(hay, contexts[m]) for m in METHODS},
        "grid": grid,
    }
    info = {
        "question_id": hay.question_id,
        "sessions": len(hay.sessions),
        "turns": fed,
        "last_window_messages": len(window_messages),
        "last_window_tokens": window_tokens,
        "summaries": mem.summaries,
        "memories": mem.counts,
        "replay_s": round(replay_s, 2),
        "turns_per_s": round(fed / replay_s, 2) if replay_s else None,
    }
    return record, info


async def reindex(services: Services, hay: Haystack, weight: float) -> None:
    """Index every session's replayed turns again with ``turn_context_weight`` = ``weight``."""
    threads = [SimpleNamespace(user_id=hay.user_id, thread_id=s.thread_id) for s in hay.sessions]
    await reindex_turns(services, threads, weight)  # type: ignore[arg-type]


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per method: each measure per question type and overall."""
    out: dict[str, Any] = {}
    for method in METHODS:
        by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in records:
            for measure, value in r["methods"][method].items():
                for group in (r["question_type"], "overall"):
                    by[measure][group].append(float(value))
        out[method] = {
            measure: {g: _mean(v) for g, v in groups.items()} for measure, groups in by.items()
        }
    return out


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; write ``longmemeval.json`` / ``longmemeval.png`` under ``--out``."""
    started = time.perf_counter()
    data = Path(a.data)
    haystacks = load_longmemeval(data, a.per_type, a.offset)
    guard = GuardChatModel()
    spec = register_chat_model(f"lme-guard-{uuid.uuid4().hex[:8]}", guard)
    records, infos = [], []
    async with (
        isolated_services(a.database_url, a.redis_url, a.key_prefix, tag="bench_lme") as env,
        services_session(EMBEDDING) as services,
    ):
        replay_graph, recall_graph = build_replay_graph(services), build_recall_graph(services)
        machine = await machine_info(env.database_url)
        for n, hay in enumerate(haystacks, start=1):
            record, info = await evaluate(
                hay, services, replay_graph, recall_graph, spec, a.budget, a.grid
            )
            records.append(record)
            infos.append(info)
            if not a.quiet:
                got = record["methods"]["memory_in_budget"]["turn_recall"]
                hyb = record["methods"]["hybrid"]["turn_recall"]
                print(
                    f"[{n}/{len(haystacks)}] {hay.question_type:26} memory {got:.2f} "
                    f"hybrid {hyb:.2f} ({info['turns']} turns, {info['replay_s']:.0f} s)",
                    flush=True,
                )
    turns = sum(i["turns"] for i in infos)
    replay_s = sum(i["replay_s"] for i in infos)
    report = {
        "benchmark": "longmemeval-evidence-recall",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime_s": round(time.perf_counter() - started, 1),
        "git_commit": git_commit(),
        "data": {
            "path": data.name,
            "questions": len(haystacks),
            "per_type": a.per_type,
            "offset": a.offset,
            "turns": turns,
        },
        "config": {
            "budget_tokens": a.budget,
            "grid": {k: list(v) for k, v in a.grid.items()},
            "question_types": [
                t for t in QUESTION_TYPES if any(h.question_type == t for h in haystacks)
            ],
            "methods": METHODS,
            "context": {  # flat, with the members of the recall weights' group
                k: v
                for k, v in replay_context(haystacks[0], spec).by_name().items()  # type: ignore[arg-type]
                if k not in ("user_id", "model")
            },
        },
        "machine": machine,
        "llm_calls": guard.calls,
        "ingestion": {
            "mode": "raw",
            "turns": turns,
            "replay_s": round(replay_s, 1),
            "turns_per_s": round(turns / replay_s, 2) if replay_s else None,
        },
        "results": aggregate(records),
        "haystacks": infos,
        "questions": records,
    }
    write_results(
        a.out, "longmemeval", report, plot, show=() if a.quiet else ("longmemeval-table",)
    )
    return report


def plot(report: dict[str, Any], plt: Any) -> Any:
    """Turn-level recall per question type, one bar per method."""
    results = report["results"]
    types = [t for t in QUESTION_TYPES if t in results["memory_in_budget"]["turn_recall"]]
    groups = [*types, "overall"]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(results)
    for n, (method, r) in enumerate(results.items()):
        values = [r["turn_recall"].get(g) or 0.0 for g in groups]
        ax.bar(np.arange(len(groups)) + n * width, values, width, label=method)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2, groups, rotation=15, fontsize=8)
    ax.set_ylabel("turn-level evidence recall")
    ax.set_title(
        f"LongMemEval dev: {report['data']['questions']} questions, budget "
        f"{report['config']['budget_tokens']} tokens (window included)"
    )
    ax.legend(fontsize=7, ncol=4)
    return fig


COMMON = ("out", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.longmemeval` beside the common ones."""
    p.add_argument("--data", default=DEFAULT_DATA, help="LongMemEval-format JSON file")
    p.add_argument("--per-type", type=int, default=None, help="N questions of each type")
    p.add_argument("--offset", type=int, default=0, help="skip the first K of each type")
    p.add_argument("--budget", type=int, default=1800, help="context token budget")
    p.add_argument(
        "--grid",
        type=parse_grid,
        default=GRID,
        help="knobs to probe, e.g. 'neighbour_weight=0,0.5;recall_rrf_k=5,60' "
        "(default: bench.locomo_cv.GRID)",
    )


if __name__ == "__main__":
    raise SystemExit(main("longmemeval"))
