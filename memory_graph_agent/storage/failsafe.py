"""Degraded mode: bounded in-process buffers of what Redis could not take.

Messages are pushed first when Redis answers again (the window's seen-set drops
duplicates); the ids of other users' rejected turns are recorded then too.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque

from memory_graph_agent.storage.window import StoredMessage

log = logging.getLogger(__name__)


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
                if m.id not in known:
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

    def users_of(self, thread_id: str) -> list[str]:
        """Users with buffered messages in ``thread_id``, the longest waiting first."""
        with self._lock:
            return [u for u, t in self._threads if t == thread_id]

    def messages(self, user_id: str, thread_id: str) -> list[StoredMessage]:
        """The messages buffered for this user and thread, oldest first (left in place)."""
        with self._lock:
            return list(self._threads.get((user_id, thread_id), ()))

    def drop_user(self, user_id: str) -> int:
        """Forget every buffered message of a user; returns how many."""
        with self._lock:
            keys = [k for k in self._threads if k[0] == user_id]
            dropped = sum(len(self._threads.pop(k)) for k in keys)
            self._size -= dropped
        return dropped

    def __len__(self) -> int:
        return self._size


window_buffer = WindowBuffer()


class RejectedWhileDown:
    """Ids of rejected turns that Redis could not record, per thread.

    A turn is rejected when it is another user's or its input breaks a rule.
    `memory_graph_agent.turn.admission` drops them from the owner's turns meanwhile and hands
    them to Redis (``rejected:{thread}``) once it answers again.
    """

    def __init__(self, max_threads: int = 10_000) -> None:
        self.max_threads = max_threads
        self._threads: OrderedDict[str, set[str]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, thread_id: str, ids: list[str]) -> None:
        """Remember ``ids`` as rejected in ``thread_id`` (the oldest thread goes when full)."""
        with self._lock:
            self._threads.setdefault(thread_id, set()).update(ids)
            while len(self._threads) > self.max_threads:
                self._threads.popitem(last=False)

    def of(self, thread_id: str) -> set[str]:
        """The ids rejected in ``thread_id`` while Redis was down."""
        with self._lock:
            return set(self._threads.get(thread_id, ()))

    def forget(self, thread_id: str, ids: set[str]) -> None:
        """Drop ``ids`` once Redis has recorded them."""
        with self._lock:
            left = self._threads.get(thread_id, set()) - ids
            if left:
                self._threads[thread_id] = left
            else:
                self._threads.pop(thread_id, None)


rejected_while_down = RejectedWhileDown()
"""This process's rejections not yet in Redis."""
