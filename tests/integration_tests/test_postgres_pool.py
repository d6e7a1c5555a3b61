"""The stores' one pool (real Postgres): SQLAlchemy's, shared by the read path's pipelines.

A healthy connection is handed out without a round trip, one the server has closed is
checked, dropped and replaced; a read hands its connection back as it found it (out of
autocommit, so the next transaction is one); a server that is down fails a read at once.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from sqlalchemy.exc import DataError, OperationalError

from memory_graph_agent.storage.postgres import Database, check_idle

PID = "SELECT pg_backend_pid() AS pid"


@pytest.fixture
async def db(memory_env):
    database = Database.connect(memory_env["DATABASE_URL"])
    yield database
    await database.aclose()


@pytest.fixture
def pings(db, monkeypatch) -> list[int]:
    """Each real check (a round trip) the pool makes on checkout."""
    seen: list[int] = []
    real = db.engine.sync_engine.dialect.do_ping

    def counted(dbapi_connection) -> bool:
        seen.append(1)
        return real(dbapi_connection)

    monkeypatch.setattr(db.engine.sync_engine.dialect, "do_ping", counted)
    return seen


async def _pid(db: Database) -> int:
    return (await db.pipeline(PID))[0][0]["pid"]


async def test_a_healthy_connection_costs_no_round_trip(db, pings):
    first = await _pid(db)
    assert [await _pid(db) for _ in range(5)] == [first] * 5
    assert (await db.query(PID))[0]["pid"] == first  # the same pool serves our own SQL
    assert pings == []


async def test_a_connection_the_server_closed_is_replaced(db, pings, memory_env):
    pid = await _pid(db)
    async with await psycopg.AsyncConnection.connect(
        memory_env["DATABASE_URL"], autocommit=True
    ) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    await asyncio.sleep(0.2)  # the termination notice reaches the idle connection
    assert await _pid(db) != pid
    assert pings == [1]  # only the closed one was really checked


async def test_check_idle_refuses_a_closed_connection(memory_env):
    conn = await psycopg.AsyncConnection.connect(memory_env["DATABASE_URL"])
    await check_idle(conn)  # open and idle: fine
    await conn.close()
    with pytest.raises(psycopg.OperationalError):
        await check_idle(conn)


async def test_a_read_leaves_the_connection_writable(db):
    pid = await _pid(db)
    rows = await db.pipeline(
        "SET LOCAL hnsw.ef_search = 123", "SELECT current_setting('hnsw.ef_search') AS ef"
    )
    assert rows == [[], [{"ef": "123"}]]
    # autocommit does not stay: the next user's statements are one transaction again
    await db.run("CREATE TEMP TABLE written (x int)", "INSERT INTO written VALUES (1)")
    with pytest.raises(DataError):
        await db.run("INSERT INTO written VALUES (2)", "SELECT 1 / 0")
    assert await db.query(f"{PID}, (SELECT array_agg(x) FROM written) AS xs") == [
        {"pid": pid, "xs": [1]}
    ]


async def test_a_pipeline_returns_each_statements_rows_and_none_for_a_command(db):
    rows = await db.pipeline(
        "SELECT 1 AS one", "DO $$BEGIN END$$", "SELECT 2 AS two WHERE false", "SELECT 3 AS three"
    )
    assert rows == [[{"one": 1}], [], [], [{"three": 3}]]
    assert await db.pipeline("DO $$BEGIN END$$") == [[]]


async def test_named_parameters_reach_the_driver_the_same_every_time(db):
    # ``:name`` is a parameter; ``::cast``, ``%`` and a ``:`` inside a literal are not
    sql = "SELECT :a::int + 1 AS n, 'a%' || :b AS s, '12:30' AS t, :a::text LIKE '4%' AS four"
    for a, b in ((41, "x"), (7, "y")):
        assert await db.pipeline((sql, {"a": a, "b": b})) == [
            [{"n": a + 1, "s": f"a%{b}", "t": "12:30", "four": a == 41}]
        ]


async def test_a_search_sends_its_options_once_per_connection(db, memory_env):
    sent: list[str] = []
    real = psycopg.AsyncConnection.execute

    async def recorded(self, query, params=None, **kw):
        sent.append(str(query))
        return await real(self, query, params, **kw)

    options = ("SET LOCAL hnsw.ef_search = 123", "SET LOCAL hnsw.iterative_scan = strict_order")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.AsyncConnection, "execute", recorded)
        for _ in range(3):
            rows = await db.pipeline(*options, "SELECT current_setting('hnsw.ef_search') AS ef")
            assert rows == [[], [], [{"ef": "123"}]]
        assert sum("set_config" in q for q in sent) == 1  # once: then the session has it
        await db.pipeline("SET LOCAL hnsw.ef_search = 40", "SELECT 1 AS one")
        assert sum("set_config" in q for q in sent) == 2  # a changed value is sent again


async def test_several_statements_keep_their_places(db):
    rows = await db.pipeline(
        "SET LOCAL hnsw.ef_search = 100", "SELECT 1 AS a", ("SELECT :b AS b", {"b": 2})
    )
    assert rows == [[], [{"a": 1}], [{"b": 2}]]


async def test_a_server_that_is_down_fails_a_read_at_once(tmp_path, monkeypatch):
    # no server listens there: the read fails on connecting, not after the pool's timeout
    monkeypatch.setenv("DATABASE_CONNECT_TIMEOUT_S", "30")
    db = Database.connect(f"postgresql://postgres@/postgres?host={tmp_path}")
    start = asyncio.get_running_loop().time()
    try:
        with pytest.raises(OperationalError):
            await db.pipeline("SELECT 1")
    finally:
        await db.aclose()
    assert asyncio.get_running_loop().time() - start < 5


async def test_a_read_cancelled_midway_leaves_a_usable_pool(db):
    task = asyncio.ensure_future(db.pipeline("SELECT pg_sleep(5)"))
    await asyncio.sleep(0.5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    start = asyncio.get_running_loop().time()
    assert await db.pipeline("SELECT 1 AS one") == [[{"one": 1}]]
    assert asyncio.get_running_loop().time() - start < 2
    # whatever connection the pool hands out now runs a transaction as one
    with pytest.raises(DataError):
        await db.run("CREATE TEMP TABLE t (x int)", "SELECT 1 / 0")
    assert await db.query("SELECT to_regclass('pg_temp.t') IS NULL AS gone") == [{"gone": True}]
