"""trim_window: mirror the turn into the Redis window, move overflow and old turns to pending.

Rules: `memory_graph_agent.windowing.update_window`; this node also consumes ``end_session``.
"""

from __future__ import annotations

from langchain_core.messages import RemoveMessage
from langgraph.runtime import Runtime

from graph.context import Context, current_thread_id
from graph.prompts import system_prompt
from graph.state import State
from memory_graph_agent.rendering import notices
from memory_graph_agent.services import Services
from memory_graph_agent.windowing import update_window


async def trim_window(state: State, runtime: Runtime[Context], *, services: Services) -> dict:
    """Push new messages (once each), move the oldest out of the window to pending."""
    ctx = runtime.context
    messages = state.get("messages") or []
    end_session = bool(state.get("end_session"))
    # the next prompt is estimated as this turn's system prompt plus what stays
    system = system_prompt(state, ctx.profile_token_budget)
    window = await update_window(
        services, ctx, ctx.user_id, current_thread_id(), messages, end_session, system
    )
    in_state = {m.id for m in messages}
    update = {
        "messages": [RemoveMessage(id=m.id) for m in window.moved if m.id in in_state],
        "pending_count": window.pending,
        "compress": window.compress,
        "memory_events": notices("trim_window") + window.events,
    }
    if end_session:  # consumed: the thread's next turn is an ordinary one
        update["end_session"] = False
    return update
