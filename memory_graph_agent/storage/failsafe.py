"""Degraded mode: keep turns working while Redis or Postgres is unreachable.

`outages` logs one warning when a service goes down and one line when it is back (not
one per call); the Prometheus counters in `memory_graph_agent.metrics` count every failed call.
`WindowBuffer` holds, in process and bounded, the messages that could not be pushed to
Redis; they are pushed first when Redis answers again (idempotently: the window's
seen-set drops anything already there).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict, deque

import psycopg
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from memory_graph_agent.storage.window import StoredMessage

log = logging.getLogger(__name__)

REDIS_DOWN = (RedisError, ConnectionError, OSError, TimeoutError)
POSTGRES_DOWN = (SQLAlchemyError, psycopg.Error, ConnectionError, OSError, TimeoutError)


class Outages:
    """Which backing services are down, with one log line per transition."""

    def __init__(self) -> None:
        self._down: dict[str, str] = {}
        self._notices: deque[str] = deque(maxlen=20)
        self._lock = threading.Lock()

    def failed(self, service: str, exc: BaseException) -> None:
        """Record a failed call; warn only on the first one of an outage.

        A failed Postgres call also looks for crashed server processes of the embedded
        PostgreSQL (`memory_graph_agent.local.embedded.crash_notice`): each new crash becomes one notice.
        """
        with self._lock:
            first = service not in self._down
            self._down[service] = f"{type(exc).__name__}: {exc}"
        if first:
            log.warning(
                "%s unavailable (%s: %s); running degraded", service, type(exc).__name__, exc
            )
        if service == "postgres":
            from memory_graph_agent.local.embedded import crash_notice

            try:
                notice = crash_notice(os.environ.get("DATABASE_URL"), str(exc))
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


class WindowBuffer:
    """Bounded in-process buffer of messages waiting for Redis, per (user, thread)."""

    def __init__(self, max_messages: int = 10_000) -> None:
        self.max_messages = max_messages
        self._threads: OrderedDict[tuple[str, str], deque[StoredMessage]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def add(self, user_id: str, thread_id: str, messages: list[StoredMessage]) -> int:
        """Buffer messages (not already buffered); returns how many were dropped to stay bounded."""
        dropped = 0
        with self._lock:
            buf = self._threads.setdefault((user_id, thread_id), deque())
            known = {m.id for m in buf}
            for m in messages:
                if m.id in known:
                    continue
                buf.append(m)
                known.add(m.id)
                self._size += 1
            while self._size > self.max_messages:  # oldest thread's oldest message goes
                key, oldest = next(iter(self._threads.items()))
                oldest.popleft()
                self._size -= 1
                dropped += 1
                if not oldest:
                    del self._threads[key]
        if dropped:
            log.error("window buffer full: %d messages dropped (still in the checkpoint)", dropped)
        return dropped

    def take(self, user_id: str, thread_id: str) -> list[StoredMessage]:
        """Remove and return the buffered messages of a thread, oldest first."""
        with self._lock:
            buf = self._threads.pop((user_id, thread_id), deque())
            self._size -= len(buf)
        return list(buf)

    def put_back(self, user_id: str, thread_id: str, messages: list[StoredMessage]) -> None:
        """Return messages taken by `take` after a failed flush."""
        self.add(user_id, thread_id, messages)

    def drop_user(self, user_id: str) -> int:
        """Forget every buffered message of a user; returns how many."""
        with self._lock:
            keys = [k for k in self._threads if k[0] == user_id]
            dropped = sum(len(self._threads.pop(k)) for k in keys)
            self._size -= dropped
        return dropped

    def __len__(self) -> int:
        return self._size


outages = Outages()
window_buffer = WindowBuffer()
