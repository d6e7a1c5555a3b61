"""Checkpoint retention through LangGraph's public checkpointer API (CLI, notebooks, tests).

Each turn saves a few checkpoints, and a thread keeps them all: after the 6,000-turn soak
they were the largest thing in Postgres. `SaverCheckpoints` prunes threads to their
latest checkpoint with ``aprune(strategy="keep_latest")`` (langgraph-checkpoint-postgres
>= 3.2): the latest checkpoint of each namespace stays with its pending writes and the
blobs it references, in one transaction per thread on one snapshot, so a run appending to
the thread meanwhile loses nothing. A thread whose latest checkpoint still has pending
writes (a step under way, interrupted or crashed) is held whole, not pruned.

Rows deleted free no disk by themselves: Postgres reuses their space once a ``VACUUM``
has marked it free. Autovacuum does that some time later (by default after a fifth of a
table has changed); a prune runs it at once on the checkpoint tables (`reclaim`), so the
next checkpoints fill the space the pruned ones left, and empty pages at a table's end go
back to the file system. (``VACUUM FULL`` would give back all of it, but it locks the
tables against every run; a table that only reuses its space is as large as its busiest
day, not as its history.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

Verdict = Literal["prune", "in_flight"]
CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
"""LangGraph's checkpoint tables (langgraph-checkpoint-postgres)."""


class SaverCheckpoints:
    """Prune the threads of a LangGraph checkpointer (`BaseCheckpointSaver`) to their latest."""

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.saver = saver

    async def survey(self, thread_ids: Sequence[str]) -> dict[str, Verdict]:
        """For each thread with more than its latest checkpoint: prune it, or hold it."""
        verdicts: dict[str, Verdict] = {}
        for thread_id in thread_ids:
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            latest = [t async for t in self.saver.alist(config, limit=2)]
            if len(latest) < 2:
                continue  # nothing older than the latest to remove
            verdicts[thread_id] = "in_flight" if latest[0].pending_writes else "prune"
        return verdicts

    async def prune(self, thread_ids: Sequence[str]) -> None:
        """Keep only the latest checkpoint (with its pending writes) of each thread."""
        if thread_ids:
            await self.saver.aprune(list(thread_ids), strategy="keep_latest")
            await self.reclaim()

    async def reclaim(self) -> None:
        """``VACUUM`` the checkpoint tables: the pruned rows' space is free for new ones.

        Only for LangGraph's Postgres checkpointer (its connection or pool, in
        autocommit); another saver keeps its own storage.
        """
        conn = getattr(self.saver, "conn", None)
        statement = f"VACUUM (ANALYZE) {', '.join(CHECKPOINT_TABLES)}"
        if isinstance(conn, AsyncConnectionPool):
            async with conn.connection() as connection:
                await connection.execute(statement)
        elif isinstance(conn, AsyncConnection):
            async with self.saver.lock:  # a single connection is shared with the runs
                await conn.execute(statement)
