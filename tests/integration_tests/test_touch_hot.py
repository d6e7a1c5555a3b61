"""Recording recalls (`MemoryStore.touch`) rewrites no index entry: heap-only (HOT) updates.

A touch changes no indexed column, so Postgres can keep the new row version on the old
one's page and skip every index (the HNSW one included) - if the page has room for it.
The measuring test runs on servers of its own, so only its writes reach the statistics.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import numpy as np
import pytest

from memory_graph_agent.local import embedded
from memory_graph_agent.storage.memories import FILLFACTOR, SCHEMA_VERSION, Memory, MemoryStore
from memory_graph_agent.storage.postgres import SCHEMA_TABLE, Database

DIM = 48


@pytest.fixture
async def shared_store(services, memory_env):
    """A store on the session's database (a table no other test opens)."""
    db = Database.connect(memory_env["DATABASE_URL"])
    store = await MemoryStore.open(db, services.embeddings, DIM)
    try:
        yield store
    finally:
        await db.aclose()


@pytest.fixture
async def store(services, private_home):
    """A store on servers of its own: no other database's transaction delays pruning.

    Postgres prunes a page's dead row versions (making room for the next in-place
    update) only once no transaction of the cluster is older than them; the shared test
    server runs other sessions' long transactions (CREATE DATABASE, CREATE INDEX, COPY).
    """
    urls = await asyncio.to_thread(embedded.ensure_services)
    db = Database.connect(urls.database_url)
    store = await MemoryStore.open(db, services.embeddings, DIM)
    try:
        yield store
    finally:
        await db.aclose()


async def _add(store: MemoryStore, user: str, n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    ids = []
    for i in range(n):
        v = rng.standard_normal(DIM)
        text = f"Memory {i} of {user}: " + "the user talked about the garden. " * (2 + i % 9)
        mem = Memory(user, "summary", text, 0.5, [f"s{seed}-{i}"], thread_id="t1")
        ids.append(await store.add(mem, (v / np.linalg.norm(v)).tolist()))
    return ids


async def _updates(db: Database, table: str, at_least: int) -> tuple[int, int]:
    """``(n_tup_upd, n_tup_hot_upd)`` of ``table`` once ``at_least`` updates are counted.

    Each backend reports its counters when idle, at most once a second.
    """
    deadline = time.monotonic() + 20
    while True:
        rows = await db.query(
            "SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables "
            "WHERE relname = :t",
            {"t": table},
        )
        upd, hot = int(rows[0]["upd"]), int(rows[0]["hot"])
        if upd >= at_least or time.monotonic() > deadline:
            return upd, hot
        await asyncio.sleep(0.25)


async def _index_bytes(db: Database, table: str) -> dict[str, int]:
    rows = await db.query(
        "SELECT indexrelname AS name, pg_relation_size(indexrelid) AS bytes "
        "FROM pg_stat_user_indexes WHERE relname = :t",
        {"t": table},
    )
    return {r["name"]: int(r["bytes"]) for r in rows}


async def test_touches_update_no_index(store):
    user, stranger = (f"u-{uuid.uuid4().hex[:10]}" for _ in range(2))
    ids = await _add(store, user, 40, seed=1)
    theirs = await _add(store, stranger, 8, seed=2)
    before_upd, before_hot = await _updates(store.db, store.table, 0)
    indexes = await _index_bytes(store.db, store.table)

    # All rows at once first (a page's rows in one call), then overlapping halves; each
    # call also names a row twice (spelt otherwise) and another user's rows (left alone).
    batches = [ids, *(ids[r % 3 :: 2] for r in range(1, 6))]
    for batch in batches:
        await store.touch(user, [*batch, batch[0].upper(), *theirs])
    touched = sum(len(b) for b in batches)

    upd, hot = await _updates(store.db, store.table, before_upd + touched)
    assert upd - before_upd == touched
    assert hot - before_hot == touched, f"{touched - (hot - before_hot)} touches were not HOT"
    assert await _index_bytes(store.db, store.table) == indexes
    counts = {m.id: m.access_count for m in await store.get(user, ids)}
    assert counts == {i: sum(i in b for b in batches) for i in ids}
    assert all(m.last_accessed_at is not None for m in await store.get(user, ids))
    assert [m.access_count for m in await store.get(stranger, theirs)] == [0] * len(theirs)


async def test_an_older_table_gains_the_fillfactor(shared_store):
    store = shared_store
    await store.db.run(
        f'ALTER TABLE "{store.table}" RESET (fillfactor)',
        (f"UPDATE {SCHEMA_TABLE} SET version = 1 WHERE component = :c", {"c": store.table}),
    )
    reopened = await MemoryStore.open(store.db, store.vectors.embeddings, DIM)
    rows = await store.db.query(
        "SELECT reloptions FROM pg_class WHERE relname = :t", {"t": reopened.table}
    )
    assert f"fillfactor={FILLFACTOR}" in (rows[0]["reloptions"] or [])
    version = await store.db.query(
        f"SELECT version FROM {SCHEMA_TABLE} WHERE component = :c", {"c": store.table}
    )
    assert version[0]["version"] == SCHEMA_VERSION
