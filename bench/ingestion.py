"""Ingestion throughput: turns per second into memory, raw and with a chat model.

    python -m bench ingestion [--turns 200] [--model local:smollm2] [--out bench/out]

The first ``--turns`` turns of a LongMemEval haystack are replayed as `bench.longmemeval`
replays them (memory inline), twice, each on fresh stores: ``raw`` (summaries are the
evicted turns, no model call) and ``model`` (``--model`` writes summaries, facts, decisions
and reflections). Reported per mode: turns, seconds, turns per second, what was stored.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import main, write_results
from bench.locomo_pipeline import GuardChatModel, Run, build_replay_graph, replay_context
from bench.longmemeval import DEFAULT_DATA, Haystack, Session, load_longmemeval, replay_haystack
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import services_session
from memory_graph_agent.settings import Settings


def first_turns(hay: Haystack, turns: int) -> Haystack:
    """``hay`` cut to its first ``turns`` turns, on whole exchanges of whole sessions."""
    kept: list[Session] = []
    left = turns
    for session in hay.sessions:
        if left <= 0:
            break
        cut: list = []
        for exchange in session.exchanges():
            if left <= 0:
                break
            cut.extend(exchange)
            left -= len(exchange)
        kept.append(replace(session, turns=tuple(cut)))
    return replace(hay, sessions=tuple(kept))


def mode_context(hay: Haystack, mode: str, model: str, guard: str) -> Run:
    """Raw: the replay's own settings (no model). Model: summaries and reflections by ``model``."""
    raw = replay_context(hay, guard)  # type: ignore[arg-type]
    if mode == "raw":
        return raw
    defaults = Settings.from_env().formation
    return Run(replace(raw.ctx, model=model), raw.settings).override(
        summary_mode="llm",
        reflect_after=defaults.reflect_after,
        reflect_importance_threshold=defaults.reflect_importance_threshold,
    )


async def ingest(hay: Haystack, mode: str, model: str, guard: str) -> dict[str, Any]:
    """Replay ``hay`` in ``mode`` on fresh stores; its timing and what it stored."""
    async with (
        isolated_services(tag=f"bench_ingest_{mode}"),
        services_session(EMBEDDING) as services,
    ):
        graph = build_replay_graph(services)
        ctx = mode_context(hay, mode, model, guard)
        t0 = time.perf_counter()
        fed = await replay_haystack(graph, hay, ctx)
        seconds = time.perf_counter() - t0
        counts = await services.memories.count(hay.user_id)
    return {
        "mode": mode,
        "model": model if mode == "model" else None,
        "turns": fed,
        "seconds": round(seconds, 1),
        "turns_per_s": round(fed / seconds, 2) if seconds else None,
        "stored": dict(counts),
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Both modes on the same turns; write ``ingestion.json`` under ``out``."""
    hay = first_turns(load_longmemeval(Path(a.data), 1, 0)[0], a.turns)
    guard = register_chat_model(f"ingest-guard-{uuid.uuid4().hex[:8]}", GuardChatModel())
    async with isolated_services(tag="bench_ingest_probe") as env:
        machine = await machine_info(env.database_url)
    runs = [await ingest(hay, mode, a.model, guard) for mode in ("raw", "model")]
    report = {
        "benchmark": "ingestion",
        "data": {"path": Path(a.data).name, "question_id": hay.question_id, "turns": a.turns},
        "machine": machine,
        "runs": runs,
    }
    write_results(a.out, "ingestion", report, show=("ingestion-table",))
    return report


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.ingestion` beside ``--out``."""
    p.add_argument("--data", default=str(DEFAULT_DATA), help="LongMemEval-format JSON")
    p.add_argument("--turns", type=int, default=200, help="turns replayed per mode")
    p.add_argument("--model", default="local:smollm2", help="the model mode's chat model")


if __name__ == "__main__":
    raise SystemExit(main("ingestion"))
