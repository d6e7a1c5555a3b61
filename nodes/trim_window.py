"""trim_window: mirror the turn into the Redis window and evict its overflow to pending."""

from __future__ import annotations

from langchain_core.messages import RemoveMessage
from langgraph.runtime import Runtime

from graph import metrics
from graph.context import Context
from graph.state import State
from graph.utils import current_thread_id
from stores.services import get_services
from stores.window import StoredMessage


async def trim_window(state: State, runtime: Runtime[Context]) -> dict:
    """Push new messages (once each), move the oldest beyond ``window_size`` to pending.

    Messages are moved with ``LMOVE`` on a turn boundary, so a tool call is never
    separated from its results, and removed from the graph state.
    """
    ctx = runtime.context
    thread_id = current_thread_id()
    services = await get_services(ctx.embedding_model)
    messages = state["messages"]
    pushed = await services.window.push(
        ctx.user_id, thread_id, [StoredMessage.from_message(m) for m in messages]
    )
    moved = await services.window.overflow(ctx.user_id, thread_id, ctx.window_size)
    pending = await services.window.pending_len(ctx.user_id, thread_id)
    metrics.set_pending(pending)
    in_state = {m.id for m in messages}
    removals = [RemoveMessage(id=m.id) for m in moved if m.id in in_state]
    event = f"window: +{pushed} messages, {len(moved)} evicted to pending (pending={pending})"
    return {
        "messages": removals,
        "pending_count": pending,
        "memory_events": [*state.get("memory_events", []), event],
    }
