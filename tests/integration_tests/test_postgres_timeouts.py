"""A Postgres that stops answering, or a long query holding a lock: turns degrade, never hang.

The memory stores reach the session's Postgres through a TCP proxy the test can stall, as a
network partition would; the checkpointer keeps its own direct connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from graph.builder import build_graph
from memory_graph_agent.services.stores import services_session
from tests.conftest import EMBEDDING, kinds, say


class StallingProxy:
    """TCP in front of Postgres' unix socket; after `stall` no byte goes through any more."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.stalled = asyncio.Event()
        self.tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> StallingProxy:
        self.server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def stall(self) -> None:
        self.stalled.set()

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(str(self.socket_path))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self.tasks.add(task)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                if self.stalled.is_set():
                    await asyncio.Event().wait()  # the bytes are lost in the partition
                dst.write(data)
                await dst.drain()


def _socket_path(database_url: str) -> Path:
    params = conninfo_to_dict(database_url)
    if not str(params.get("host", "")).startswith("/"):
        pytest.skip("the session's Postgres is not on a unix socket")
    return Path(params["host"]) / f".s.PGSQL.{params.get('port', 5432)}"


async def test_a_partitioned_postgres_degrades_the_turn_instead_of_hanging(
    memory_env, checkpointer, make_context, monkeypatch
):
    params = conninfo_to_dict(memory_env["DATABASE_URL"])
    async with StallingProxy(_socket_path(memory_env["DATABASE_URL"])) as proxy:
        user, db = params.get("user", "postgres"), params["dbname"]
        url = f"postgresql://{user}@127.0.0.1:{proxy.port}/{db}"
        monkeypatch.setenv("DATABASE_URL", url)
        monkeypatch.setenv("DATABASE_CONNECT_TIMEOUT_S", "1")
        monkeypatch.setenv("DATABASE_STATEMENT_TIMEOUT_S", "2")
        async with services_session(EMBEDDING) as services:
            agent = build_graph(services, checkpointer=checkpointer)
            ctx = make_context()
            thread = f"t-{uuid.uuid4().hex[:8]}"
            await say(agent, ctx, thread, "before the partition")
            proxy.stall()
            state = await asyncio.wait_for(say(agent, ctx, thread, "during it"), 60)
            assert state["messages"][-1].type == "ai"
            assert ("recall", "unavailable") in kinds(state)


async def test_opening_the_stores_takes_no_lock_behind_a_long_query(services, memory_env):
    """Schema changes run once, at setup: a later open never queues an ACCESS EXCLUSIVE lock."""
    table = services.memories.table
    async with await psycopg.AsyncConnection.connect(memory_env["DATABASE_URL"]) as long_query:
        await long_query.execute(f'SELECT count(*) FROM "{table}"')  # holds ACCESS SHARE
        opened = asyncio.create_task(_open_and_close())
        try:
            await asyncio.wait_for(asyncio.shield(opened), 30)
        finally:
            await long_query.rollback()
            await opened
        # and recall, which reads the table, was never queued behind a pending ALTER TABLE


async def _open_and_close() -> None:
    async with services_session(EMBEDDING):
        pass
