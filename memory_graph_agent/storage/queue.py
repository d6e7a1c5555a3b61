"""The durable overflow queue of a thread: pending → processing (leased) → done | dead.

Every transition is one Lua script, so it is atomic. A dead worker's batch stays in
``processing`` until its lease expires; the next claim gets the *same* batch back, so the
summary id (a hash of the source ids) is the same and the retry is an upsert. A new batch
is whole turns (`turns.batch_cut`): planned from one read of pending and the window's
head, and taken only if pending still starts with it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from memory_graph_agent.core.turns import batch_cut, starts_turn, turn_starts
from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded, redis_op
from memory_graph_agent.storage.window import StoredMessage, held_lua

# KEYS: pending, processing, lease, attempts, retry_at. ARGV: worker, lease ms, the JSON ids
# of the batch planned from a read of pending (`PendingQueue._plan`), now ms. The batch is
# taken only if pending still starts with exactly those messages ('stale' otherwise).
_CLAIM = """
local retry_at = tonumber(redis.call('GET', KEYS[5]) or '0')
if retry_at > tonumber(ARGV[4]) then return {'backoff', tostring(retry_at - tonumber(ARGV[4]))} end
if redis.call('LLEN', KEYS[2]) > 0 then
  local holder = redis.call('GET', KEYS[3])
  if holder and holder ~= ARGV[1] then return {'leased', tostring(redis.call('PTTL', KEYS[3]))} end
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
  local items = redis.call('LRANGE', KEYS[2], 0, -1)
  table.insert(items, 1, 'reclaimed')
  return items
end
local ids = cjson.decode(ARGV[3])
if #ids == 0 then return {'short'} end
local items = redis.call('LRANGE', KEYS[1], 0, #ids - 1)
if #items ~= #ids then return {'stale'} end
for i, item in ipairs(items) do
  if cjson.decode(item)['id'] ~= ids[i] then return {'stale'} end
end
for i = 1, #ids do redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[4])
table.insert(items, 1, 'claimed')
return items
"""

# A worker may settle only the batch it claimed: the lease must be its own (or expired with
# nobody else holding it) *and* the processing list must hold exactly the ids it stored.
_OWNS_BATCH = """
local function owns_batch(worker, ids_json)
  local holder = redis.call('GET', KEYS[2])
  if holder and holder ~= worker then return false end
  local items = redis.call('LRANGE', KEYS[1], 0, -1)
  local ids = cjson.decode(ids_json)
  if #items == 0 or #items ~= #ids then return false end
  for i, item in ipairs(items) do
    if cjson.decode(item)['id'] ~= ids[i] then return false end
  end
  return true
end
"""

_COMPLETE = (
    _OWNS_BATCH
    + """
if not owns_batch(ARGV[1], ARGV[2]) then return 0 end
local n = redis.call('LLEN', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return n
"""
)

_FAIL = (
    _OWNS_BATCH
    + """
if not owns_batch(ARGV[1], ARGV[6]) then return 'not-owner' end
local n = redis.call('INCR', KEYS[3])
if n >= tonumber(ARGV[2]) then
  local items = redis.call('LRANGE', KEYS[1], 0, -1)
  local entry = {items = items, error = ARGV[5], attempts = n, at = ARGV[4]}
  redis.call('RPUSH', KEYS[5], cjson.encode(entry))
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  return 'dead'
end
redis.call('SET', KEYS[4], string.format('%d', tonumber(ARGV[4]) + tonumber(ARGV[3]) * 2 ^ (n - 1)))
redis.call('DEL', KEYS[2])
return 'retry'
"""
)

_HELD_IDS = (
    held_lua(first_key=1)
    + """
local ids = {}
for id in pairs(held) do table.insert(ids, id) end
return ids
"""
)

# Re-queue (id, json) pairs that no list holds at this instant (KEYS[5] pending, [6] seen).
_REQUEUE_ABSENT = (
    held_lua(first_key=1)
    + """
local added = 0
for i = 1, #ARGV, 2 do
  if not held[ARGV[i]] then
    held[ARGV[i]] = true
    redis.call('RPUSH', KEYS[5], ARGV[i + 1])
    redis.call('SADD', KEYS[6], ARGV[i])
    added = added + 1
  end
end
return added
"""
)

_REDRIVE = """
local moved = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  for _, item in ipairs(cjson.decode(entry)['items']) do
    redis.call('RPUSH', KEYS[2], item)
    moved = moved + 1
  end
end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4])
return moved
"""


PLAN_SLACK = 16
"""Messages read past a batch's size at first, to find the end of the turn it cuts into."""
PLAN_ATTEMPTS = 5
"""Plans a claim makes before giving up on a pending list that keeps changing under it."""


@dataclass(frozen=True)
class Claim:
    """Outcome of `PendingQueue.claim`: a batch, or why there is none."""

    status: str  # claimed | reclaimed | short | leased | backoff | contended
    messages: list[StoredMessage]
    retry_in_s: float | None = None
    """For ``leased`` / ``backoff``: seconds until the lease ends or the backoff is over."""


@guarded("redis")
class PendingQueue:
    """Claim, complete, fail and re-drive the overflow batches of a thread."""

    def __init__(self, redis: Redis, prefix: str = "mem") -> None:
        self.redis = redis
        self.keys = RedisKeys(prefix)
        self._claim = redis.register_script(_CLAIM)
        self._complete = redis.register_script(_COMPLETE)
        self._fail = redis.register_script(_FAIL)
        self._redrive = redis.register_script(_REDRIVE)
        self._held_ids = redis.register_script(_HELD_IDS)
        self._requeue_absent = redis.register_script(_REQUEUE_ABSENT)

    def key(self, kind: str, user_id: str, thread_id: str) -> str:
        """The Redis key of one of this thread's queue structures."""
        return self.keys.thread(kind, user_id, thread_id)

    def _keys(self, user_id: str, thread_id: str, *kinds: str) -> list[str]:
        return [self.key(k, user_id, thread_id) for k in kinds]

    @redis_op("claim")
    async def claim(
        self,
        user_id: str,
        thread_id: str,
        worker: str,
        *,
        min_batch: int,
        max_batch: int,
        lease_s: float,
        fits: int | None = None,
    ) -> Claim:
        """Lease the thread's processing batch (an expired one first, else a new one).

        A new batch needs ``min_batch`` pending messages and is whole turns: to the end of
        the turn its ``max_batch``-th message falls in, unless that is more than ``fits``
        (default ``max_batch``) messages, then to the last turn end within ``fits``; a
        first turn longer than that is taken whole (`turns.batch_cut`). ``short`` when
        there is no such batch yet, ``contended`` when pending kept changing meanwhile.
        """
        keys = self._keys(
            user_id, thread_id, "pending", "processing", "lease", "attempts", "retry_at"
        )
        fits = max(fits or max_batch, 1)
        for _ in range(PLAN_ATTEMPTS):
            plan = await self._plan(user_id, thread_id, min_batch, max(max_batch, 1), fits)
            args = [worker, int(lease_s * 1000), json.dumps(plan), int(time.time() * 1000)]
            status, *raws = await self._claim(keys=keys, args=args)
            if status in ("leased", "backoff"):
                return Claim(status, [], max(0, int(raws[0])) / 1000)
            if status != "stale":
                return Claim(status, [StoredMessage.from_json(r) for r in raws])
        return Claim("contended", [])

    async def _plan(
        self, user_id: str, thread_id: str, min_batch: int, size: int, fits: int
    ) -> list[str]:
        """Ids of the batch pending would give now (`turns.batch_cut`); [] if none.

        Pending and the window's head are read at one instant: pending's last turn is
        whole only if the window starts a turn (or is empty). Reads further while no turn
        starts past ``size`` in what was read, so the turn it cuts into is seen to its end.
        """
        pending, window = self._keys(user_id, thread_id, "pending", "window")
        n = max(size, fits) + PLAN_SLACK
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.llen(pending)
                pipe.lrange(pending, 0, n - 1)
                pipe.lindex(window, 0)
                total, raws, head = await pipe.execute()
            if total < min_batch:
                return []
            items = [StoredMessage.from_json(r) for r in raws]
            whole = len(items) >= total
            if whole or any(s >= size for s in turn_starts(items)):
                break
            n *= 2
        ends_turn = whole and (head is None or starts_turn(StoredMessage.from_json(head)))
        return [m.id for m in items[: batch_cut(items, size, fits, ends_turn)]]

    @redis_op("complete")
    async def complete(
        self, user_id: str, thread_id: str, worker: str, message_ids: list[str]
    ) -> int:
        """Acknowledge ``worker``'s batch of ``message_ids`` after its durable write.

        Returns how many were acked: 0 when another worker holds the lease or the claimed
        batch is no longer this one (a late worker never acknowledges a newer batch).
        """
        keys = self._keys(user_id, thread_id, "processing", "lease", "attempts", "retry_at")
        return int(await self._complete(keys=keys, args=[worker, json.dumps(message_ids)]))

    @redis_op("fail")
    async def fail(
        self,
        user_id: str,
        thread_id: str,
        worker: str,
        error: str,
        message_ids: list[str],
        *,
        max_attempts: int,
        backoff_s: float,
    ) -> str:
        """Record a failed attempt of ``worker``'s batch: back off, or dead-letter it.

        ``not-owner`` when the lease or the claimed batch is no longer this worker's.
        """
        keys = self._keys(user_id, thread_id, "processing", "lease", "attempts", "retry_at", "dead")
        now_ms = int(time.time() * 1000)
        args = [worker, max_attempts, int(backoff_s * 1000), now_ms, error[:500]]
        args.append(json.dumps(message_ids))
        return str(await self._fail(keys=keys, args=args))

    @redis_op("redrive")
    async def redrive(self, user_id: str, thread_id: str) -> int:
        """Move every dead-lettered message back to pending; returns how many."""
        keys = self._keys(user_id, thread_id, "dead", "pending", "attempts", "retry_at")
        return int(await self._redrive(keys=keys))

    @redis_op("dead_letters")
    async def dead_letters(self, user_id: str, thread_id: str) -> list[dict[str, Any]]:
        """The dead-lettered batches: ``{items: [StoredMessage], error, attempts, at}``."""
        out = []
        for raw in await self.redis.lrange(self.key("dead", user_id, thread_id), 0, -1):
            entry = json.loads(raw)
            entry["items"] = [StoredMessage.from_json(i) for i in entry.get("items") or []]
            out.append(entry)
        return out

    @redis_op("processing")
    async def processing(self, user_id: str, thread_id: str) -> list[StoredMessage]:
        """The currently claimed batch (empty if none)."""
        raws = await self.redis.lrange(self.key("processing", user_id, thread_id), 0, -1)
        return [StoredMessage.from_json(r) for r in raws]

    @redis_op("held_ids")
    async def held_ids(self, user_id: str, thread_id: str) -> set[str]:
        """Ids in the thread's window, pending, processing and dead lists, read atomically."""
        keys = self._keys(user_id, thread_id, "window", "pending", "processing", "dead")
        return set(await self._held_ids(keys=keys))

    @redis_op("requeue")
    async def requeue(self, user_id: str, thread_id: str, messages: list[StoredMessage]) -> int:
        """Put messages back on pending (recovery after Redis lost them); returns how many.

        Atomic: a message that any list of the thread holds at that instant (a concurrent
        turn just pushed it, say) is left where it is.
        """
        if not messages:
            return 0
        kinds = ("window", "pending", "processing", "dead", "pending", "seen")
        args = [a for m in messages for a in (m.id, m.to_json())]
        return int(
            await self._requeue_absent(keys=self._keys(user_id, thread_id, *kinds), args=args)
        )

    @redis_op("claimed")
    async def claimed(self, user_id: str, thread_id: str) -> bool:
        """Whether a worker holds the thread's batch now (its lease), or it backs off."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.exists(self.key("lease", user_id, thread_id))
            pipe.get(self.key("retry_at", user_id, thread_id))
            leased, retry_at = await pipe.execute()
        return bool(leased) or int(retry_at or 0) > time.time() * 1000

    @redis_op("dead_count")
    async def dead_count(self, user_id: str, thread_id: str) -> int:
        """Messages held in the dead-letter list."""
        return sum(len(e["items"]) for e in await self.dead_letters(user_id, thread_id))

    @redis_op("backlog")
    async def backlog(self, user_id: str, thread_id: str) -> int:
        """Messages waiting to be summarized: pending plus a claimed batch."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.llen(self.key("pending", user_id, thread_id))
            pipe.llen(self.key("processing", user_id, thread_id))
            pending, processing = await pipe.execute()
        return int(pending) + int(processing)
