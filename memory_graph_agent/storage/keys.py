"""The Redis key schema: every key name of the project is built here, nowhere else.

``{prefix}:{kind}:{user}:{thread}`` for `THREAD_KINDS` (window, pending, seen, summary queue,
running thread summary),
``{prefix}:{kind}:{user}`` for `USER_KINDS` (profile, history, forget tombstones, memory's
model cost), ``{prefix}:owner:{thread}``, ``{prefix}:rejected:{thread}``,
``{prefix}:active:{thread}`` (a turn under way: set when one is admitted) and
``{prefix}:run_starts:{run_id}:{task}`` (server runs, see `storage.runs`). Ids are
validated, so the segments are unambiguous.
"""

from __future__ import annotations

import os

from memory_graph_agent.core.ids import validate_id

THREAD_KINDS = (
    "window", "pending", "seen", "processing", "lease", "attempts", "retry_at", "dead", "digest"
)  # fmt: skip
USER_KINDS = ("profile", "profile_history", "profile_forgotten", "llm_cost")
THREAD_ONLY_KINDS = ("owner", "rejected", "active")
"""Kinds keyed by thread alone (``{prefix}:{kind}:{thread}``): no user segment."""


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

    def rejected(self, thread_id: str) -> str:
        """``{prefix}:rejected:{thread}``: ids of messages rejected turns left in the state."""
        return f"{self.prefix}:rejected:{validate_id(thread_id, 'thread_id')}"

    def active(self, thread_id: str) -> str:
        """``{prefix}:active:{thread}``: a turn was admitted to the thread lately."""
        return f"{self.prefix}:active:{validate_id(thread_id, 'thread_id')}"

    def owner_pattern(self) -> str:
        """SCAN pattern of every ``owner:{thread}`` key."""
        return f"{self.prefix}:owner:*"

    def run(self, run_id: str, task: str) -> str:
        """``{prefix}:run_starts:{run_id}:{task}``: starts of one task of a server run."""
        return (
            f"{self.prefix}:run_starts:{validate_id(run_id, 'run_id')}:{validate_id(task, 'task')}"
        )

    def user_patterns(self, user_id: str) -> tuple[str, str]:
        """SCAN patterns matching every key of ``user_id`` (and, loosely, a few others)."""
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
