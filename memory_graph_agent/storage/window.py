"""Redis working window and durable pending list of one conversation thread.

Messages leave the window with ``LMOVE`` inside one ``MULTI``, so each is always in exactly
one of the two lists; they leave pending only on `ack`, after their summary is in Postgres.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from redis.asyncio import Redis
from redis.exceptions import WatchError

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.core.turns import cut_to_recent_turns
from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded, redis_op
from memory_graph_agent.storage.redis_reads import RedisRead, from_reply

RECALL_TOOL = "search_memory"
"""Tool whose results are stored memory already (see `StoredMessage.render`)."""
_ROLES = {"human": HumanMessage, "ai": AIMessage, "tool": ToolMessage, "system": SystemMessage}

# Push each message once: SADD on the seen-set decides, RPUSH follows atomically.
_PUSH_ONCE = """
local pushed = 0
for i = 1, #ARGV, 2 do
  if redis.call('SADD', KEYS[1], ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i + 1])
    pushed = pushed + 1
  end
end
return pushed
"""


def held_lua(first_key: int) -> str:
    """Lua filling ``held`` with every id of a thread's lists, read at one instant.

    ``KEYS[first_key]`` to ``KEYS[first_key + 3]`` are the window, pending, processing and
    dead lists, so a message moving between them meanwhile is neither missed nor counted twice.
    """
    window, dead = first_key, first_key + 3
    return f"""
local held = {{}}
for k = {window}, {dead - 1} do
  for _, raw in ipairs(redis.call('LRANGE', KEYS[k], 0, -1)) do
    held[cjson.decode(raw)['id']] = true
  end
end
for _, entry in ipairs(redis.call('LRANGE', KEYS[{dead}], 0, -1)) do
  for _, raw in ipairs(cjson.decode(entry)['items']) do held[cjson.decode(raw)['id']] = true end
end
"""


# Drop from the seen-set (KEYS[1]) the ids that neither the caller's state (ARGV[2..]) nor
# any list of the thread (KEYS[2..5]) holds, once there are ARGV[1] more of them than needed.
_TRIM_SEEN = (
    held_lua(first_key=2)
    + """
local needed = 0
for i = 2, #ARGV do held[ARGV[i]] = true end
for _ in pairs(held) do needed = needed + 1 end
if redis.call('SCARD', KEYS[1]) <= needed + tonumber(ARGV[1]) then return 0 end
local removed = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not held[id] then
    redis.call('SREM', KEYS[1], id)
    removed = removed + 1
  end
end
return removed
"""
)


# An idle thread's archive (maintenance), refused while a turn is under way on the thread
# (KEYS[1], its ``active`` mark: a turn sets it when admitted, before it pushes anything).
# Flush: KEYS window, pending; the whole window to pending. Release: KEYS window, seen,
# digest, then pending and processing, which must be empty like the window.
_ARCHIVE_FLUSH = """
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
local n = redis.call('LLEN', KEYS[2])
for i = 1, n do redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT') end
return n
"""
_RELEASE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
for k = 2, #KEYS do
  if k ~= 3 and k ~= 4 and redis.call('LLEN', KEYS[k]) > 0 then return -1 end
end
return redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
"""
RELEASED_KINDS = ("window", "seen", "digest")
"""The keys an idle thread lets go once archived (`WindowStore.release`)."""


@dataclass(frozen=True)
class StoredMessage:
    """A message as kept in Redis: JSON with id, role, content and timestamp."""

    id: str
    role: str
    content: str
    ts: str
    name: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str | None = None

    @classmethod
    def from_message(cls, message: BaseMessage, ts: str | None = None) -> StoredMessage:
        """Convert a LangChain message (which must have an id) for storage."""
        if not message.id:
            raise ValueError("messages must carry an id before they are stored")
        role = message.type
        if role not in _ROLES:
            raise ValueError(f"unsupported message role {role!r}")
        stamp = ts or message.additional_kwargs.get("timestamp") or datetime.now(UTC).isoformat()
        return cls(
            id=message.id,
            role=role,
            content=message.text if not isinstance(message.content, str) else message.content,
            ts=str(stamp),
            name=message.name,
            tool_calls=list(getattr(message, "tool_calls", []) or []),
            tool_call_id=getattr(message, "tool_call_id", None),
        )

    def to_json(self) -> str:
        """Serialize to the JSON stored in Redis."""
        data = {k: v for k, v in asdict(self).items() if v not in (None, [])}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> StoredMessage:
        """Parse the JSON stored in Redis."""
        data = json.loads(raw)
        if data.get("role") not in _ROLES:
            raise ValueError(f"unsupported message role {data.get('role')!r}")
        return cls(**data)

    def to_message(self) -> AnyMessage:
        """Rebuild the LangChain message."""
        kwargs: dict[str, Any] = {"content": self.content, "id": self.id}
        if self.name:
            kwargs["name"] = self.name
        if self.role == "ai" and self.tool_calls:
            kwargs["tool_calls"] = self.tool_calls
        if self.role == "tool":
            kwargs["tool_call_id"] = self.tool_call_id or ""
        return _ROLES[self.role](**kwargs)

    def render(self) -> str:
        """One line of transcript, e.g. ``[2026-11-22T10:00] human: hello``.

        Tool calls are shown (what the model remembered or forgot); a ``search_memory``
        result is not: summarizing it again would copy old memories into new ones.
        """
        content = self.content
        if self.role == "ai" and self.tool_calls:
            calls = ", ".join(
                f"{c.get('name')}({json.dumps(c.get('args', {}), ensure_ascii=False)})"
                for c in self.tool_calls
            )
            content = f"{content} (called {calls})".strip()
        elif self.role == "tool" and self.name == RECALL_TOOL:
            content = "(recalled memories, not repeated)"
        return f"[{self.ts[:16]}] {self.name or self.role}: {content}"


def summary_text(raw: str | bytes | None) -> str:
    """A thread's running summary from its Redis reply (``""`` before the first)."""
    return raw.decode() if isinstance(raw, bytes) else (raw or "")


def parse_ts(value: str) -> datetime:
    """A stored ISO timestamp as an aware datetime (UTC if naive; now if unparsable)."""
    try:
        ts = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return datetime.now(UTC)
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


@guarded("redis")
class WindowStore:
    """The working window and pending list of each (user, thread) in Redis."""

    def __init__(self, redis: Redis, prefix: str = "mem") -> None:
        self.redis = redis
        self.keys = RedisKeys(prefix)
        self._push_once = redis.register_script(_PUSH_ONCE)
        self._trim_seen = redis.register_script(_TRIM_SEEN)
        self._archive_flush = redis.register_script(_ARCHIVE_FLUSH)
        self._release = redis.register_script(_RELEASE)

    def _key(self, kind: str, user_id: str, thread_id: str) -> str:
        return self.keys.thread(kind, user_id, thread_id)

    @redis_op("push")
    async def push(self, user_id: str, thread_id: str, messages: list[StoredMessage]) -> int:
        """Append messages to the window, each at most once. Returns how many were new."""
        if not messages:
            return 0
        args = [a for m in messages for a in (m.id, m.to_json())]
        keys = [self._key("seen", user_id, thread_id), self._key("window", user_id, thread_id)]
        return int(await self._push_once(keys=keys, args=args))

    @redis_op("trim_seen")
    async def trim_seen(
        self, user_id: str, thread_id: str, state_ids: list[str], slack: int
    ) -> int:
        """Bound the seen-set: forget ids nothing can bring back; returns how many were dropped.

        Kept: ``state_ids`` (what the checkpoint may still hold and push again) and every id
        in the thread's window, pending, processing or dead list. Nothing is dropped until
        ``slack`` more ids than that accumulated, so the work is done once per ``slack`` pushes.
        """
        kinds = ("seen", "window", "pending", "processing", "dead")
        keys = [self._key(kind, user_id, thread_id) for kind in kinds]
        return int(await self._trim_seen(keys=keys, args=[slack, *state_ids]))

    @redis_op("window")
    async def window(self, user_id: str, thread_id: str) -> list[StoredMessage]:
        """The window, oldest first."""
        raws = await self.redis.lrange(self._key("window", user_id, thread_id), 0, -1)
        return [StoredMessage.from_json(r) for r in raws]

    @redis_op("overflow")
    async def overflow(
        self, user_id: str, thread_id: str, cut_of: Callable[[list[StoredMessage]], int]
    ) -> list[StoredMessage]:
        """Move the ``cut_of(window)`` oldest messages to pending, atomically.

        ``cut_of`` is the window's rule (`budgets.window_cut`: size and tokens, on a turn
        boundary); it sees the window as it is inside the transaction.
        """
        return await self._move_oldest(user_id, thread_id, cut_of)

    @redis_op("evict_before_turns")
    async def evict_before_turns(
        self, user_id: str, thread_id: str, keep_turns: int
    ) -> list[StoredMessage]:
        """Move every message before the last ``keep_turns`` turns to pending, atomically.

        Turns start at human messages, so a tool-call chain stays whole; log the window first.
        """
        return await self._move_oldest(
            user_id, thread_id, lambda items: cut_to_recent_turns(items, keep_turns)
        )

    @redis_op("flush")
    async def flush(self, user_id: str, thread_id: str) -> list[StoredMessage]:
        """Move the whole window to pending, atomically (session end); log it durably first."""
        return await self._move_oldest(user_id, thread_id, len)

    async def _move_oldest(
        self, user_id: str, thread_id: str, cut_of: Callable[[list[StoredMessage]], int]
    ) -> list[StoredMessage]:
        """Move the ``cut_of(window)`` oldest messages to pending (``WATCH``, one ``MULTI``)."""
        wkey = self._key("window", user_id, thread_id)
        pkey = self._key("pending", user_id, thread_id)
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(wkey)
                    items = [StoredMessage.from_json(r) for r in await pipe.lrange(wkey, 0, -1)]
                    cut = cut_of(items)
                    if cut <= 0:
                        await pipe.unwatch()
                        return []
                    pipe.multi()
                    for _ in range(cut):
                        pipe.lmove(wkey, pkey, "LEFT", "RIGHT")
                    await pipe.execute()
                    return items[:cut]
                except WatchError:
                    continue

    @redis_op("pending")
    async def pending(
        self, user_id: str, thread_id: str, limit: int = -1
    ) -> list[tuple[str, StoredMessage]]:
        """The oldest pending messages (``limit`` of them, all if -1) with raw values."""
        if limit == 0:
            return []
        end = -1 if limit < 0 else limit - 1
        raws = await self.redis.lrange(self._key("pending", user_id, thread_id), 0, end)
        texts = [r.decode() if isinstance(r, bytes) else r for r in raws]
        return [(raw, StoredMessage.from_json(raw)) for raw in texts]

    @redis_op("pending_len")
    async def pending_len(self, user_id: str, thread_id: str) -> int:
        """Number of messages waiting to be summarized."""
        return int(await self.redis.llen(self._key("pending", user_id, thread_id)))

    @redis_op("ack")
    async def ack(self, user_id: str, thread_id: str, ids: list[str]) -> int:
        """Remove these messages from pending (call only after their durable write)."""
        if not (wanted := set(ids)):
            return 0
        raws = [raw for raw, m in await self.pending(user_id, thread_id) if m.id in wanted]
        if not raws:
            return 0
        async with self.redis.pipeline(transaction=True) as pipe:
            for raw in raws:
                pipe.lrem(self._key("pending", user_id, thread_id), 1, raw)
            removed = await pipe.execute()
        return int(sum(removed))

    @redis_op("threads")
    async def threads(self, user_id: str) -> list[str]:
        """Thread ids that have a window or pending list for this user."""
        validate_id(user_id, "user_id")
        found: set[str] = set()
        for kind in ("window", "pending", "processing", "dead"):
            pattern = self.keys.threads_pattern(user_id).replace(":*:", f":{kind}:", 1)
            async for key in self.redis.scan_iter(match=pattern):
                found.add((key.decode() if isinstance(key, bytes) else key).rsplit(":", 1)[1])
        return sorted(found)

    @redis_op("thread_summary")
    async def thread_summary(self, user_id: str, thread_id: str) -> str:
        """The running summary of the thread's evicted messages (``""`` before the first)."""
        name, args = self.thread_summary_read(user_id, thread_id)
        return summary_text(await getattr(self.redis, name)(*args))

    def thread_summary_read(self, user_id: str, thread_id: str) -> RedisRead:
        """The read of `thread_summary`, for another store's round trip (`thread_summary_from`)."""
        return ("get", (self._key("digest", user_id, thread_id),))

    @redis_op("thread_summary")
    async def thread_summary_from(self, reply: Any) -> str:
        """`thread_summary` from the reply of its `thread_summary_read` (its error raised)."""
        return summary_text(from_reply(reply))

    @redis_op("set_thread_summary")
    async def set_thread_summary(self, user_id: str, thread_id: str, text: str) -> None:
        """Replace the running summary (written by consolidate, read by the next turn)."""
        await self.redis.set(self._key("digest", user_id, thread_id), text)

    @redis_op("retained")
    async def retained(self, user_id: str, thread_ids: list[str]) -> list[str]:
        """Those of ``thread_ids`` that still hold a window, seen-set or running summary."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for thread in thread_ids:
                pipe.exists(*(self._key(kind, user_id, thread) for kind in RELEASED_KINDS))
            found = await pipe.execute()
        return [t for t, n in zip(thread_ids, found, strict=True) if n]

    @redis_op("in_use")
    async def in_use(self, user_id: str, thread_id: str) -> bool:
        """Whether a turn was admitted to the thread recently (its ``active`` mark)."""
        return bool(await self.redis.exists(self.keys.active(thread_id)))

    @redis_op("archive_flush")
    async def archive_flush(self, user_id: str, thread_id: str) -> int | None:
        """Move the whole window to pending unless a turn is under way (then ``None``).

        For an idle thread's archive: log the window durably first, as `flush`.
        """
        keys = [self._key(k, user_id, thread_id) for k in ("window", "pending")]
        moved = int(await self._archive_flush(keys=[self.keys.active(thread_id), *keys]))
        return None if moved < 0 else moved

    @redis_op("release")
    async def release(self, user_id: str, thread_id: str) -> int | None:
        """Delete the thread's window, seen-set and running summary (how many existed).

        Refused (``None``) while a turn is under way or the window, pending list or claimed
        batch holds a message: only an archived thread lets them go. Its owner coming back
        starts afresh; the messages are in the episodic log and in memory.
        """
        keys = [
            self._key(k, user_id, thread_id) for k in (*RELEASED_KINDS, "pending", "processing")
        ]
        gone = int(await self._release(keys=[self.keys.active(thread_id), *keys]))
        return None if gone < 0 else gone
