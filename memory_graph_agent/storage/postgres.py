"""The one Postgres driver and pool of the memory stores: a SQLAlchemy async engine.

`PGVectorStore` runs on it through `PGEngine.from_engine`, our own SQL through `Database.run`.
The engine belongs to the event loop that opened it: open and close it in that loop.
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
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


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

    async def query(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one statement in its own transaction; return its rows."""
        return await self.run((sql, params or {}))

    async def create(self, *ddl: str) -> None:
        """Run idempotent DDL; once more if another process created the same objects first."""
        try:
            await self.run(*ddl)
        except Exception as exc:
            if "already exists" not in str(exc) and "duplicate key" not in str(exc):
                raise
            await self.run(*ddl)  # IF NOT EXISTS: the rest is a no-op now

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
