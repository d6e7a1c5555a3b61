"""Who a thread belongs to (its first writer), and which of its messages are new (Redis)."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded


@dataclass(frozen=True)
class Admission:
    """The answer of `ThreadOwners.admit`."""

    owner: str  # the caller when the thread was free
    unseen: list[str]  # ids, in the order given, of messages not yet in the window


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
