"""The user profile ("hard memory"): current facts plus their temporal history, in Redis.

A fact is JSON ``{value, importance, updated_at, valid_from, source_ids, pinned, expires_at}``.
Each write is a WATCH/MULTI transaction retried on conflict, so concurrent writes of one key
all land in the history (values that stopped holding, with a ``reason``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import guarded, redis_op
from memory_graph_agent.storage.redis_reads import RedisRead, from_reply, queue
from memory_graph_agent.storage.window import parse_ts

_KEY = re.compile(r"[^a-z0-9_]+")

TtlDays = Callable[[float, bool], float | None]  # (importance, pinned) -> days, None: never
# current raw fields -> (hset mapping, fields to delete, history entries, result)
Plan = Callable[[dict[str, str]], tuple[dict[str, str], list[str], list[dict], Any]]

HISTORY_LIMIT = 500
MAX_SOURCE_IDS = 20
STRENGTHEN = 0.05
_MAX_RETRIES = 50
_GONE = ("forgotten", "expired")


def normalize_fact_key(key: str) -> str:
    """Lower-case snake_case fact key, at most 48 characters (``"Home City"`` → ``home_city``)."""
    return _KEY.sub("_", key.strip().lower()).strip("_")[:48].rstrip("_")


@dataclass(frozen=True)
class Fact:
    """A profile fact; ``updated_at`` (ISO) is when it was stated, empty: when written."""

    key: str
    value: str
    importance: float
    source_ids: list[str] = field(default_factory=list)
    updated_at: str = ""


@dataclass
class FactChange:
    """What one write did to one key.

    ``action``: ``created``, ``updated``, ``strengthened`` (same value again: importance
    raised), ``unchanged`` (a replay, or older than the stored value) or ``forgotten``.
    """

    key: str
    action: str
    old_value: str | None
    new_value: str | None
    importance: float


def _unchanged(key: str, old: dict[str, Any]) -> FactChange:
    return FactChange(key, "unchanged", old["value"], old["value"], old["importance"])


def _same_value(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _expires_at(now: datetime, importance: float, pinned: bool, ttl_days: TtlDays) -> str | None:
    days = ttl_days(importance, pinned)
    return None if days is None else (now + timedelta(days=days)).isoformat()


def _is_expired(fact: dict[str, Any], now: datetime) -> bool:
    expires = fact.get("expires_at")
    return bool(expires) and not fact.get("pinned") and parse_ts(expires) <= now


def _decode(raw: str) -> dict[str, Any]:
    """A stored fact with the fields older versions did not write filled in."""
    fact = json.loads(raw)
    fact.setdefault("valid_from", fact.get("updated_at", ""))
    fact.setdefault("source_ids", [])
    fact.setdefault("pinned", False)
    fact.setdefault("expires_at", None)
    return fact


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)


def _history_entry(key: str, fact: dict[str, Any], valid_to: str, reason: str) -> dict[str, Any]:
    return {
        "key": key,
        "value": fact["value"],
        "importance": fact["importance"],
        "valid_from": fact.get("valid_from") or fact.get("updated_at", ""),
        "valid_to": valid_to,
        "source_ids": list(fact.get("source_ids", [])),
        "reason": reason,
    }


def _merge_ids(old: Iterable[str], new: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*old, *new]))[-MAX_SOURCE_IDS:]


def _entries(raw: list[str]) -> list[dict[str, Any]]:
    """History entries by ``valid_to`` (a superseded, late-arriving value sorts where it held)."""
    return sorted((json.loads(r) for r in raw), key=lambda e: parse_ts(e["valid_to"]))


def _changes(entries: list[dict[str, Any]], since_days: float) -> list[dict[str, Any]]:
    """The value changes among ``entries`` of the last ``since_days`` days (`recent_changes`)."""
    cutoff = datetime.now(UTC) - timedelta(days=since_days)
    changes: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        if entry.get("reason") != "updated" or parse_ts(entry["valid_to"]) < cutoff:
            continue
        if any(e["key"] == entry["key"] and e["reason"] in _GONE for e in entries[i + 1 :]):
            continue
        new, at = entry.get("replaced_by"), entry["valid_to"]
        changes.append({"key": entry["key"], "old": entry["value"], "new": new, "at": at})
    return changes


@guarded("redis")
class ProfileStore:
    """Read and write the per-user profile and its history."""

    def __init__(self, redis: Redis, prefix: str = "mem") -> None:
        self.redis = redis
        self.keys = RedisKeys(prefix)

    def key(self, user_id: str) -> str:
        """The Redis key of a user's current profile (a hash)."""
        return self.keys.user("profile", user_id)

    def history_key(self, user_id: str) -> str:
        """The Redis key of a user's profile history (a list, oldest first)."""
        return self.keys.user("profile_history", user_id)

    def forgotten_key(self, user_id: str) -> str:
        """The Redis key of when each forgotten fact key was forgotten (a hash)."""
        return self.keys.user("profile_forgotten", user_id)

    async def _transact(self, user_id: str, fields: list[str], plan: Plan) -> Any:
        """Read-modify-write ``fields`` of the profile hash, retried while another write races.

        ``plan`` must be pure: it may run more than once.
        """
        hkey, lkey = self.key(user_id), self.history_key(user_id)
        pipe: Pipeline
        async with self.redis.pipeline(transaction=True) as pipe:
            for _ in range(_MAX_RETRIES):
                try:
                    await pipe.watch(hkey)
                    values = await pipe.hmget(hkey, fields)
                    current = {f: v for f, v in zip(fields, values, strict=True) if v}
                    mapping, deletions, history, result = plan(current)
                    if not (mapping or deletions or history):
                        await pipe.unwatch()
                        return result
                    pipe.multi()
                    if deletions:
                        pipe.hdel(hkey, *deletions)
                    if mapping:
                        pipe.hset(hkey, mapping=mapping)
                        pipe.persist(hkey)  # facts expire one by one, never the whole hash
                    if history:
                        pipe.rpush(lkey, *(_dump(h) for h in history))
                        pipe.ltrim(lkey, -HISTORY_LIMIT, -1)
                    await pipe.execute()
                    return result
                except WatchError:
                    continue
        raise WatchError(f"profile of {user_id} kept changing; gave up after {_MAX_RETRIES}")

    @redis_op("profile_get")
    async def get(self, user_id: str) -> dict[str, dict[str, Any]]:
        """Live facts of the user, most important first; expired ones move to the history."""
        return await self._live(user_id, await self.redis.hgetall(self.key(user_id)))

    @redis_op("profile_get")
    async def get_with_changes(
        self, user_id: str, since_days: float
    ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """`get` and `recent_changes` in one round trip (what a turn starts with)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            queue(pipe, self.reads(user_id))
            replies = await pipe.execute()
        return await self.from_reads(user_id, replies, since_days)

    def reads(self, user_id: str) -> list[RedisRead]:
        """The reads of `get_with_changes`, for another store's round trip (`from_reads`)."""
        return [("hgetall", (self.key(user_id),)), ("lrange", (self.history_key(user_id), 0, -1))]

    @redis_op("profile_get")
    async def from_reads(
        self, user_id: str, replies: Sequence[Any], since_days: float
    ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """`get_with_changes` from the replies of its `reads` (read again if facts expired).

        An error among the replies (a key of the wrong type) is raised, as its own read would.
        """
        raw, history = map(from_reply, replies)
        profile = await self._live(user_id, raw)
        if len(profile) < len(raw):  # facts just expired: their history entries are new
            return profile, await self.recent_changes(user_id, since_days)
        return profile, _changes(_entries(history), since_days)

    async def _live(self, user_id: str, raw: dict[str, str]) -> dict[str, dict[str, Any]]:
        now = datetime.now(UTC)
        facts = {name: _decode(value) for name, value in raw.items()}
        expired = {name: raw[name] for name, fact in facts.items() if _is_expired(fact, now)}
        if expired:
            await self._expire(user_id, expired)
        live = [(name, fact) for name, fact in facts.items() if name not in expired]
        return dict(sorted(live, key=lambda kv: -float(kv[1].get("importance", 0))))

    async def _expire(self, user_id: str, expired: dict[str, str]) -> None:
        """Move facts that are still stored exactly as read (and expired) to the history."""

        def plan(current: dict[str, str]) -> tuple[dict, list[str], list[dict], None]:
            gone = {k: _decode(current[k]) for k, v in expired.items() if current.get(k) == v}
            history = [_history_entry(k, f, f["expires_at"], "expired") for k, f in gone.items()]
            return {}, list(gone), history, None

        await self._transact(user_id, list(expired), plan)

    @redis_op("profile_upsert")
    async def upsert(self, user_id: str, facts: list[Fact], ttl_days: TtlDays) -> list[FactChange]:
        """Write facts: the newest value of a key wins, the replaced one goes to history.

        A fact's time is its ``updated_at``, or the moment of the write; one stated before
        the stored value goes straight to the history (``superseded``). Within one call
        the last fact of a key wins. Returns one `FactChange` per key considered.
        """
        incoming: dict[str, Fact] = {}
        for fact in facts:
            key, value = normalize_fact_key(fact.key), fact.value.strip()[:500]
            if key and value:
                incoming.pop(key, None)  # re-insert: the last one of a key wins
                importance = round(min(max(float(fact.importance), 0.0), 1.0), 3)
                incoming[key] = Fact(key, value, importance, list(fact.source_ids), fact.updated_at)
        if not incoming:
            return []
        tombstones = await self.redis.hmget(self.forgotten_key(user_id), list(incoming))
        for key, forgotten_at in zip(list(incoming), tombstones, strict=True):
            stated = incoming[key].updated_at
            if isinstance(forgotten_at, bytes):
                forgotten_at = forgotten_at.decode()
            if forgotten_at and stated and parse_ts(stated) <= parse_ts(forgotten_at):
                del incoming[key]  # the user asked to forget it after saying it
        if not incoming:
            return []

        def plan(current: dict[str, str]) -> tuple[dict, list[str], list[dict], list]:
            now = datetime.now(UTC)  # taken per attempt: a retried write is the newest
            mapping: dict[str, str] = {}
            history: list[dict[str, Any]] = []
            changes: list[FactChange] = []
            for key, fact in incoming.items():
                at = fact.updated_at or now.isoformat()
                old = _decode(current[key]) if key in current else None
                if old is not None and _is_expired(old, now):
                    history.append(_history_entry(key, old, old["expires_at"], "expired"))
                    old = None
                if old is None:
                    action, pinned = "created", False
                    new = {"value": fact.value, "importance": fact.importance, "valid_from": at}
                elif _same_value(old["value"], fact.value):
                    if fact.source_ids and set(fact.source_ids) <= set(old["source_ids"]):
                        changes.append(_unchanged(key, old))
                        continue  # a replay of sources already counted
                    action, pinned = "strengthened", old["pinned"]
                    grown = min(1.0, round(max(old["importance"], fact.importance) + STRENGTHEN, 3))
                    new = dict(value=old["value"], importance=grown, valid_from=old["valid_from"])
                    at = max(old["updated_at"], at, key=parse_ts)
                elif parse_ts(at) < parse_ts(old["valid_from"]):
                    stale = {**asdict(fact), "valid_from": at}
                    entry = _history_entry(key, stale, old["valid_from"], "superseded")
                    history.append({**entry, "replaced_by": old["value"]})
                    changes.append(_unchanged(key, old))
                    continue  # stated before the stored value: history, not current
                else:
                    entry = _history_entry(key, old, at, "updated")
                    history.append({**entry, "replaced_by": fact.value})
                    action, pinned = "updated", old["pinned"]  # a pin is on the key
                    new = {"value": fact.value, "importance": fact.importance, "valid_from": at}
                ids = fact.source_ids if action != "strengthened" else old["source_ids"]
                new.update(
                    updated_at=at,
                    source_ids=_merge_ids(ids, fact.source_ids),
                    pinned=pinned,
                    expires_at=_expires_at(now, new["importance"], pinned, ttl_days),
                )
                mapping[key] = _dump(new)
                changes.append(
                    FactChange(key, action, old and old["value"], new["value"], new["importance"])
                )
            return mapping, [], history, changes

        return await self._transact(user_id, list(incoming), plan)

    async def forget(self, user_id: str, key: str) -> dict[str, Any] | None:
        """Remove a fact, keeping it in the history as ``forgotten``; return it, if any."""
        if not (key := normalize_fact_key(key)):
            return None
        now_s = datetime.now(UTC).isoformat()

        def plan(current: dict[str, str]) -> tuple[dict, list[str], list[dict], Any]:
            if key not in current:
                return {}, [], [], None
            fact = _decode(current[key])
            return {}, [key], [_history_entry(key, fact, now_s, "forgotten")], {"key": key, **fact}

        removed = await self._transact(user_id, [key], plan)
        # the tombstone: a fact of this key stated before now is not brought back by a
        # batch summarized later (see `upsert`); a fresh statement after it is
        await self.redis.hset(self.forgotten_key(user_id), key, now_s)
        return removed

    async def set_pinned(self, user_id: str, key: str, pinned: bool, ttl_days: TtlDays) -> bool:
        """Pin (never expires) or unpin a fact; ``False`` if there is no live fact of ``key``."""
        if not (key := normalize_fact_key(key)):
            return False
        now = datetime.now(UTC)

        def plan(current: dict[str, str]) -> tuple[dict, list[str], list[dict], bool]:
            if key not in current:
                return {}, [], [], False
            fact = _decode(current[key])
            if _is_expired(fact, now):
                return {}, [key], [_history_entry(key, fact, fact["expires_at"], "expired")], False
            fact["pinned"] = pinned
            fact["expires_at"] = _expires_at(now, fact["importance"], pinned, ttl_days)
            return {key: _dump(fact)}, [], [], True

        return await self._transact(user_id, [key], plan)

    async def history(self, user_id: str, key: str | None = None) -> list[dict[str, Any]]:
        """Values that stopped holding, by ``valid_to``, optionally of one key only."""
        entries = _entries(await self.redis.lrange(self.history_key(user_id), 0, -1))
        if key is not None:
            wanted = normalize_fact_key(key)
            entries = [e for e in entries if e.get("key") == wanted]
        return entries

    async def recent_changes(self, user_id: str, since_days: float) -> list[dict[str, Any]]:
        """Value changes of the last ``since_days`` days, oldest first: ``{key, old, new, at}``.

        A key forgotten or expired since is left out: a forgotten value must not come back.
        """
        return _changes(await self.history(user_id), since_days)
