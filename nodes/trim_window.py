"""trim_window: mirror the turn into the Redis window and evict its overflow to pending."""

from __future__ import annotations

import logging

from langchain_core.messages import RemoveMessage
from langgraph.runtime import Runtime

from graph import metrics
from graph.context import Context
from graph.state import State
from graph.utils import current_thread_id
from stores.failsafe import POSTGRES_DOWN, REDIS_DOWN, outages, window_buffer
from stores.services import Services, get_services
from stores.window import StoredMessage

log = logging.getLogger(__name__)


async def trim_window(state: State, runtime: Runtime[Context]) -> dict:
    """Push new messages (once each), move the oldest beyond ``window_size`` to pending.

    Messages are moved with ``LMOVE`` on a turn boundary, so a tool call is never
    separated from its results, and removed from the graph state.
    """
    ctx = runtime.context
    thread_id = current_thread_id()
    services = await get_services(ctx.embedding_model)
    user = ctx.user_id
    events = list(state.get("memory_events", []))
    incoming = [StoredMessage.from_message(m) for m in state["messages"]]
    buffered = window_buffer.take(user, thread_id)
    try:
        pushed = await services.window.push(user, thread_id, buffered + incoming)
        moved = await _evict(services, ctx, user, thread_id, events)
        pending = await services.queue.backlog(user, thread_id)
        outages.ok("redis")
    except REDIS_DOWN as exc:  # the turn still completes; the checkpoint keeps the messages
        outages.failed("redis", exc)
        window_buffer.put_back(user, thread_id, buffered + incoming)
        events.append(f"window: Redis unavailable, {len(window_buffer)} messages buffered")
        return {"pending_count": 0, "memory_events": events}
    metrics.set_pending(pending)
    in_state = {m.id for m in state["messages"]}
    removals = [RemoveMessage(id=m.id) for m in moved if m.id in in_state]
    events.append(
        f"window: +{pushed} messages, {len(moved)} evicted to pending (pending={pending})"
    )
    return {"messages": removals, "pending_count": pending, "memory_events": events}


async def _evict(
    services: Services, ctx: Context, user: str, thread_id: str, events: list[str]
) -> list[StoredMessage]:
    """Log the window to Postgres, then move its overflow to pending (never before)."""
    window = await services.window.window(user, thread_id)
    evicting = len(window) > ctx.window_size  # then the log write must be durable first
    try:
        open_count = await services.episodes.append(user, thread_id, window, durable=evicting)
        requeued = await _requeue_lost(services, user, thread_id, len(window), open_count)
        outages.ok("postgres")
    except POSTGRES_DOWN as exc:  # keep everything in the window until the log has it
        outages.failed("postgres", exc)
        events.append("window: episodic log unavailable, eviction deferred")
        return []
    if requeued:
        events.append(f"window: {requeued} messages lost by Redis re-queued from the log")
    return await services.window.overflow(user, thread_id, ctx.window_size)


async def _requeue_lost(
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
    present = {m.id for m in await services.window.window(user, thread_id)}
    present |= {m.id for _, m in await services.window.pending(user, thread_id)}
    present |= {m.id for m in await services.queue.processing(user, thread_id)}
    for entry in await services.queue.dead_letters(user, thread_id):
        present |= {m.id for m in entry["items"]}
    lost = [m for m in await services.episodes.unsummarized(user, thread_id) if m.id not in present]
    return await services.queue.requeue(user, thread_id, lost)
