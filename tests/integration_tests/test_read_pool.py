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
    async with reads.connection() as conn:
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
    async with pool.connection() as conn:
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


async def test_a_search_sets_its_options_once_per_connection(pool, memory_env, monkeypatch):
    db = Database.connect(memory_env["DATABASE_URL"])
    sent: list[str] = []
    try:
        async with db.reads.connection() as conn:
            real = type(conn).execute

            async def recorded(self, query, params=None, **kw):
                sent.append(str(query))
                return await real(self, query, params, **kw)

            monkeypatch.setattr(type(conn), "execute", recorded)
        options = ("SET LOCAL hnsw.ef_search = 123", "SET LOCAL hnsw.iterative_scan = strict_order")
        for _ in range(3):
            rows = await db.pipeline(
                *options, "SELECT current_setting('hnsw.ef_search') AS ef, 1 AS one"
            )
            assert rows == [[], [], [{"ef": "123", "one": 1}]]
        assert sum("set_config" in q for q in sent) == 1  # once: then the session has it
        rows = await db.pipeline("SET LOCAL hnsw.ef_search = 40", "SELECT 1 AS one")
        assert sum("set_config" in q for q in sent) == 2  # a changed value is sent again
    finally:
        await db.aclose()


async def test_the_read_connections_cannot_write(services):
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        await services.db.pipeline("CREATE TABLE read_pool_must_not_write (x int)")


async def test_several_statements_keep_their_places(services):
    rows = await services.db.pipeline(
        "SET LOCAL hnsw.ef_search = 100", "SELECT 1 AS a", ("SELECT :b AS b", {"b": 2})
    )
    assert rows == [[], [{"a": 1}], [{"b": 2}]]


async def test_a_server_that_is_down_fails_the_call_at_once(tmp_path):
    # no server listens there: the call fails on connecting, not after the pool's timeout
    reads = ReadPool(f"postgresql://postgres@/postgres?host={tmp_path}", {}, timeout_s=30)
    start = asyncio.get_running_loop().time()
    with pytest.raises(psycopg.OperationalError):
        async with reads.connection():
            pass
    assert asyncio.get_running_loop().time() - start < 5


async def test_a_statement_cancelled_midway_leaves_a_usable_connection(pool):
    async def slow() -> None:
        async with pool.connection() as conn:
            started.set_result(None)
            await conn.execute("SELECT pg_sleep(5)")

    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(slow())
    await started
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    start = asyncio.get_running_loop().time()
    async with pool.connection() as conn:  # the sleep was cancelled on the server too
        assert (await (await conn.execute("SELECT 1 AS one")).fetchone()) == {"one": 1}
    assert asyncio.get_running_loop().time() - start < 2
