"""A fast experiment loop for `bench.locomo`: replay once, then re-ask recall per variant.

``prepare`` replays every conversation into a kept database (``--db``, created on the
embedded server) with a fixed key prefix, as `bench.locomo` does. ``ask`` re-runs the
recall node for every scored question with the budget the window leaves
(``memory_in_budget``), once per variant of `Context` overrides, and prints recall per
category next to the last full run's hybrid baseline
(``bench/results/locomo.json``). Minutes per variant instead of a half-hour run; the
full run stays the number that counts.

    .venv/bin/python -m bench.locomo_loop prepare --db bench_locomo_loop
    .venv/bin/python -m bench.locomo_loop ask --db bench_locomo_loop "" "entity_weight=0.5"

A knob of the replay itself (``window_token_share``, ``window_size``, ``summary_batch``)
needs a replay of its own: `bench.locomo` with the knob set in the environment
(`bench.window_share`). ``--out`` writes the variants' recall per category and
leave-one-conversation-out over them as JSON.

``drop`` removes the database and the prefix's keys. With ``weight_recency`` at its
default of 0, the order of the questions and access history do not change the results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.locomo import DEFAULT_DATA
from bench.locomo_cv import cross_validate
from bench.locomo_data import SCORED_CATEGORIES, load_locomo
from bench.locomo_pipeline import (
    RECALL_K,
    GuardChatModel,
    build_recall_graph,
    build_replay_graph,
    recall_context,
    recall_context_ids,
    reindex_turns,
    replay,
    replay_context,
)
from bench.locomo_report import git_commit
from bench.locomo_scoring import aggregate, evidence_recall, message_tokens
from bench.stats import quiet_logs, write_json
from memory_graph_agent.local.embedded import ensure_services
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import services_session
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.postgres import with_database

RESULTS = Path("bench/results/locomo.json")
DEFAULTS = Settings().by_name()


def _state_file(db: str) -> Path:
    return Path(f"/tmp/{db}.json")


def parse_variant(text: str) -> dict[str, Any]:
    """``"a=1,b=0.5"`` -> ``{"a": 1, "b": 0.5}``, typed like the setting."""
    out: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        out[key] = type(DEFAULTS[key])(value)
    return out


async def prepare(db: str, data: str, limit: int | None) -> None:
    """Create ``db`` and replay every conversation into it."""
    urls = await asyncio.to_thread(ensure_services)
    async with await psycopg.AsyncConnection.connect(urls.database_url, autocommit=True) as c:
        await c.execute(f'CREATE DATABASE "{db}"')
    url, prefix = with_database(urls.database_url, db), f"loop-{db}-{uuid.uuid4().hex[:6]}"
    conversations, _ = load_locomo(Path(data), limit)
    spec = register_chat_model(f"locomo-guard-{uuid.uuid4().hex[:8]}", GuardChatModel())
    async with (
        isolated_services(url, urls.redis_url, prefix),
        services_session(EMBEDDING) as services,
    ):
        graph = build_replay_graph(services)
        for conv in conversations:
            t0 = time.perf_counter()
            await replay(graph, conv, replay_context(conv, spec), lambda: None)
            print(f"{conv.sample_id}: replayed in {time.perf_counter() - t0:.0f} s", flush=True)
    state = {
        "url": url,
        "redis": urls.redis_url,
        "prefix": prefix,
        "turn_context_weight": DEFAULTS["turn_context_weight"],
    }
    _state_file(db).write_text(json.dumps(state))


async def ask(
    db: str, data: str, limit: int | None, variants: list[str], budget: int
) -> dict[str, Any]:
    """Recall every scored question once per variant; print recall per category.

    Returns the report ``--out`` writes: each variant's recall per category, its tokens,
    and leave-one-conversation-out cross-validation over the variants (ties go to the
    first).
    """
    state = json.loads(_state_file(db).read_text())
    machine = await machine_info(state["url"])
    conversations, _ = load_locomo(Path(data), limit)
    spec = register_chat_model(f"locomo-guard-{uuid.uuid4().hex[:8]}", GuardChatModel())
    hybrid = json.loads(RESULTS.read_text())["results"]["hybrid"]["by_category"]
    cats = sorted(SCORED_CATEGORIES)
    records = [
        {"sample_id": conv.sample_id, "category": q.category, "grid": {}, "grid_tokens": {}}
        for conv in conversations
        for q in conv.questions
        if q.scored and q.category in SCORED_CATEGORIES
    ]
    print("variant".ljust(48), *(f"c{c}".rjust(6) for c in cats), "all".rjust(7), "s".rjust(5))
    print("hybrid (last full run)".ljust(48), *(f"{hybrid[str(c)]:6.3f}" for c in cats))
    async with (
        isolated_services(state["url"], state["redis"], state["prefix"]),
        services_session(EMBEDDING) as services,
    ):
        graph = build_recall_graph(services)
        prepared = state.get("turn_context_weight", 0.0)
        indexed = prepared  # the weight the stored turn vectors were made with

        async def index_with(weight: float) -> None:
            nonlocal indexed
            if weight != indexed:  # an index-time knob: the turns are indexed again
                await reindex_turns(services, conversations, weight)
                indexed = weight

        try:
            for variant in variants:
                t0, rows = time.perf_counter(), iter(records)
                await index_with(parse_variant(variant).get("turn_context_weight", prepared))
                for conv in conversations:
                    # the whole budget: the recall node leaves out the window it is shown
                    base = recall_context(conv, spec, budget, RECALL_K)
                    ctx = base.override(**parse_variant(variant))
                    window = await services.window.window(conv.user_id, conv.thread_id)
                    window_tokens = message_tokens([m.to_message() for m in window])
                    for q in conv.questions:
                        if not q.scored or q.category not in SCORED_CATEGORIES:
                            continue
                        ids, tokens = await recall_context_ids(graph, conv, ctx, q)
                        row = next(rows)
                        found = ids | {m.id for m in window}
                        row["grid"][variant] = evidence_recall(q.evidence, found)
                        row["grid_tokens"][variant] = tokens + window_tokens
                scores = aggregate(_as_methods(records), [variant])[variant]
                print(
                    (variant or "defaults").ljust(48),
                    *(_cell(scores["by_category"][str(c)]) for c in cats),
                    f"{scores['overall_1_4']:7.4f}",
                    f"{time.perf_counter() - t0:5.0f}",
                    flush=True,
                )
        finally:
            await index_with(prepared)  # the database as `prepare` left it
    cv = cross_validate(records, variants, variants[0])
    cv["chosen_in_folds"] = dict(Counter(f["chosen"] for f in cv["folds"]))
    print(
        f"leave one conversation out: chosen {cv['chosen_in_folds']}, "
        f"cross-validated {cv['overall_1_4']:.4f}",
        flush=True,
    )
    return {
        "budget": budget,
        "commit": git_commit(),
        "machine": machine,
        "hybrid": {"by_category": hybrid},
        "variants": aggregate(_as_methods(records), variants),
        "cross_validated": {k: v for k, v in cv.items() if k not in ("grid", "folds")},
    }


def _cell(value: float | None) -> str:
    return "-".rjust(6) if value is None else f"{value:6.3f}"


def _as_methods(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The loop's records in `aggregate`'s shape: a variant is a method."""
    return [{**r, "recall": r["grid"], "tokens": r["grid_tokens"]} for r in records]


async def drop(db: str) -> None:
    """Drop the loop's database and delete its keys."""
    state = json.loads(_state_file(db).read_text())
    from redis.asyncio import Redis

    redis = Redis.from_url(state["redis"])
    try:
        keys = [k async for k in redis.scan_iter(match=f"{state['prefix']}:*", count=1000)]
        if keys:
            await redis.delete(*keys)
    finally:
        await redis.aclose()
    urls = await asyncio.to_thread(ensure_services)
    async with await psycopg.AsyncConnection.connect(urls.database_url, autocommit=True) as c:
        await c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    _state_file(db).unlink()


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run."""
    p = argparse.ArgumentParser(prog="python -m bench.locomo_loop", description=__doc__)
    p.add_argument("command", choices=("prepare", "ask", "drop"))
    p.add_argument("variants", nargs="*", default=[""], help='e.g. "topic_weight=0.3"')
    p.add_argument("--db", default="bench_locomo_loop", help="database name (kept)")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--budget", type=int, default=1800)
    p.add_argument("--out", default=None, help="ask: write the report here (JSON)")
    a = p.parse_intermixed_args(argv)
    quiet_logs()
    if a.command == "prepare":
        asyncio.run(prepare(a.db, a.data, a.limit))
    elif a.command == "ask":
        report = asyncio.run(ask(a.db, a.data, a.limit, a.variants or [""], a.budget))
        if a.out:
            write_json(Path(a.out), report)
    else:
        asyncio.run(drop(a.db))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
