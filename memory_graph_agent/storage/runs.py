"""How many times each step of a server run has started (Redis): the crash-loop breaker's memory.

A run the LangGraph server retries after its process died keeps its ``run_id``; the count
lives outside that process, so it survives the crash that the server's own counter may not.
"""

from __future__ import annotations

from redis.asyncio import Redis

from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded, redis_op

RUN_TTL_S = 7 * 86_400
"""A run is retried within minutes of a crash; its count is kept a week."""


@guarded("redis")
class RunStarts:
    """Count the starts of the tasks (step and node) of server runs."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys

    @redis_op("run_start")
    async def start(self, run_id: str, task: str) -> int:
        """Record one more start of ``task`` of ``run_id``; return how many there have been."""
        key = self.keys.run(run_id, task)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, RUN_TTL_S)
            starts, _ = await pipe.execute()
        return int(starts)
