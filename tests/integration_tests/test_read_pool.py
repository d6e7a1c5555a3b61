"""The read path's connection pool (real Postgres): a healthy connection is handed out
without a round trip, one the server has closed is checked, dropped and replaced."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from memory_graph_agent.storage import read_pool
from memory_graph_agent.storage.postgres import Database
from memory_graph_agent.storage.read_pool import ReadPool, check_idle


@pytest.fixture
async def pool(memory_env):
    reads = ReadPool(memory_env["DATABASE_URL"], {}, timeout_s=10)
    yield reads
    await reads.aclose()


@pytest.fixture
def checks(monkeypatch) -> list[int]:
    """Each real check (a round trip) the pool makes, by backend pid."""
    seen: list[int] = []
    real = AsyncConnectionPool.check_connection

    async def counted(conn: psycopg.AsyncConnection) -> None:
        seen.append(conn.info.backend_pid)
        await real(conn)

    monkeypatch.setattr(read_pool.AsyncConnectionPool, "check_connection", counted)
    return seen


async def _pid(reads: ReadPool) -> int:
    async with await reads.connection() as conn:
        return conn.info.backend_pid


async def test_a_healthy_connection_costs_no_round_trip(pool, checks):
    first = await _pid(pool)
    assert [await _pid(pool) for _ in range(5)] == [first] * 5
    assert checks == []


async def test_a_connection_the_server_closed_is_replaced(pool, checks, memory_env):
    pid = await _pid(pool)
    async with await psycopg.AsyncConnection.connect(
        memory_env["DATABASE_URL"], autocommit=True
    ) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    await asyncio.sleep(0.2)  # the termination notice reaches the idle connection
    async with await pool.connection() as conn:
        await conn.execute("SELECT 1")
        assert conn.info.backend_pid != pid
    assert checks == [pid]  # only the closed one was really checked


async def test_check_idle_refuses_a_closed_connection(memory_env):
    conn = await psycopg.AsyncConnection.connect(memory_env["DATABASE_URL"])
    await check_idle(conn)  # open and idle: fine
    await conn.close()
    with pytest.raises(psycopg.OperationalError):
        await check_idle(conn)


async def test_the_searches_run_on_the_read_pool(services):
    db: Database = services.db
    rows = await db.pipeline("SELECT current_setting('application_name') AS name")
    assert rows[0][0]["name"] == read_pool.APPLICATION_NAME
