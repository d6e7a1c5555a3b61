"""Who a thread belongs to (its first writer), and which of its messages are new (Redis).

A rejected turn (another user's, or input that breaks a rule) has already had its input
written into the thread's checkpoint by LangGraph; its ids go to ``rejected:{thread}`` so
the owner's next turn drops them instead of taking them for the owner's own new messages
(or refusing that turn again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded, redis_op
from memory_graph_agent.storage.redis_reads import RedisRead, queue, split_replies
from memory_graph_agent.storage.window import StoredMessage

REJECTED_TTL_S = 90 * 24 * 3600
"""How long ``rejected:{thread}`` outlives the last rejected turn on the thread (90 days)."""
ACTIVE_TTL_S = 24 * 3600
"""How long ``active:{thread}`` marks a turn as under way after its admission, whoever's
and however it ends (a day, far longer than a turn): maintenance never archives a thread
so marked. It holds no data, like ``owner:{thread}``."""


@dataclass(frozen=True)
class Admission:
    """The answer of `ThreadOwners.admit`."""

    owner: str  # the caller when the thread was free
    unseen: list[str]  # ids, in the order given, not in the *owner's* window (seen-set)
    rejected: list[str] = field(default_factory=list)  # ids a rejected turn left in the state
    stored: dict[str, StoredMessage] = field(default_factory=dict)  # the owner's window, by id
    claimed: bool = False  # the thread had no owner: this call made the caller its owner
    exact: bool = True  # ``stored`` are whole copies (False: the episodic log's, no tool calls)
    also: list[Any] = field(default_factory=list)  # the replies of ``admit``'s ``also`` reads


@guarded("redis")
class ThreadOwners:
    """Claim a thread for a user and tell which of its messages are new, in one round trip."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys

    @redis_op("admit")
    async def admit(
        self,
        user_id: str,
        thread_id: str,
        message_ids: list[str],
        also: Sequence[RedisRead] = (),
    ) -> Admission:
        """Claim ``thread_id`` for ``user_id`` unless owned, and find the unseen ids.

        Unseen and stored are the owner's: for another user, the messages their own turn
        brought, and the owner's copies of any it replaced (a second round trip, on that
        path only). Other stores' reads (``also``) go in the same round trip; their
        replies are `Admission.also`, an error among them left as its reply (`from_reply`).
        """
        owner_key = self.keys.owner(thread_id)
        probe = ["", *message_ids]  # "" keeps the argument list non-empty; dropped below
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(owner_key, user_id, nx=True)
            pipe.get(owner_key)
            pipe.smismember(self.keys.thread("seen", user_id, thread_id), probe)
            pipe.smismember(self.keys.rejected(thread_id), probe)
            pipe.lrange(self.keys.thread("window", user_id, thread_id), 0, -1)
            pipe.set(self.keys.active(thread_id), 1, ex=ACTIVE_TTL_S)
            queue(pipe, also)
            # each store judges its own replies: a bad ``also`` key fails only its reader
            own, replies = split_replies(await pipe.execute(raise_on_error=False), len(also))
            claimed, owner, (_, *seen), (_, *rejected), window, _ = own
        if owner != user_id:  # the owner's view: what is theirs, as they stored it
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.smismember(self.keys.thread("seen", owner, thread_id), probe)
                pipe.lrange(self.keys.thread("window", owner, thread_id), 0, -1)
                (_, *seen), window = await pipe.execute()
        return Admission(
            owner=owner,
            unseen=[i for i, is_seen in zip(message_ids, seen, strict=True) if not is_seen],
            rejected=[i for i, hit in zip(message_ids, rejected, strict=True) if hit],
            stored={m.id: m for m in map(StoredMessage.from_json, window)},
            claimed=bool(claimed),
            also=replies,
        )

    async def reject(self, thread_id: str, message_ids: list[str]) -> None:
        """Remember ids a rejected turn left in ``thread_id``'s checkpoint.

        The set lives `REJECTED_TTL_S` after the last rejection on the thread: the owner's
        next turn undoes them well before, and an abandoned thread's set goes.
        """
        if message_ids:
            key = self.keys.rejected(thread_id)
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.sadd(key, *message_ids)
                pipe.expire(key, REJECTED_TTL_S)
                await pipe.execute()

    async def hand_over(self, thread_id: str, claimant: str, owner: str | None) -> None:
        """Give a thread ``claimant`` just claimed to its real ``owner`` (``None``: free it)."""
        key = self.keys.owner(thread_id)
        if await self.redis.get(key) == claimant:
            await (self.redis.set(key, owner) if owner else self.redis.delete(key))

    async def owner(self, thread_id: str) -> str | None:
        """The user who owns ``thread_id``, or ``None`` if nobody wrote to it."""
        return await self.redis.get(self.keys.owner(thread_id))

    async def _owned(self) -> list[tuple[str, str]]:
        """``(thread, owner)`` of every owned thread: one ``SCAN`` (maintenance, not turns)."""
        names = [
            raw.decode() if isinstance(raw, bytes) else raw
            async for raw in self.redis.scan_iter(match=self.keys.owner_pattern(), count=1000)
        ]
        found = []
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            for key, owner in zip(chunk, await self.redis.mget(chunk), strict=True):
                if owner is not None:
                    owner = owner.decode() if isinstance(owner, bytes) else owner
                    found.append((self.keys.parse(key)[1], owner))
        return found

    @redis_op("threads_of")
    async def threads_of(self, users: Sequence[str]) -> dict[str, set[str]]:
        """The threads each of ``users`` owns."""
        owned: dict[str, set[str]] = {user: set() for user in users}
        for thread, owner in await self._owned():
            if owner in owned:
                owned[owner].add(thread)
        return owned

    @redis_op("owners")
    async def owners(self) -> set[str]:
        """Every user who owns a thread."""
        return {owner for _, owner in await self._owned()}
