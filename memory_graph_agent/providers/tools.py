"""What the memory tools do: search, remember, forget, pin and unpin, for one user.

Bad arguments and unavailable storage come back as an ``error: ...`` string for the model
to read instead of failing the turn.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_graph_agent.core.kinds import is_stored, is_turn
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.prompting.rendering import defang, render_memory
from memory_graph_agent.providers.base import MemoryProvider
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.storage.profile import Fact, normalize_fact_key
from memory_graph_agent.turn.validation import InvalidInputError, validate_text

MAX_FACT_CHARS = 500
"""Longest fact value `remember` accepts (the profile keeps at most this much)."""

UNAVAILABLE = "error: memory storage is unavailable right now; answer without it"
_MEMORY_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def is_memory_id(ref: str) -> bool:
    """Whether ``ref`` names a stored memory (a UUID) rather than a profile key."""
    return bool(_MEMORY_ID.match(ref.strip().lower()))


def render_hit(item: dict[str, Any]) -> str:
    """One search hit as a line of data; stored memories carry the id forget/pin take."""
    line = render_memory(item)
    if is_turn(item.get("kind")):
        line = f"- [episode {str(item.get('created_at', ''))[:10]}] {line.strip()}"
    if is_stored(item.get("kind")) and item.get("id"):
        line += f" (id: {item['id']})"
    return line


async def search(
    provider: MemoryProvider, settings: Settings, ctx: RunContext, thread_id: str, query: str
) -> str:
    """The user's memories matching ``query``, best first, inside a <memories> block.

    ``provider`` recalls them within ``settings.window.memory_token_budget``; one that can ``touch``
    counts the access (they are shown to the model now).
    """
    query = query.strip()
    if not query:
        return "error: query is empty; say what to look for"
    try:
        budget = settings.window.memory_token_budget
        items = await provider.recall(ctx, thread_id, query, budget)
        if (touch := getattr(provider, "touch", None)) is not None:
            await touch(ctx, items)
    except StoreUnavailable:
        return UNAVAILABLE
    if not items:
        return f"<memories>\n(nothing found for {defang(query)!r})\n</memories>"
    lines = "\n".join(render_hit(dict(item)) for item in items)
    return f"<memories>\n{lines}\n</memories>"


async def remember(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    key: str,
    fact: str,
    importance: float,
    source_ids: list[str],
) -> str:
    """Store a profile fact for the run's user; say what changed."""
    name = normalize_fact_key(key)
    if not name:
        return "error: key is empty; use a short snake_case name such as 'city'"
    value = fact.strip() if isinstance(fact, str) else ""
    if not value:
        return f"error: the fact for {name!r} is empty; nothing was stored"
    if len(value) > MAX_FACT_CHARS:
        return f"error: the fact is {len(value)} characters; the limit is {MAX_FACT_CHARS}"
    try:
        validate_text(value, "fact")
    except InvalidInputError as exc:
        return f"error: {exc}"
    if not 0.0 <= importance <= 1.0:
        return f"error: importance must be between 0 and 1, got {importance}"
    try:
        changes = await services.profile.upsert(
            ctx.user_id, [Fact(name, value, importance, source_ids=source_ids)],
            settings.retention.ttl_days,
        )  # fmt: skip
    except StoreUnavailable:
        return UNAVAILABLE
    if not changes:
        return f"error: nothing was stored for {name!r}"
    return "; ".join(_describe(change) for change in changes)


def _describe(change: Any) -> str:
    """``updated city: was 'Paris', now 'Berlin'`` and the like, for the model."""
    if change.old_value is not None and change.old_value != change.new_value:
        return f"{change.action} {change.key}: was {change.old_value!r}, now {change.new_value!r}"
    return f"{change.action} {change.key}: {change.new_value!r}"


async def forget(services: Services, user_id: str, ref: str) -> str:
    """Forget a profile fact (by key) or a stored memory (by id) of ``user_id``."""
    ref = ref.strip()
    try:
        if is_memory_id(ref):
            deleted = await services.memories.delete(user_id, [ref.lower()])
            return f"forgot memory {ref}" if deleted else f"no memory with id {ref!r}"
        key = normalize_fact_key(ref)
        removed = await services.profile.forget(user_id, key) if key else None
    except StoreUnavailable:
        return UNAVAILABLE
    if removed is None:
        return f"nothing matched {ref!r}: no profile key or memory id of this user"
    return f"forgot {key}: {removed.get('value')!r}"


async def set_pinned(
    services: Services, settings: Settings, ctx: RunContext, ref: str, pinned: bool
) -> str:
    """Pin (never expires) or unpin a profile fact or memory of the run's user."""
    user = ctx.user_id
    verb = "pinned" if pinned else "unpinned"
    ref = ref.strip()
    try:
        if is_memory_id(ref):
            mid = ref.lower()
            found = await services.memories.get(user, [mid])  # only this user's rows
            changed = False
            if found:
                days = settings.retention.ttl_days(found[0].importance, pinned)
                expires = None if days is None else datetime.now(UTC) + timedelta(days=days)
                changed = await services.memories.set_pinned(user, mid, pinned, expires)
            return f"{verb} memory {mid}" if changed else f"no memory with id {ref!r}"
        key = normalize_fact_key(ref)
        changed = bool(key) and await services.profile.set_pinned(
            user, key, pinned, settings.retention.ttl_days
        )
    except StoreUnavailable:
        return UNAVAILABLE
    if not changed:
        return f"nothing matched {ref!r}: no profile key or memory id of this user"
    return f"{verb} {key}" + (": it no longer expires" if pinned else ": it expires again")
