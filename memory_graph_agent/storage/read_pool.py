"""The read path's own Postgres connections: a small pool that checks a connection for free.

A turn's searches are read-only statements (`Database.pipeline`). Through SQLAlchemy each
checkout cost a greenlet switch and a ``SELECT 1`` round trip (``pool_pre_ping``) before
the search itself, and a transaction around it. This pool hands out plain psycopg
connections, read-only and in autocommit, and checks each one without a round trip
(`check_idle`): an idle connection has nothing to read unless the server has closed it
(a restart sends a termination notice, a dead peer an end of file), so only then is it
really checked, and replaced. With no idle connection it connects at once, so a server
that is down fails the call at once (degraded mode) instead of a wait for the pool. A
search's HNSW options are the connection's own settings (`ReadPool.settle`), sent only
when they change. The LangGraph checkpointer's pool uses the same check.
"""

from __future__ import annotations

import asyncio
import select
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

READ_POOL_MAX = 8
"""At most this many read connections per process (a turn uses one to three at a time)."""
APPLICATION_NAME = "memory-agent-reads"
"""How the read connections show in ``pg_stat_activity``."""


async def check_idle(conn: psycopg.AsyncConnection) -> None:
    """Check a pooled connection before use, without a round trip when it is healthy.

    Raises like `AsyncConnectionPool.check_connection` (the pool then discards the
    connection and takes another) when the server has closed it or it is broken.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    if readable:  # a notice or EOF from the server while idle: see if it still answers
        await AsyncConnectionPool.check_connection(conn)


class ReadPool:
    """Up to `READ_POOL_MAX` read-only psycopg connections, kept while they are idle."""

    def __init__(
        self,
        database_url: str,
        connect_args: dict[str, Any],
        timeout_s: float,
        size: int = READ_POOL_MAX,
    ) -> None:
        options = f"{connect_args.get('options', '')} -c default_transaction_read_only=on"
        self._url = database_url
        self._kwargs = {
            "row_factory": dict_row,
            "application_name": APPLICATION_NAME,
            **connect_args,
            "options": options.strip(),
            "autocommit": True,
        }
        self._timeout = timeout_s
        self._slots = asyncio.Semaphore(size)
        self._idle: deque[psycopg.AsyncConnection] = deque()
        self._settings: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A healthy idle connection, or a new one; kept afterwards if it is still idle.

        Waits at most the pool's timeout for a free slot; a connection that errs, is
        cancelled mid-statement or is left in a transaction is closed, not kept.
        """
        async with asyncio.timeout(self._timeout):
            await self._slots.acquire()
        try:
            conn = await self._take()
            try:
                yield conn
            finally:
                await self._give_back(conn)
        finally:
            self._slots.release()

    async def settle(self, conn: psycopg.AsyncConnection, settings: dict[str, str]) -> None:
        """Give ``conn`` these settings for its session; a round trip only if one changes."""
        current = self._settings.setdefault(conn, {})
        changed = {k: v for k, v in settings.items() if current.get(k) != v}
        if not changed:
            return
        calls = ", ".join("set_config(%s, %s, false)" for _ in changed)
        await conn.execute(f"SELECT {calls}", [x for kv in changed.items() for x in kv])
        current.update(changed)

    async def aclose(self) -> None:
        """Close the idle connections."""
        while self._idle:
            await self._idle.pop().close()

    async def _take(self) -> psycopg.AsyncConnection:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the warmest
            try:
                await check_idle(conn)
                return conn
            except psycopg.Error:
                await conn.close()
        return await psycopg.AsyncConnection.connect(self._url, **self._kwargs)

    async def _give_back(self, conn: psycopg.AsyncConnection) -> None:
        idle = not conn.closed and not conn.broken
        if idle and conn.info.transaction_status == TransactionStatus.IDLE:
            self._idle.append(conn)
        else:
            await conn.close()
