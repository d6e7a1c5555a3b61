"""LoCoMo evidence recall of the memory pipeline, against retrieval baselines.

    python -m bench locomo [--data PATH] [--out bench/out] [--limit N] [--budget 1800]

Each conversation is replayed turn by turn through the project's memory nodes
(`bench.locomo_pipeline`: ``trim_window → summarize → consolidate → reflect``, raw
summaries; no checkpointer, the Redis window is the source of truth; the chat model is a
guard that counts calls and refuses them: ``llm_calls`` must be 0). Every question then
goes through the ``recall`` node with the shipped ranking and is scored by evidence
recall: the share of its evidence dialog ids in the live window or in the provenance of
the recalled items. Baselines on the same turns, MiniLM embeddings and token budget
(`bench.locomo_scoring`): the window, dense, BM25, hybrid RRF, dense over 5-turn chunks
and the whole conversation; per LoCoMo category and over categories 1-4
(docs/benchmarks.md). Everything that defines the numbers is recorded under ``config``.

``memory_in_budget``, the headline, fits window and recall in the budget; ``memory`` puts
the window on top of it. Per question, ``memory_in_budget`` and every point of
`bench.locomo_cv.GRID` run first with their accesses rolled back, so they see the access
history (recency) that ``memory`` left over the previous questions. A grid value of the
index-time ``turn_context_weight`` other than the replay's has the turns indexed again
(`reindex_turns`) for its probes, before the replay's vectors are restored. Evidence ids
are repaired or dropped and every defect counted (`bench.locomo_data`). Writes
``<out>/locomo.json`` and ``<out>/locomo.png`` and shows the docs' table.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import main, say, write_results
from bench.locomo_cv import cross_validate, default_key, grid_points, point_key, points_by_weight
from bench.locomo_data import Conversation, Question, load_locomo
from bench.locomo_pipeline import (
    RECALL_K,
    Graphs,
    GuardChatModel,
    Run,
    accesses_rolled_back,
    build_recall_graph,
    build_replay_graph,
    check_fresh,
    memory_state,
    recall_context,
    recall_context_ids,
    reindex_turns,
    replay,
    replay_context,
)
from bench.locomo_report import (
    REFERENCE,
    REFERENCE_FULL_TOKENS,
    data_summary,
    git_commit,
    plot,
    progress_bar,
    run_config,
)
from bench.locomo_scoring import (
    METHODS,
    aggregate,
    baseline_contexts,
    build_raw_index,
    evidence_recall,
)
from bench.seeding import embed_batched
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import Services, services_session

DEFAULT_DATA = os.environ.get("LOCOMO_DATA", "/work/shared/data/locomo/locomo8.json")


async def evaluate_conversation(
    conv: Conversation,
    services: Services,
    graphs: Graphs,
    budget: int,
    recall_k: int,
    bar: Any,
    tasks: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Replay one conversation, then score every question for every method."""
    await check_fresh(services, conv)
    ctx = replay_context(conv, graphs.model_spec)
    bar.update(tasks["replay"], description=f"replay {conv.sample_id}")
    t0 = time.perf_counter()
    await replay(graphs.replay, conv, ctx, lambda: bar.advance(tasks["replay"]))
    replay_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    mem = await memory_state(services, conv)
    index = await build_raw_index(conv, services.embeddings, ctx.settings.window.size)
    scored = [q for q in conv.questions if q.scored]
    qvecs = await embed_batched(services.embeddings, [q.text for q in scored])
    index_s = time.perf_counter() - t0

    # the recall node fills what the window leaves of memory_token_budget: "memory" gets
    # the window on top of the budget, "memory_in_budget" both within it
    full_ctx = recall_context(conv, graphs.model_spec, budget + mem.window_tokens, recall_k)
    fit_ctx = recall_context(conv, graphs.model_spec, budget, recall_k)
    default = default_key()
    replayed = ctx.settings.recall.weights.turn_context_weight  # what the replay indexed with
    by_weight = points_by_weight(fit_ctx, replayed)
    bar.update(tasks["questions"], description=f"questions {conv.sample_id}")
    t0 = time.perf_counter()
    probes_of: dict[int, dict[str, tuple[set[str], int]]] = {q.index: {} for q in scored}

    async def probe(points: dict[str, Run], question: Question) -> None:
        # a probe of the same memory: its accesses are rolled back, so "memory" sees the
        # access history a live session leaves
        for key, point_ctx in points.items():
            async with accesses_rolled_back(services, conv.user_id):
                ids, tokens = await recall_context_ids(graphs.recall, conv, point_ctx, question)
            probes_of[question.index][key] = (ids | mem.window_ids, tokens + mem.window_tokens)

    others = [w for w in by_weight if w != replayed]
    for weight in others:  # before the replay's own vectors are asked (and restored)
        await reindex_turns(services, [conv], weight)
        for question in scored:
            await probe(by_weight[weight], question)
    if others:
        await reindex_turns(services, [conv], replayed)
    records = []
    for question, vector in zip(scored, qvecs, strict=True):
        contexts = baseline_contexts(index, question.text, vector, budget)
        await probe(by_weight.get(replayed, {}), question)
        probes = probes_of[question.index]
        contexts["memory_in_budget"] = probes[default]
        ids, tokens = await recall_context_ids(graphs.recall, conv, full_ctx, question)
        contexts["memory"] = (ids | mem.window_ids, tokens + mem.window_tokens)
        record = _record(conv, question, contexts)
        record["grid"] = {k: evidence_recall(question.evidence, v[0]) for k, v in probes.items()}
        record["grid_tokens"] = {k: v[1] for k, v in probes.items()}
        records.append(record)
        bar.advance(tasks["questions"])
    all_ids = {t.dia_id for t in conv.turns}
    info = {
        "sample_id": conv.sample_id,
        "user_id": conv.user_id,
        "thread_id": conv.thread_id,
        "sessions": conv.sessions,
        "turns": len(conv.turns),
        "questions": len(conv.questions),
        "scored_questions": len(scored),
        "window_size": ctx.settings.window.size,
        "window_matches_last_turns": mem.window_ids == index.window_ids,
        "window_tokens": mem.window_tokens,
        "summaries": mem.summaries,
        "memories": mem.counts,
        "turns_outside_window_and_memory": len(all_ids - mem.window_ids - mem.summarized_ids),
        "full_tokens": index.full_tokens,
        "replay_s": round(replay_s, 2),
        "index_s": round(index_s, 2),
        "questions_s": round(time.perf_counter() - t0, 2),
    }
    return records, info


def _record(
    conv: Conversation, question: Question, contexts: dict[str, tuple[set[str], int]]
) -> dict[str, Any]:
    return {
        "sample_id": conv.sample_id,
        "index": question.index,
        "category": question.category,
        "evidence": list(question.evidence),
        "recall": {m: evidence_recall(question.evidence, contexts[m][0]) for m in METHODS},
        "tokens": {m: contexts[m][1] for m in METHODS},
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; write ``locomo.json`` / ``locomo.png`` under ``--out``.

    Without ``--database-url`` a fresh database and key prefix are created on the
    embedded (or ``REDIS_URL``/``DATABASE_URL``) servers and dropped at the end; with
    them (e.g. pytest's ``memory_env``) they are used and left in place.
    """
    started = time.perf_counter()
    data = Path(a.data)
    conversations, defects = load_locomo(data, a.limit)
    records: list[dict[str, Any]] = []
    per_conversation: list[dict[str, Any]] = []
    guard = GuardChatModel()
    guard_spec = register_chat_model(f"locomo-guard-{uuid.uuid4().hex[:8]}", guard)
    async with (
        isolated_services(a.database_url, a.redis_url, a.key_prefix, tag="bench_locomo") as env,
        services_session(EMBEDDING) as services,  # closed before the database is dropped
    ):
        graphs = Graphs(
            build_replay_graph(services), build_recall_graph(services), guard_spec, guard
        )
        machine = await machine_info(env.database_url)
        with progress_bar(not a.no_progress and not a.quiet) as bar:
            n_turns = sum(len(c.turns) for c in conversations)
            n_questions = sum(q.scored for c in conversations for q in c.questions)
            tasks = {
                "replay": bar.add_task("replay", total=n_turns),
                "questions": bar.add_task("questions", total=n_questions),
            }
            for conv in conversations:
                recs, info = await evaluate_conversation(
                    conv, services, graphs, a.budget, a.recall_k, bar, tasks
                )
                records += recs
                per_conversation.append(info)
    report = {
        "benchmark": "locomo-evidence-recall",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime_s": round(time.perf_counter() - started, 1),
        "git_commit": git_commit(),
        "data": data_summary(data, conversations),
        "defects": defects.as_dict(),
        "config": run_config(a.budget, a.recall_k, conversations),
        "machine": machine,
        "llm_calls": guard.calls,
        "results": aggregate(records, list(METHODS)),
        "cross_validated": cross_validate(
            records, [point_key(p) for p in grid_points()], default_key()
        ),
        "reference": {
            "overall_1_4": REFERENCE,
            "full_tokens_per_conversation": REFERENCE_FULL_TOKENS,
        },
        "conversations": per_conversation,
        "questions": records,
    }
    for r in records:  # the grid's tokens are summed up by cross_validated; its recall
        r.pop("grid_tokens")  # stays per question, for bench.joint_cv
    write_results(a.out, "locomo", report, plot, show=() if a.quiet else ("locomo-table",))
    counts = {k: v for k, v in report["defects"]["counts"].items() if v}
    say(a.quiet, f"data defects: {counts}; chat model calls: {guard.calls}")
    return report


COMMON = ("out", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.locomo` beside ``--out``."""
    p.add_argument("--data", default=DEFAULT_DATA, help="LoCoMo-format JSON file")
    p.add_argument("--limit", type=int, default=None, help="first N conversations only")
    p.add_argument("--budget", type=int, default=1800, help="context token budget")
    p.add_argument("--recall-k", type=int, default=RECALL_K, help="recall_k of the recall node")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


if __name__ == "__main__":
    raise SystemExit(main("locomo"))
