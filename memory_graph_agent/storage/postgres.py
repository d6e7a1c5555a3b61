"""The one Postgres driver (psycopg 3) and the memory stores' one pool: a SQLAlchemy engine.

Why SQLAlchemy's pool: `PGVectorStore` needs an engine (`PGEngine.from_engine`), so its
pool serves everything else too: our own SQL (`Database.run`) and the read path's
pipelined searches (`Database.pipeline`, on the driver connection itself). It connects
in the caller when no connection is idle, so with Postgres down a call fails at once
(degraded mode) rather than after a wait for the pool; it hands out the most recently
used connection first (the warmest backend). A connection is checked on
checkout without a round trip (`check_idle`, instead of ``pool_pre_ping``'s ``SELECT 1``):
only one the server has written to while idle (a restart's termination notice, an end
of file) is really pinged, and replaced if dead. The other pool of a process is
LangGraph's checkpointer's (`services.stores.open_checkpointer`), with the same check.

The engine belongs to the event loop that opened it: open and close it in that loop. Every
connection has a connect and a statement timeout (`PostgresTimeouts`), and schema changes
run once per version (`Database.migrate`), never at every open.
"""

from __future__ import annotations

import functools
import math
import os
import re
import select
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from langchain_postgres import PGEngine
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import event, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

Statement = str | tuple[str, dict[str, Any]]
_NAMED = re.compile(r"(?<![:\w]):(\w+)")

SCHEMA_TABLE = "memory_schema"
_SCHEMA_DDL = (
    f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (component TEXT PRIMARY KEY, "
    "version INT NOT NULL, migrated_at TIMESTAMPTZ NOT NULL DEFAULT now())"
)


@dataclass(frozen=True)
class PostgresTimeouts:
    """How long the stores wait for Postgres before they run degraded.

    ``DATABASE_CONNECT_TIMEOUT_S`` (default 5) bounds a new connection,
    ``DATABASE_STATEMENT_TIMEOUT_S`` (default 30) each statement on the server; `deadline_s`
    bounds a whole store call on the client, for a network that stops answering at all.
    """

    connect_s: float = 5.0
    statement_s: float = 30.0

    @classmethod
    def from_env(cls) -> PostgresTimeouts:
        """The timeouts of the environment (defaults where unset)."""
        return cls(
            connect_s=float(os.environ.get("DATABASE_CONNECT_TIMEOUT_S") or cls.connect_s),
            statement_s=float(os.environ.get("DATABASE_STATEMENT_TIMEOUT_S") or cls.statement_s),
        )

    @property
    def deadline_s(self) -> float:
        """Client-side bound of one store call: a connect, a statement, and some slack."""
        return self.connect_s + self.statement_s + 5

    @property
    def reconnect_s(self) -> float:
        """How long a `psycopg_pool` pool keeps reconnecting on its own after losing Postgres.

        The pool retries in the background, backing off (1, 2, 4, 8 s ...); at its default
        (5 min) an outage of a minute puts its next attempt up to a minute after Postgres is
        back, and a caller waiting on the pool meanwhile fails at `deadline_s` with Postgres
        up. Given up this much before `deadline_s` (a connect and a second earlier), a
        reconnecting task makes its last attempt in time for any caller already waiting;
        once it has given up, the next caller's request makes a new attempt at once.
        """
        return self.deadline_s - max(1, math.ceil(self.connect_s)) - 1

    def connect_args(self) -> dict[str, Any]:
        """Connection parameters: the timeouts, and TCP keepalives that notice a silent peer."""
        return {
            "connect_timeout": max(1, math.ceil(self.connect_s)),
            "options": f"-c statement_timeout={int(self.statement_s * 1000)}",
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
            "tcp_user_timeout": int(self.deadline_s * 1000),
        }


def _written_while_idle(conn: psycopg.AsyncConnection) -> bool:
    """Whether an idle connection is closed, broken, or has something from the server to read.

    A healthy idle connection has nothing to read: the server writes to it while idle only
    when it closes it (a restart's termination notice, a dead peer's end of file).
    """
    if conn.closed or conn.broken:
        return True
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return bool(readable)


async def check_idle(conn: psycopg.AsyncConnection) -> None:
    """`psycopg_pool`'s check, without a round trip while the connection is healthy.

    Raises like `AsyncConnectionPool.check_connection` (the pool then discards the
    connection and takes another) when the server has closed it or it is broken.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    if _written_while_idle(conn):  # a notice or EOF from the server: see if it still answers
        await AsyncConnectionPool.check_connection(conn)


def _checkout_check(engine: AsyncEngine) -> Any:
    """SQLAlchemy's checkout hook doing what `check_idle` does for `psycopg_pool`."""
    dialect = engine.sync_engine.dialect

    def check(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if not _written_while_idle(dbapi_connection.driver_connection):
            return
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception as exc:  # any failure of the ping means: replace it
            raise DisconnectionError(f"the server closed the connection: {exc}") from exc
        if not alive:
            raise DisconnectionError("the server closed the connection")

    return check


def sqlalchemy_url(url: str) -> str:
    """Turn a libpq URL into the psycopg 3 async SQLAlchemy URL."""
    for scheme in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme) :]
    raise ValueError(f"DATABASE_URL must be a postgresql:// URL, got {url.split('://')[0]}://...")


def with_database(url: str, db: str) -> str:
    """The same libpq URL pointing at another database."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


class Database:
    """A pooled engine plus the `PGEngine` view `langchain-postgres` needs."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.vectors = PGEngine.from_engine(engine)
        self._settings: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()

    @classmethod
    def connect(cls, database_url: str) -> Database:
        """Pool connections to ``database_url``, checking each before use, with timeouts."""
        timeouts = PostgresTimeouts.from_env()
        engine = create_async_engine(
            sqlalchemy_url(database_url),
            pool_use_lifo=True,  # the most recently used connection: the warmest backend
            pool_timeout=timeouts.deadline_s,
            connect_args=timeouts.connect_args(),
        )
        event.listen(engine.sync_engine, "checkout", _checkout_check(engine))
        return cls(engine)

    async def run(self, *statements: Statement) -> list[dict[str, Any]]:
        """Run statements in one transaction; return the rows of the last one."""
        rows: list[dict[str, Any]] = []
        async with self.engine.begin() as conn:
            for stmt in statements:
                sql, params = (stmt, {}) if isinstance(stmt, str) else stmt
                result = await conn.execute(text(sql), params)
                rows = [dict(r) for r in result.mappings()] if result.returns_rows else []
        return rows

    async def pipeline(self, *statements: Statement) -> list[list[dict[str, Any]]]:
        """Run the read path's statements in one round trip; the rows of each.

        They run on a pooled connection switched to autocommit while they run (no
        ``BEGIN``/``ROLLBACK`` round trips) and handed back out of it, or discarded if it
        cannot be. Leading ``SET LOCAL`` options (a search's HNSW options) become the
        connection's session settings (`_settle`: sent only when a value changes; every
        search that needs one sets it), a single statement is then sent alone, and several
        at once in psycopg's pipeline mode: one network wait either way. Parameters are
        named as for `run` (``:name``); a ``SET LOCAL`` has no rows.
        """
        settings = [_setting(s) for s in statements]
        n = next((i for i, found in enumerate(settings) if found is None), len(statements))
        queries = statements[n:]
        async with self.engine.connect() as conn:
            # checked out already by connect(): reading it does no I/O (no greenlet needed)
            driver: psycopg.AsyncConnection = conn.sync_connection.connection.driver_connection
            await driver.set_autocommit(True)
            try:
                await self._settle(driver, dict(s for s in settings[:n] if s is not None))
                cursors = [driver.cursor(row_factory=dict_row) for _ in queries]
                if len(queries) == 1:
                    await cursors[0].execute(*_driver_statement(queries[0]))
                else:
                    async with driver.pipeline():
                        for cur, stmt in zip(cursors, queries, strict=True):
                            await cur.execute(*_driver_statement(stmt))
                rows = [await c.fetchall() if _has_rows(c) else [] for c in cursors]
            finally:
                idle = not driver.closed and not driver.broken
                if idle and driver.info.transaction_status == TransactionStatus.IDLE:
                    await driver.set_autocommit(False)
                else:  # cancelled mid-statement, say: never hand back a connection in autocommit
                    await conn.invalidate()
        return [[] for _ in range(n)] + rows

    async def _settle(self, driver: psycopg.AsyncConnection, settings: dict[str, str]) -> None:
        """Give ``driver`` these settings for its session; a round trip only if one changes."""
        current = self._settings.setdefault(driver, {})
        changed = {k: v for k, v in settings.items() if current.get(k) != v}
        if changed:
            calls = ", ".join("set_config(%s, %s, false)" for _ in changed)
            await driver.execute(f"SELECT {calls}", [x for kv in changed.items() for x in kv])
            current.update(changed)

    async def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one statement in its own transaction; return its rows."""
        return await self.run((sql, params or {}))

    async def migrate(self, component: str, version: int, *ddl: str, force: bool = False) -> bool:
        """Run ``ddl`` unless ``component`` is at ``version`` already; True if it ran.

        The check is one cheap read, so opening the stores takes no lock once migrated
        (``ALTER TABLE`` waits for ACCESS EXCLUSIVE even when it changes nothing). Migrations
        are serialized by an advisory lock and have no statement timeout.
        """
        if not force and await self._schema_version(component) >= version:
            return False
        record = (
            f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES (:c, :v) "
            "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version, migrated_at = now()"
        )
        await self.run(
            f"SELECT pg_advisory_xact_lock(hashtext('{SCHEMA_TABLE}'))",
            "SET LOCAL statement_timeout = 0",
            _SCHEMA_DDL,
            *ddl,
            (record, {"c": component, "v": version}),
        )
        return True

    async def _schema_version(self, component: str) -> int:
        rows = await self.query(f"SELECT to_regclass('public.{SCHEMA_TABLE}') IS NOT NULL AS ok")
        if not rows[0]["ok"]:
            return 0
        sql = f"SELECT version FROM {SCHEMA_TABLE} WHERE component = :c"
        found = await self.query(sql, {"c": component})
        return int(found[0]["version"]) if found else 0

    async def iterative_scans(self) -> bool:
        """Whether pgvector is 0.8 or newer, which has iterative HNSW scans."""
        rows = await self.query("SELECT extversion FROM pg_extension WHERE extname='vector'")
        parts = rows[0]["extversion"].split(".")[:2] if rows else []
        return bool(rows) and tuple(int(p) for p in parts if p.isdigit()) >= (0, 8)

    @asynccontextmanager
    async def psycopg(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled psycopg connection, for code written against psycopg's own API."""
        async with self.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            yield raw.driver_connection

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()


_ROWS = (ExecStatus.TUPLES_OK, ExecStatus.SINGLE_TUPLE, ExecStatus.TUPLES_CHUNK)
_SET_LOCAL = re.compile(r"SET LOCAL ([\w.]+) = (\S+)")


def _has_rows(cursor: psycopg.AsyncCursor) -> bool:
    """Whether the cursor's statement returned rows (``description`` is not ``None``).

    Reads the result's status, as ``description`` does, without making its columns.
    """
    result = cursor.pgresult
    return result is not None and (result.nfields > 0 or result.status in _ROWS)


def _setting(stmt: Statement) -> tuple[str, str] | None:
    """``(name, value)`` of a ``SET LOCAL name = value`` statement, else ``None``."""
    found = _SET_LOCAL.fullmatch(stmt.strip()) if isinstance(stmt, str) else None
    return (found.group(1), found.group(2)) if found else None


def _driver_statement(stmt: Statement) -> tuple[str, dict[str, Any] | None]:
    """A `Statement` in psycopg's own parameter style (``%(name)s``), rows as dicts."""
    sql, params = (stmt, None) if isinstance(stmt, str) else stmt
    if not params:
        return sql, None
    return _driver_sql(sql), params


@functools.lru_cache(maxsize=512)
def _driver_sql(sql: str) -> str:
    """``sql`` with ``:name`` parameters as ``%(name)s`` (the same few texts recur: cached)."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))
