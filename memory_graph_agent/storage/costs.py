"""Memory's model cost per user: calls and tokens by purpose, in one Redis hash.

``{prefix}:llm_cost:{user}`` holds ``{purpose}:{calls|input|output}`` counters, added
with ``HINCRBY`` in one transaction per node. Forget-me deletes it with the user's keys.
"""

from __future__ import annotations

from redis.asyncio import Redis

from memory_graph_agent.core.metrics import Spent
from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded, redis_op


@guarded("redis")
class MemoryCosts:
    """Running totals of memory's model calls and tokens, per user."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys

    @redis_op("cost_add")
    async def add(self, user_id: str, spent: Spent) -> None:
        """Add what one node spent."""
        key = self.keys.user("llm_cost", user_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            for purpose, counts in spent.items():
                for name, value in counts.items():
                    pipe.hincrby(key, f"{purpose}:{name}", int(value))
            await pipe.execute()

    @redis_op("cost_get")
    async def get(self, user_id: str) -> Spent:
        """The user's totals so far (``{}`` before memory's first model call)."""
        raw = await self.redis.hgetall(self.keys.user("llm_cost", user_id))
        spent: Spent = {}
        for field, value in raw.items():
            purpose, _, name = field.rpartition(":")
            spent.setdefault(purpose, {"calls": 0, "input": 0, "output": 0})[name] = int(value)
        return spent
