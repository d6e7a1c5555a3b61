"""The user profile ("hard memory"): one Redis hash per user.

Key ``{prefix}:profile:{user}``; each field is a fact key (``name``, ``city``,
``language``...) and its value JSON ``{value, importance, updated_at, source_ids}``.
Every write refreshes the hash's TTL.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from graph.metrics import redis_op
from stores.ids import validate_id

_KEY = re.compile(r"[^a-z0-9_]+")


def normalize_fact_key(key: str) -> str:
    """Lower-case snake_case fact key, at most 48 characters (``"Home City"`` → ``home_city``)."""
    return _KEY.sub("_", key.strip().lower()).strip("_")[:48].rstrip("_")


@dataclass(frozen=True)
class Fact:
    """A profile fact with its importance and provenance."""

    key: str
    value: str
    importance: float
    source_ids: list[str] = field(default_factory=list)
    updated_at: str = ""


class ProfileStore:
    """Read and write the per-user profile hash."""

    def __init__(self, redis: Redis, prefix: str = "mem") -> None:
        self.redis = redis
        self.prefix = prefix

    def key(self, user_id: str) -> str:
        """The Redis key of a user's profile."""
        return f"{self.prefix}:profile:{validate_id(user_id, 'user_id')}"

    @redis_op("profile_get")
    async def get(self, user_id: str) -> dict[str, dict[str, Any]]:
        """All facts of the user, ``{key: {value, importance, updated_at, source_ids}}``."""
        raw = await self.redis.hgetall(self.key(user_id))
        out: dict[str, dict[str, Any]] = {}
        for k, v in raw.items():
            name = k.decode() if isinstance(k, bytes) else k
            out[name] = json.loads(v)
        return dict(sorted(out.items(), key=lambda kv: -float(kv[1].get("importance", 0))))

    @redis_op("profile_upsert")
    async def upsert(self, user_id: str, facts: list[Fact], ttl_days: int) -> list[str]:
        """Write facts (the newest value of a key wins) and refresh the TTL.

        Returns the keys written. Empty keys or values are ignored.
        """
        now = datetime.now(UTC).isoformat()
        mapping: dict[str, str] = {}
        for fact in facts:
            key = normalize_fact_key(fact.key)
            value = fact.value.strip()
            if not key or not value:
                continue
            mapping[key] = json.dumps(
                {
                    "value": value[:500],
                    "importance": round(float(fact.importance), 3),
                    "updated_at": fact.updated_at or now,
                    "source_ids": list(fact.source_ids),
                },
                ensure_ascii=False,
            )
        if not mapping:
            return []
        hkey = self.key(user_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(hkey, mapping=mapping)
            pipe.expire(hkey, int(ttl_days * 86400))
            await pipe.execute()
        return list(mapping)
