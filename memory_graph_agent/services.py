"""Process-wide connections to Redis and Postgres, opened lazily, never at import.

With ``REDIS_URL`` / ``DATABASE_URL`` set, those services are used; otherwise the
embedded ones (`memory_graph_agent.local.embedded`) are started or reused. Redis clients are bound to an
event loop, so one `Services` is kept per running loop; the Postgres engine runs on its
own background loop and is shared.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from langchain_core.embeddings import Embeddings
from langchain_postgres import PGEngine
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from memory_graph_agent.local.embedded import ensure_services
from memory_graph_agent.models import load_embeddings
from memory_graph_agent.storage.decisions import DecisionLog
from memory_graph_agent.storage.episodes import EpisodeLog
from memory_graph_agent.storage.memories import MemoryStore
from memory_graph_agent.storage.profile import ProfileStore
from memory_graph_agent.storage.queue import PendingQueue
from memory_graph_agent.storage.window import WindowStore

log = logging.getLogger(__name__)


def key_prefix() -> str:
    """Prefix of every Redis key of this project (``MEMORY_KEY_PREFIX``, default ``mem``)."""
    return os.environ.get("MEMORY_KEY_PREFIX", "mem")


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


@dataclass
class Services:
    """Everything a node needs to touch memory."""

    redis: Redis
    window: WindowStore
    queue: PendingQueue
    profile: ProfileStore
    memories: MemoryStore
    episodes: EpisodeLog
    embeddings: Embeddings
    decisions: DecisionLog


_engines: dict[str, PGEngine] = {}
_engine_lock = threading.Lock()
_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Services]] = (
    weakref.WeakKeyDictionary()
)


def pg_engine(database_url: str) -> PGEngine:
    """The shared `PGEngine` of a database URL (one per process)."""
    with _engine_lock:
        if database_url not in _engines:
            _engines[database_url] = PGEngine.from_connection_string(
                sqlalchemy_url(database_url), pool_pre_ping=True
            )
        return _engines[database_url]


async def get_services(embedding_model: str) -> Services:
    """Connect (once per event loop and embedding model) and return the stores."""
    loop = asyncio.get_running_loop()
    cache = _per_loop.setdefault(loop, {})
    # Keyed by the configured URLs too, so pointing the env elsewhere reconnects.
    key = "|".join(
        [embedding_model, os.environ.get("REDIS_URL", ""), os.environ.get("DATABASE_URL", "")]
    )
    if key in cache:
        return cache[key]
    urls = await asyncio.to_thread(ensure_services)
    embeddings, dim = await asyncio.to_thread(load_embeddings, embedding_model)
    # Fail fast when Redis is down (degraded mode takes over) instead of the client's
    # default retries with backoff, which would stall every node of the turn.
    redis = Redis.from_url(
        urls.redis_url,
        decode_responses=True,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=1),
        socket_connect_timeout=2,
        socket_timeout=10,
    )
    engine = pg_engine(urls.database_url)
    memories = await MemoryStore.open(engine, embeddings, dim)
    decisions = await DecisionLog.open(engine)
    episodes = await EpisodeLog.open(engine, dim)
    prefix = key_prefix()
    services = Services(
        redis=redis,
        window=WindowStore(redis, prefix),
        queue=PendingQueue(redis, prefix),
        profile=ProfileStore(redis, prefix),
        memories=memories,
        episodes=episodes,
        embeddings=embeddings,
        decisions=decisions,
    )
    cache[key] = services
    return services


@asynccontextmanager
async def open_checkpointer(database_url: str) -> AsyncIterator[AsyncPostgresSaver]:
    """A Postgres checkpointer on a small pool that checks connections before use.

    A single connection (``AsyncPostgresSaver.from_conn_string``) dies for good when
    Postgres restarts; the pool replaces broken connections.
    """
    pool = AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=8,
        open=False,
        check=AsyncConnectionPool.check_connection,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    await pool.open(wait=True)
    try:
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        yield saver
    finally:
        await pool.close()
