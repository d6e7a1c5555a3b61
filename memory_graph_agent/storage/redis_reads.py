"""Reads of several Redis stores, sent in one round trip (what a turn starts with).

A store describes a read as commands (`RedisRead`: the client method's name and its
arguments) and makes the replies into its value itself, so another store's pipeline can
carry it: `ThreadOwners.admit` sends the turn's profile and running-summary reads with
its own, and the turn's start costs one Redis round trip instead of three.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio.client import Pipeline

RedisRead = tuple[str, tuple[Any, ...]]
"""One read command for a shared pipeline: the Redis client method's name, its arguments."""


def queue(pipe: Pipeline, reads: Sequence[RedisRead]) -> None:
    """Add ``reads`` to ``pipe``, in order (their replies come back in that order)."""
    for name, args in reads:
        getattr(pipe, name)(*args)
