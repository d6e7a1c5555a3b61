"""Open, hand out and close the memory stores: Redis, Postgres and the embeddings.

Whoever runs the graph opens them (`open_services`) and passes them in; the LangGraph
server's graph factories use `server_services` and its lifespan closes them. No node
opens a connection or starts a server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from memory_graph_agent.core.loop_thread import LoopThread
from memory_graph_agent.local.embedded import (
    EmbeddedServiceError,
    crash_notice,
    embedded_running,
    ensure_services,
)
from memory_graph_agent.services.models import default_embedding_model, load_embeddings
from memory_graph_agent.storage.costs import MemoryCosts
from memory_graph_agent.storage.decisions import DecisionLog
from memory_graph_agent.storage.episodes import EpisodeLog
from memory_graph_agent.storage.keys import RedisKeys, default_prefix
from memory_graph_agent.storage.memories import MemoryStore
from memory_graph_agent.storage.outages import outages
from memory_graph_agent.storage.postgres import Database, PostgresTimeouts, check_idle
from memory_graph_agent.storage.profile import ProfileStore
from memory_graph_agent.storage.queue import PendingQueue
from memory_graph_agent.storage.runs import RunStarts
from memory_graph_agent.storage.threads import ThreadOwners
from memory_graph_agent.storage.window import WindowStore

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(eq=False)  # compared and hashed by identity: one set of open connections
class Services:
    """Everything the nodes, tools and CLI need to touch memory."""

    redis: Redis
    db: Database
    keys: RedisKeys
    window: WindowStore
    queue: PendingQueue
    costs: MemoryCosts
    profile: ProfileStore
    threads: ThreadOwners
    runs: RunStarts
    memories: MemoryStore
    episodes: EpisodeLog
    decisions: DecisionLog
    embeddings: Embeddings
    embedding_model: str
    database_url: str
    loop_thread: LoopThread | None = field(default=None, init=False)
    """The loop they live on when opened for sync code (`services_session_sync`), else None."""

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the services' loop thread and wait for its result (sync code).

        Only for services of `services_session_sync`: others live in the event loop that
        opened them, and a call from sync code there would block that very loop.
        """
        if self.loop_thread is None:
            coroutine.close()
            raise RuntimeError(
                "these services were opened in an event loop (services_session): await "
                "them there, or open them with services_session_sync() for sync code"
            )
        return self.loop_thread.run(coroutine)

    async def aclose(self) -> None:
        """Close the Redis client and the Postgres pool."""
        await self.redis.aclose()
        await self.db.aclose()


def crash_probe(error: str) -> str | None:
    """A sentence about new crashes of the embedded PostgreSQL (for `outages`), or None."""
    return crash_notice(os.environ.get("DATABASE_URL"), error)


async def open_services(embedding_model: str | None = None) -> Services:
    """Connect to Redis and Postgres (starting embedded servers if no URL is set).

    Args:
        embedding_model: ``provider:model`` of the embeddings; defaults to
            ``EMBEDDING_MODEL``, else OpenAI's with ``OPENAI_API_KEY``, else local MiniLM.
            The memory tables follow its dimension, so it is fixed per store, not per run.
    """
    urls = await asyncio.to_thread(ensure_services)
    spec = embedding_model or default_embedding_model()
    embeddings, dim = await asyncio.to_thread(load_embeddings, spec)
    # Fail fast when Redis is down (degraded mode takes over) instead of the client's
    # default retries with backoff, which would stall every node of the turn.
    redis = Redis.from_url(
        urls.redis_url,
        decode_responses=True,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=1),
        socket_connect_timeout=2,
        socket_timeout=10,
    )
    db = Database.connect(urls.database_url)
    outages.crash_probe = crash_probe
    try:
        memories = await MemoryStore.open(db, embeddings, dim)
        decisions = await DecisionLog.open(db)
        episodes = await EpisodeLog.open(db, dim)
    except BaseException:
        await redis.aclose()
        await db.aclose()
        raise
    keys = RedisKeys(default_prefix())
    return Services(
        redis=redis,
        db=db,
        keys=keys,
        window=WindowStore(redis, keys.prefix),
        queue=PendingQueue(redis, keys.prefix),
        costs=MemoryCosts(redis, keys),
        profile=ProfileStore(redis, keys.prefix),
        threads=ThreadOwners(redis, keys),
        runs=RunStarts(redis, keys),
        memories=memories,
        episodes=episodes,
        decisions=decisions,
        embeddings=embeddings,
        embedding_model=spec,
        database_url=urls.database_url,
    )


@asynccontextmanager
async def services_session(embedding_model: str | None = None) -> AsyncIterator[Services]:
    """`open_services` as a context manager that closes them on exit."""
    services = await open_services(embedding_model)
    try:
        yield services
    finally:
        await services.aclose()


@contextmanager
def services_session_sync(embedding_model: str | None = None) -> Iterator[Services]:
    """`services_session` for sync code: the services open on a loop thread of their own.

    Sync callers reach them through `Services.run` (``MemoryMiddleware``'s sync hooks, for
    ``agent.invoke`` and ``agent.stream``, do). On exit what still runs on their loop is
    cancelled, then they close: drain memory runs first (``drain_sync``); a cancelled
    memory run leaves its batch leased in Redis for a later run.
    """
    runner = LoopThread("memory-services")
    try:
        services = runner.run(open_services(embedding_model))
        services.loop_thread = runner
        try:
            yield services
        finally:
            runner.cancel_rest()
            runner.run(services.aclose())
    finally:
        runner.close()


_server: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[Services]] = (
    weakref.WeakKeyDictionary()
)


async def server_services() -> Services:
    """The services of a LangGraph server process, opened on first use (per event loop).

    Only the graph factories call this; `close_server_services` closes them.
    """
    loop = asyncio.get_running_loop()
    if loop not in _server:
        _server[loop] = loop.create_task(open_services())
    try:
        services = await asyncio.shield(_server[loop])
    except BaseException:
        _server.pop(loop, None)  # a failed open is retried by the next run
        raise
    await _restart_stopped_servers()
    return services


async def _restart_stopped_servers() -> None:
    """Start again embedded servers stopped under a running server (``services down``).

    The cached clients reconnect by themselves once the servers answer; a start that fails
    leaves the run in degraded mode, and the next run tries again.
    """
    if await asyncio.to_thread(embedded_running):
        return
    log.warning("the embedded Redis/PostgreSQL stopped under this server; starting them again")
    try:
        await asyncio.to_thread(ensure_services)
    except EmbeddedServiceError as exc:
        log.error("restarting the embedded servers failed: %s", exc)


async def close_server_services() -> None:
    """Close what `server_services` opened on this loop (the HTTP app's shutdown)."""
    task = _server.pop(asyncio.get_running_loop(), None)
    if task is not None and task.done() and not task.exception():
        await task.result().aclose()


@asynccontextmanager
async def open_checkpointer(database_url: str) -> AsyncIterator[AsyncPostgresSaver]:
    """LangGraph's Postgres checkpointer on a small pool that checks connections before use.

    Why a pool of its own (the second of a process, beside the stores' SQLAlchemy engine):
    `AsyncPostgresSaver` takes a psycopg connection or `psycopg_pool` pool, with settings of
    its own (autocommit, dict rows), and holds it for whole graph steps. A single connection
    (``AsyncPostgresSaver.from_conn_string``) dies for good when Postgres restarts; the pool
    replaces broken connections. The check costs no round trip while a connection is
    healthy (`postgres.check_idle`). After an outage it reconnects in time for the next
    turn (`PostgresTimeouts.reconnect_s`).
    """
    timeouts = PostgresTimeouts.from_env()
    pool = AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=8,
        open=False,
        timeout=timeouts.deadline_s,
        reconnect_timeout=timeouts.reconnect_s,  # never backs off past a turn's deadline
        check=check_idle,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            **timeouts.connect_args(),
        },
    )
    await pool.open(wait=True)
    try:
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        yield saver
    finally:
        await pool.close()
