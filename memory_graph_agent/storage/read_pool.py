"""The read path's own Postgres connections: a psycopg pool that checks a connection for free.

A turn's searches are read-only pipelines (`Database.pipeline`). Through SQLAlchemy each
checkout cost a greenlet switch and a ``SELECT 1`` round trip (``pool_pre_ping``) before
the search itself. This pool hands out plain psycopg connections and checks each one
without a round trip (`check_idle`): an idle connection has nothing to read unless the
server has closed it (a restart sends a termination notice, a dead peer an end of
file), so only then is it really checked, and replaced. The LangGraph checkpointer's
pool uses the same check.
"""

from __future__ import annotations

import asyncio
import select
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

READ_POOL_MAX = 8
"""At most this many read connections per process (a turn uses one or two at a time)."""
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
    """Pooled psycopg connections for read-only statements, opened on first use."""

    def __init__(self, database_url: str, connect_args: dict[str, Any], timeout_s: float):
        self.pool = AsyncConnectionPool(
            database_url,
            min_size=1,
            max_size=READ_POOL_MAX,
            open=False,
            timeout=timeout_s,
            check=check_idle,
            kwargs={"row_factory": dict_row, "application_name": APPLICATION_NAME, **connect_args},
        )
        self._opened = False
        self._lock = asyncio.Lock()

    async def connection(self) -> Any:
        """The pool's ``connection()`` context manager, the pool opened first if needed."""
        if not self._opened:
            async with self._lock:
                if not self._opened:
                    await self.pool.open(wait=False)
                    self._opened = True
        return self.pool.connection()

    async def aclose(self) -> None:
        """Close every connection (a pool never opened has nothing to close)."""
        if self._opened:
            await self.pool.close()
            self._opened = False
