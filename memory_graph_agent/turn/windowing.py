"""The working window: mirror each turn into Redis and move what leaves it to pending.

Messages leave on a turn boundary, after they are durably in the episode log, when the
window holds more than ``window_size`` messages or more than its token share of the
memory budget (``window_token_share``; the newest two turns always stay), when the next
prompt would be too large (``compress``), or at ``end_session``. While Redis is down a turn
waits in `window_buffer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_graph_agent.core import metrics
from memory_graph_agent.core.records import MemoryEvent, event
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.prompting.budgets import (
    context_tokens,
    cut_to_recent_turns,
    messages_over_budget,
    trigger_budget,
    window_cut,
    window_token_cap,
)
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.failsafe import window_buffer
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.storage.window import StoredMessage

SEEN_SLACK = 1000
"""Ids the seen-set may hold beyond the checkpoint's messages and the Redis lists'."""


@dataclass
class WindowUpdate:
    """What `update_window` did: moved messages, the backlog, and what to do next."""

    moved: list[StoredMessage] = field(default_factory=list)
    pending: int = 0
    compress: bool = False
    events: list[MemoryEvent] = field(default_factory=list)


def _note(update: WindowUpdate, kind: str, text: str, node: str = "trim_window") -> None:
    update.events.append(event(node, kind, text))


async def read_backlog(services: Services, user: str, thread_id: str) -> WindowUpdate:
    """The start of a memory run: only how many messages wait (no push, no eviction)."""
    update = WindowUpdate()
    try:
        update.pending = await services.queue.backlog(user, thread_id)
    except StoreUnavailable as exc:
        if exc.service != "redis":
            raise
        _note(update, "unavailable", "window: Redis unavailable, the backlog waits", "backlog")
        return update
    _note(update, "backlog", f"memory run: {update.pending} messages waiting", "backlog")
    return update


async def update_window(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    thread_id: str,
    messages: Sequence[Any],
    end_session: bool,
    next_system_prompt: str,
) -> WindowUpdate:
    """Push the turn's messages (once each), then move the oldest out of the window."""
    user = ctx.user_id
    update = WindowUpdate()
    incoming = [StoredMessage.from_message(m) for m in messages]
    buffered = window_buffer.take(user, thread_id)
    try:
        pushed = await services.window.push(user, thread_id, buffered + incoming)
        moved, compressed = await _evict(
            services, settings, ctx, thread_id, end_session, next_system_prompt, update
        )
        update.pending = await services.queue.backlog(user, thread_id)
        state_ids = [m.id for m in buffered + incoming]
        await services.window.trim_seen(user, thread_id, state_ids, SEEN_SLACK)
    except StoreUnavailable as exc:
        if exc.service != "redis":
            window_buffer.put_back(user, thread_id, buffered)
            raise
        # the turn still completes; the checkpoint keeps the messages
        window_buffer.put_back(user, thread_id, buffered + incoming)
        _note(update, "buffered", f"window: Redis unavailable, {len(window_buffer)} buffered")
        if end_session:  # not archived; consumed anyway so the next turn is answered
            _note(
                update, "session_end_deferred", "window: session end deferred (Redis unavailable)"
            )
        return update
    except BaseException:  # whatever failed, the buffered messages wait for the next turn
        window_buffer.put_back(user, thread_id, buffered)
        raise
    metrics.set_pending(update.pending)
    update.moved = moved
    update.compress = (compressed or end_session) and update.pending > 0
    text = f"window: +{pushed} messages, {len(moved)} evicted to pending (pending={update.pending})"
    _note(update, "pushed", text)
    return update


async def _evict(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    thread_id: str,
    end_session: bool,
    next_system_prompt: str,
    update: WindowUpdate,
) -> tuple[list[StoredMessage], bool]:
    """Log the window to Postgres, then move messages out of it (never before).

    Returns the moved messages and whether the token budget forced a compression.
    """
    user = ctx.user_id
    window = await services.window.window(user, thread_id)
    cap = window_token_cap(settings.window.memory_token_budget, settings.window.token_share)

    def cut_of(messages: Sequence[StoredMessage]) -> int:
        return window_cut(messages, settings.window.size, cap)

    count_cut = cut_of(window)
    token_cut = 0
    if not end_session:
        budget = trigger_budget(context_tokens(settings, ctx.model), settings.window.trigger_ratio)
        if messages_over_budget(next_system_prompt, window[count_cut:], budget):
            token_cut = cut_to_recent_turns(window[count_cut:], settings.window.keep_recent_turns)
    # any move needs the log write to be durable first
    evicting = (end_session and bool(window)) or count_cut + token_cut > 0
    try:
        open_count = await services.episodes.append(user, thread_id, window, durable=evicting)
        requeued = await requeue_lost(services, user, thread_id, len(window), open_count)
    except StoreUnavailable as exc:
        if exc.service != "postgres":
            raise
        _note(update, "eviction_deferred", "window: episodic log unavailable, eviction deferred")
        if end_session:
            _note(
                update,
                "session_end_deferred",
                "window: session end deferred (Postgres unavailable)",
            )
        return [], False
    if requeued:
        _note(
            update, "requeued", f"window: {requeued} messages lost by Redis re-queued from the log"
        )
    if end_session:
        moved = await services.window.flush(user, thread_id)
        _note(update, "flushed", f"window: session end, {len(moved)} messages flushed to pending")
        return moved, False
    moved = await services.window.overflow(user, thread_id, cut_of)
    if not token_cut:
        return moved, False
    keep = settings.window.keep_recent_turns
    compressed = await services.window.evict_before_turns(user, thread_id, keep)
    _note(
        update,
        "compressed",
        f"window: prompt over {settings.window.trigger_ratio:.0%} of "
        f"{context_tokens(settings, ctx.model)} "
        f"tokens, {len(compressed)} messages before the last {keep} turns compressed",
    )
    return moved + compressed, bool(compressed)


async def requeue_lost(
    services: Services, user: str, thread_id: str, window_len: int, open_count: int
) -> int:
    """Re-queue logged, unsummarized messages that no Redis list holds any more.

    Cheap when nothing was lost: the log's open count against list lengths in Redis.
    """
    held = window_len + await services.queue.backlog(user, thread_id)
    if open_count <= held:
        return 0
    held += await services.queue.dead_count(user, thread_id)
    if open_count <= held:
        return 0
    # one atomic snapshot before the log is read (a message summarized and acked meanwhile
    # was held), and `requeue` checks again atomically (one pushed meanwhile is held now)
    present = await services.queue.held_ids(user, thread_id)
    lost = [m for m in await services.episodes.unsummarized(user, thread_id) if m.id not in present]
    return await services.queue.requeue(user, thread_id, lost)
