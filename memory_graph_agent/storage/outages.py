"""Outage handling, once, for every store: one exception, one log line per outage.

`guarded` stores re-raise driver errors as `StoreUnavailable`, the one exception the rest
of the code catches to run degraded; `memory_graph_agent.core.metrics` counts every failure.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

import psycopg
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from memory_graph_agent.core.metrics import REDIS_FAILURES
from memory_graph_agent.storage.postgres import PostgresTimeouts

log = logging.getLogger(__name__)

REDIS_DOWN = (RedisError, ConnectionError, OSError, TimeoutError)
POSTGRES_DOWN = (SQLAlchemyError, psycopg.Error, ConnectionError, OSError, TimeoutError)
DOWN = {"redis": REDIS_DOWN, "postgres": POSTGRES_DOWN}
POSTGRES_ERRORS = (SQLAlchemyError, psycopg.Error)
"""What a Postgres client outside the stores raises (the checkpointer's pool, a store's open)."""
C = TypeVar("C", bound=type)
P = ParamSpec("P")
R = TypeVar("R")


class StoreUnavailable(ConnectionError):
    """Redis or Postgres did not answer; ``service`` says which."""

    def __init__(self, service: str, cause: BaseException) -> None:
        super().__init__(f"{service} unavailable ({type(cause).__name__}: {cause})")
        self.service = service


class Outages:
    """Which backing services are down, with one log line per transition."""

    def __init__(self) -> None:
        self._down: dict[str, str] = {}
        self._notices: deque[str] = deque(maxlen=20)
        self._lock = threading.Lock()
        self.crash_probe: Callable[[str], str | None] | None = None

    def failed(self, service: str, exc: BaseException) -> None:
        """Record a failed call; warn only on the first one of an outage.

        A Postgres failure also asks ``crash_probe`` (set with an embedded server) for a notice.
        """
        reason = f"{type(exc).__name__}: {exc}"
        with self._lock:
            first = service not in self._down
            self._down[service] = reason
        if first:
            log.warning("%s unavailable (%s); running degraded", service, reason)
        if service == "postgres" and self.crash_probe is not None:
            try:
                notice = self.crash_probe(str(exc))
            except OSError:
                notice = None
            if notice:
                log.error(notice)
                self.notify(notice)

    def notify(self, message: str) -> None:
        """Queue a one-time message for the user (see `take_notices`)."""
        with self._lock:
            if message not in self._notices:
                self._notices.append(message)

    def take_notices(self) -> list[str]:
        """The queued messages, oldest first; each is returned once."""
        with self._lock:
            notices = list(self._notices)
            self._notices.clear()
        return notices

    def ok(self, service: str) -> None:
        """Record a successful call; log once when an outage ends."""
        if service in self._down:
            with self._lock:
                self._down.pop(service, None)
            log.warning("%s is back", service)

    def is_down(self, service: str) -> bool:
        """Whether the last call to ``service`` failed."""
        return service in self._down


outages = Outages()


def guard(service: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``fn`` reporting to `outages`, its ``service`` driver errors as `StoreUnavailable`."""

    @functools.wraps(fn)
    async def method(*args: Any, **kwargs: Any) -> Any:
        try:
            if service == "postgres":  # a silent network: the server's timeouts never fire
                async with asyncio.timeout(PostgresTimeouts.from_env().deadline_s):
                    result = await fn(*args, **kwargs)
            else:
                result = await fn(*args, **kwargs)
        except StoreUnavailable:
            raise
        except DOWN[service] as exc:
            outages.failed(service, exc)
            raise StoreUnavailable(service, exc) from exc
        outages.ok(service)
        return result

    return method


def guarded(service: str) -> Callable[[C], C]:
    """Class decorator: `guard` every public async method of the class."""

    def decorate(cls: C) -> C:
        for name, fn in list(vars(cls).items()):
            if not name.startswith("_") and inspect.iscoroutinefunction(fn):
                setattr(cls, name, guard(service, fn))
        return cls

    return decorate


_in_redis_op: ContextVar[bool] = ContextVar("agent_memory_in_redis_op", default=False)


def redis_op(op: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Count an async store method's Redis failures under ``op`` (outermost call only)."""

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if _in_redis_op.get():
                return await fn(*args, **kwargs)
            token = _in_redis_op.set(True)
            try:
                return await fn(*args, **kwargs)
            except (RedisError, ConnectionError):
                REDIS_FAILURES.labels(op=op).inc()
                raise
            finally:
                _in_redis_op.reset(token)

        return wrapper

    return decorate
