"""The one Postgres driver and pool of the memory stores: a SQLAlchemy async engine.

psycopg 3 under SQLAlchemy's pool. `langchain_postgres.PGVectorStore` runs on it through
the public `PGEngine.from_engine`, and our own SQL (bookkeeping the vector store has no API
for) runs on the same engine through `Database.run`. The engine belongs to the event loop
that opened it: open it in the loop that uses it, and close it there
(`memory_graph_agent.services.open_services`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from langchain_postgres import PGEngine
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

Statement = str | tuple[str, dict[str, Any]]


def sqlalchemy_url(url: str) -> str:
    """Turn a libpq URL into the psycopg 3 async SQLAlchemy URL."""
    for scheme in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme) :]
    raise ValueError(f"DATABASE_URL must be a postgresql:// URL, got {url.split('://')[0]}://...")


def with_database(url: str, db: str) -> str:
    """The same libpq URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


class Database:
    """A pooled engine plus the `PGEngine` view `langchain-postgres` needs."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.vectors = PGEngine.from_engine(engine)

    @classmethod
    def connect(cls, database_url: str) -> Database:
        """Pool connections to ``database_url``, checking each before use."""
        return cls(create_async_engine(sqlalchemy_url(database_url), pool_pre_ping=True))

    async def run(self, *statements: Statement) -> list[dict[str, Any]]:
        """Run statements in one transaction; return the rows of the last one."""
        rows: list[dict[str, Any]] = []
        async with self.engine.begin() as conn:
            for stmt in statements:
                sql, params = (stmt, {}) if isinstance(stmt, str) else stmt
                result = await conn.execute(text(sql), params)
                rows = [dict(r) for r in result.mappings()] if result.returns_rows else []
        return rows

    @asynccontextmanager
    async def psycopg(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled psycopg connection, for code written against psycopg's own API."""
        async with self.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            yield raw.driver_connection

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()
