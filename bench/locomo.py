"""LoCoMo evidence recall of the memory pipeline, against raw-turn baselines (docs/benchmarks.md).

python -m bench locomo [--data PATH] [--limit N] [--budget 1800] [--out bench/out]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import joint_cv as cv
from bench import locomo_pipeline as pipe
from bench import locomo_scoring as scoring
from bench.env import EMBEDDING
from bench.harness import main, say, write_results
from bench.locomo_data import CATEGORIES, SCORED_CATEGORIES, Conversation, load_locomo
from bench.seeding import embed_batched

DEFAULT_DATA = os.environ.get("LOCOMO_DATA", "/work/shared/data/locomo/locomo8.json")
METHODS = {
    "memory_in_budget": "memory pipeline, the headline: window + recall, all within the budget",
    "hybrid": f"RRF (k={scoring.RRF_K}) of dense and BM25 over raw turns, budget-filled",
    "full": "the whole conversation",
}


async def evaluate(
    b: pipe.Bench, conv: Conversation, budget: int, quiet: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Replay one conversation, then score every question for every method and grid point.

    ``memory_in_budget`` and the grid's points are probes: their accesses are rolled back.
    """
    await pipe.check_fresh(b.services, conv)
    ctx = pipe.replay_context(conv, b.spec)
    t0 = time.perf_counter()
    for turn in conv.turns:
        await b.replay.ainvoke({"messages": [turn.message()]}, conv.thread_id, ctx)
    replay_s = time.perf_counter() - t0
    say(quiet, f"[locomo] {conv.sample_id}: {len(conv.turns)} turns in {replay_s:.0f} s")

    t0 = time.perf_counter()
    mem = await pipe.memory_state(b.services, conv.user_id, conv.thread_id)
    ids, lines = [t.dia_id for t in conv.turns], [t.line() for t in conv.turns]
    index = await scoring.raw_index(b.services.embeddings, ids, lines)
    scored = [q for q in conv.questions if q.scored]
    qvecs = await embed_batched(b.services.embeddings, [q.text for q in scored])
    index_s = time.perf_counter() - t0

    # the recall node fills what the window leaves of memory_token_budget
    points, default = cv.points(pipe.recall_context(conv, b.spec, budget)), cv.default_key()
    t0 = time.perf_counter()
    records = []
    for q, vector in zip(scored, qvecs, strict=True):
        asked = (q.text, f"q{q.index}")
        shown = await b.probe(points, conv.thread_id, asked)
        grid = {k: (mem.window_ids + i, t + mem.window_tokens) for k, (i, t) in shown.items()}
        contexts = {
            "memory_in_budget": grid[default],
            "hybrid": index.hybrid(q.text, vector, budget),
            "full": (index.ids, sum(index.costs)),
        }
        records.append(
            {
                "sample_id": conv.sample_id,
                "index": q.index,
                "category": q.category,
                "evidence": list(q.evidence),
                "recall": {m: scoring.evidence_recall(q.evidence, contexts[m][0]) for m in METHODS},
                "tokens": {m: contexts[m][1] for m in METHODS},
                "grid": {k: scoring.evidence_recall(q.evidence, v[0]) for k, v in grid.items()},
            }
        )
    questions_s = time.perf_counter() - t0
    say(quiet, f"[locomo] {conv.sample_id}: {len(scored)} questions in {questions_s:.0f} s")
    outside = set(index.ids) - set(mem.window_ids) - mem.summarized_ids
    last = {t.dia_id for t in conv.turns[-ctx.settings.window.size :]}
    return records, {
        "sample_id": conv.sample_id,
        "user_id": conv.user_id,
        "thread_id": conv.thread_id,
        "sessions": conv.sessions,
        "turns": len(conv.turns),
        "questions": len(conv.questions),
        "scored_questions": len(scored),
        "window_size": ctx.settings.window.size,
        "window_matches_last_turns": set(mem.window_ids) == last,
        "window_tokens": mem.window_tokens,
        "summaries": mem.summaries,
        "memories": mem.counts,
        "turns_outside_window_and_memory": len(outside),
        "full_tokens": sum(index.costs),
        "replay_s": round(replay_s, 2),
        "index_s": round(index_s, 2),
        "questions_s": round(questions_s, 2),
    }


def run_config(budget: int, conversations: Sequence[Conversation]) -> dict:
    """Everything that defines the numbers (how they are counted: docs/benchmarks.md)."""
    sample = conversations[0] if conversations else Conversation("sample", [], [], 0)
    # flat, with the members of the recall weights' group (the shape of earlier results)
    replay_ctx = pipe.replay_context(sample, "registered:locomo-guard").by_name()
    recall_ctx = pipe.recall_context(sample, "registered:locomo-guard", budget).by_name()
    for c in (replay_ctx, recall_ctx):
        c["user_id"] = "locomo-<sample_id>"
    return {
        "budget_tokens": budget,
        "embedding_model": EMBEDDING,
        "replay_context": replay_ctx,
        "recall_context": recall_ctx,
        "grid": {k: list(v) for k, v in cv.GRID.items()},
        "bm25": {"k1": scoring.BM25_K1, "b": scoring.BM25_B},
        "rrf_k": scoring.RRF_K,
        "methods": METHODS,
        "scored_categories": list(SCORED_CATEGORIES),
        "categories": {str(k): v for k, v in CATEGORIES.items()},
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; write ``locomo.json`` / ``locomo.png`` under ``--out``."""
    started, data = time.perf_counter(), Path(a.data)
    conversations, defects = load_locomo(data, a.limit)
    records: list[dict[str, Any]] = []
    per_conversation: list[dict[str, Any]] = []
    async with pipe.pipeline(a, "locomo") as b:
        for conv in conversations:
            recs, info = await evaluate(b, conv, a.budget, a.quiet)
            records += recs
            per_conversation.append(info)
    questions = [q for c in conversations for q in c.questions]
    report = {
        **pipe.header("locomo-evidence-recall", started),
        "data": {
            "path": str(data),
            "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
            "conversations": len(conversations),
            "sessions": sum(c.sessions for c in conversations),
            "turns": sum(len(c.turns) for c in conversations),
            "questions": len(questions),
            "scored_questions": sum(q.scored for q in questions),
            "questions_by_category": dict(Counter(str(q.category) for q in questions)),
        },
        "defects": {"count": defects.count, "examples": defects.examples},
        "config": run_config(a.budget, conversations),
        "machine": b.machine,
        "llm_calls": b.guard.calls,
        "results": scoring.aggregate(records, list(METHODS)),
        "conversations": per_conversation,
        "questions": records,
    }
    write_results(a.out, "locomo", report, plot, show=() if a.quiet else ("locomo-table",))
    say(a.quiet, f"data defects: {defects.count}; chat model calls: {b.guard.calls}")
    return report


def bars(ax: Any, groups: Sequence[str], series: dict[str, list[float | None]]) -> None:
    """Grouped bars: one group per label, one bar per series."""
    width = 0.8 / len(series)
    for j, (name, values) in enumerate(series.items()):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, [v or 0.0 for v in values], width, label=name)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.legend(fontsize=8)


def plot(report: dict[str, Any], plt: Any) -> Any:
    """Evidence recall per category and method."""
    results, groups = report["results"], [str(c) for c in CATEGORIES]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bars(ax, [*CATEGORIES.values(), "overall 1-4"], {
        m: [r["by_category"][g] for g in groups] + [r["overall_1_4"]] for m, r in results.items()
    })  # fmt: skip
    ax.set(ylabel="evidence recall", title=f"LoCoMo @ {report['config']['budget_tokens']} tokens")
    return fig


COMMON = ("out", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The data, how much of it, and the context's token budget."""
    p.add_argument("--data", default=DEFAULT_DATA, help="LoCoMo-format JSON file")
    p.add_argument("--limit", type=int, default=None, help="first N conversations only")
    p.add_argument("--budget", type=int, default=1800, help="context token budget")


if __name__ == "__main__":
    raise SystemExit(main("locomo"))
