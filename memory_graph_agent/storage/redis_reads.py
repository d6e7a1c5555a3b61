"""Reads of several Redis stores, sent in one round trip (what a turn starts with).

A store describes a read as commands (`RedisRead`: the client method's name and its
arguments) and makes the replies into its value itself, so another store's pipeline can
carry it: `ThreadOwners.admit` sends the turn's profile and running-summary reads with
its own, and the turn's start costs one Redis round trip instead of three.

A command's error (a key of the wrong type: ``WRONGTYPE``) stays that command's: the
pipeline runs with ``raise_on_error=False``, the carrier raises only its own commands'
errors (`split_replies`), and each reader raises the error of its replies when it reads
them (`from_reply`), as its own call would have.
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


def split_replies(replies: Sequence[Any], borrowed: int) -> tuple[list[Any], list[Any]]:
    """``(own, borrowed)`` replies of a shared pipeline; raises the first error of ``own``.

    The last ``borrowed`` replies are the other stores' (errors left in place for them).
    """
    cut = len(replies) - borrowed
    return [from_reply(reply) for reply in replies[:cut]], list(replies[cut:])


def from_reply(reply: Any) -> Any:
    """A reply of a shared pipeline, or its error raised (the reader's own call would have)."""
    if isinstance(reply, Exception):
        raise reply
    return reply
