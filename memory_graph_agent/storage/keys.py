"""The Redis key schema: every key name of the project is built here, nowhere else.

All keys live under one prefix (``MEMORY_KEY_PREFIX``, default ``mem``); ids are
validated (`memory_graph_agent.ids`), so they hold no ``:`` or glob characters and the
segments of a key name are unambiguous.

Per user and thread (``{prefix}:{kind}:{user}:{thread}``):
    ``window``      list, oldest first, the last N messages of the conversation
    ``pending``     list, messages that left the window, not yet summarized
    ``seen``        set of message ids already pushed (idempotency)
    ``processing``  the batch a summarizer claimed
    ``lease``       worker id holding that batch, with a TTL
    ``attempts``    failed attempts of the current batch
    ``retry_at``    no claim before this time (ms, backoff)
    ``dead``        batches that failed ``max_attempts`` times

Per user (``{prefix}:{kind}:{user}``):
    ``profile``            hash, one field per fact key
    ``profile_history``    list, oldest first, of values that stopped being current
    ``profile_forgotten``  hash, fact key -> when the user asked to forget it

Per thread:
    ``{prefix}:owner:{thread}``  the user who wrote to the thread first
"""

from __future__ import annotations

import os

from memory_graph_agent.ids import validate_id

THREAD_KINDS = (
    "window", "pending", "seen", "processing", "lease", "attempts", "retry_at", "dead"
)  # fmt: skip
USER_KINDS = ("profile", "profile_history", "profile_forgotten")


def default_prefix() -> str:
    """Prefix of every Redis key of this project (``MEMORY_KEY_PREFIX``, default ``mem``)."""
    return os.environ.get("MEMORY_KEY_PREFIX", "mem")


class RedisKeys:
    """Key names under one prefix."""

    def __init__(self, prefix: str = "mem") -> None:
        self.prefix = prefix

    def thread(self, kind: str, user_id: str, thread_id: str) -> str:
        """``{prefix}:{kind}:{user}:{thread}`` for a kind of `THREAD_KINDS`."""
        validate_id(user_id, "user_id")
        validate_id(thread_id, "thread_id")
        return f"{self.prefix}:{kind}:{user_id}:{thread_id}"

    def user(self, kind: str, user_id: str) -> str:
        """``{prefix}:{kind}:{user}`` for a kind of `USER_KINDS`."""
        return f"{self.prefix}:{kind}:{validate_id(user_id, 'user_id')}"

    def owner(self, thread_id: str) -> str:
        """``{prefix}:owner:{thread}``: who the thread belongs to."""
        return f"{self.prefix}:owner:{validate_id(thread_id, 'thread_id')}"

    def user_patterns(self, user_id: str) -> tuple[str, str]:
        """SCAN patterns that match every key of ``user_id`` (and, loosely, a few others)."""
        validate_id(user_id, "user_id")
        return f"{self.prefix}:*:{user_id}", f"{self.prefix}:*:{user_id}:*"

    def threads_pattern(self, user_id: str = "*", thread_id: str = "*") -> str:
        """SCAN pattern of per-thread keys (of one user and/or thread, or all)."""
        return f"{self.prefix}:*:{user_id}:{thread_id}"

    def parse(self, key: str) -> tuple[str, ...]:
        """The segments of a key after the prefix: ``(kind, user[, thread])`` or ``()``."""
        if not key.startswith(self.prefix + ":"):
            return ()
        return tuple(key[len(self.prefix) + 1 :].split(":"))
