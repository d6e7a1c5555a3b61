"""Who a thread belongs to, and which of its messages memory already has (Redis).

A thread belongs to the first user who wrote to it (``owner``). The thread's seen-set
(``seen``, shared with `memory_graph_agent.storage.window.WindowStore.push`) tells which
messages of the checkpointed state are already in the window: the others are new.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded


@dataclass(frozen=True)
class Admission:
    """The answer of `ThreadOwners.admit`."""

    owner: str
    """The thread's owner (the caller when the thread was free)."""
    unseen: list[str]
    """Ids, in the order given, of messages not yet in the thread's window."""


@guarded("redis")
class ThreadOwners:
    """Claim a thread for a user and tell which of its messages are new, in one round trip."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys

    async def admit(self, user_id: str, thread_id: str, message_ids: list[str]) -> Admission:
        """Claim ``thread_id`` for ``user_id`` unless owned, and find the unseen ids."""
        owner_key = self.keys.owner(thread_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(owner_key, user_id, nx=True)
            pipe.get(owner_key)
            # "" keeps the argument list non-empty; its answer is dropped
            pipe.smismember(self.keys.thread("seen", user_id, thread_id), ["", *message_ids])
            _, owner, (_, *seen) = await pipe.execute()
        unseen = [i for i, is_seen in zip(message_ids, seen, strict=True) if not is_seen]
        return Admission(owner=owner, unseen=unseen)

    async def owner(self, thread_id: str) -> str | None:
        """The thread's owner, if any."""
        return await self.redis.get(self.keys.owner(thread_id))
