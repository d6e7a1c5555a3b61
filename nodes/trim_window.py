"""trim_window: mirror the turn into the Redis window, evict overflow and old turns to pending."""

from __future__ import annotations

import logging

from langchain_core.messages import RemoveMessage
from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State
from memory_graph_agent import metrics
from memory_graph_agent.budgets import cut_to_recent_turns, messages_over_budget, trigger_budget
from memory_graph_agent.services import Services, get_services
from memory_graph_agent.storage.failsafe import POSTGRES_DOWN, REDIS_DOWN, outages, window_buffer
from memory_graph_agent.storage.window import StoredMessage, turn_boundary_cut
from memory_graph_agent.utils import current_thread_id, events_so_far
from nodes.respond import build_system_prompt

log = logging.getLogger(__name__)


async def trim_window(state: State, runtime: Runtime[Context]) -> dict:
    """Push new messages (once each), move the oldest out of the window to pending.

    Three reasons move messages out, always on a turn boundary (a tool call is never
    separated from its results) and only after the window is durably in the episode
    log: more than ``window_size`` messages; a next prompt larger than
    ``trigger_ratio × context_window_tokens`` (everything before the last
    ``keep_recent_turns`` turns leaves and ``compress`` asks summarize to drain it
    now); and ``end_session`` (the whole window leaves, the flag is consumed). Moved
    messages are removed from the graph state.
    """
    ctx = runtime.context
    thread_id = current_thread_id()
    services = await get_services(ctx.embedding_model)
    user = ctx.user_id
    end_session = bool(state.get("end_session"))
    events = events_so_far(state)
    incoming = [StoredMessage.from_message(m) for m in state.get("messages") or []]
    buffered = window_buffer.take(user, thread_id)
    try:
        pushed = await services.window.push(user, thread_id, buffered + incoming)
        moved, compressed = await _evict(services, ctx, state, user, thread_id, events)
        pending = await services.queue.backlog(user, thread_id)
        outages.ok("redis")
    except REDIS_DOWN as exc:  # the turn still completes; the checkpoint keeps the messages
        outages.failed("redis", exc)
        window_buffer.put_back(user, thread_id, buffered + incoming)
        events.append(f"window: Redis unavailable, {len(window_buffer)} messages buffered")
        update = {"pending_count": 0, "compress": False, "memory_events": events}
        if end_session:  # not archived; consumed anyway so the next turn is answered
            update["end_session"] = False
            events.append("window: session end deferred (Redis unavailable), send it again")
        return update
    metrics.set_pending(pending)
    in_state = {m.id for m in state.get("messages") or []}
    removals = [RemoveMessage(id=m.id) for m in moved if m.id in in_state]
    events.append(
        f"window: +{pushed} messages, {len(moved)} evicted to pending (pending={pending})"
    )
    update = {
        "messages": removals,
        "pending_count": pending,
        "compress": (compressed or end_session) and pending > 0,
        "memory_events": events,
    }
    if end_session:  # consumed: the thread's next turn is an ordinary one
        update["end_session"] = False
    return update


async def _evict(
    services: Services,
    ctx: Context,
    state: State,
    user: str,
    thread_id: str,
    events: list[str],
) -> tuple[list[StoredMessage], bool]:
    """Log the window to Postgres, then move messages out of it (never before).

    Returns the moved messages and whether the token budget forced a compression.
    """
    window = await services.window.window(user, thread_id)
    end_session = bool(state.get("end_session"))
    count_cut = turn_boundary_cut(window, ctx.window_size)
    token_cut = 0 if end_session else _token_cut(ctx, state, window[count_cut:])
    # any move needs the log write to be durable first
    evicting = (end_session and bool(window)) or count_cut + token_cut > 0
    try:
        open_count = await services.episodes.append(user, thread_id, window, durable=evicting)
        requeued = await _requeue_lost(services, user, thread_id, len(window), open_count)
        outages.ok("postgres")
    except POSTGRES_DOWN as exc:  # keep everything in the window until the log has it
        outages.failed("postgres", exc)
        events.append("window: episodic log unavailable, eviction deferred")
        if end_session:
            events.append("window: session end deferred (Postgres unavailable), send it again")
        return [], False
    if requeued:
        events.append(f"window: {requeued} messages lost by Redis re-queued from the log")
    if end_session:
        moved = await services.window.flush(user, thread_id)
        events.append(f"window: session end, {len(moved)} messages flushed to pending")
        return moved, False
    moved = await services.window.overflow(user, thread_id, ctx.window_size)
    if not token_cut:
        return moved, False
    compressed = await services.window.evict_before_turns(user, thread_id, ctx.keep_recent_turns)
    events.append(
        f"window: prompt over {ctx.trigger_ratio:.0%} of {ctx.context_window_tokens} "
        f"tokens, {len(compressed)} messages before the last {ctx.keep_recent_turns} "
        "turns compressed"
    )
    return moved + compressed, bool(compressed)


def _token_cut(ctx: Context, state: State, window: list[StoredMessage]) -> int:
    """Messages to compress so the next prompt fits (0 when it fits already).

    The next prompt is estimated as this turn's system prompt (profile, recalled
    memories, thread summary) plus the window left after the count-based eviction.
    """
    budget = trigger_budget(ctx.context_window_tokens, ctx.trigger_ratio)
    if not messages_over_budget(build_system_prompt(state), window, budget):
        return 0
    return cut_to_recent_turns(window, ctx.keep_recent_turns)


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
