"""trim_window: mirror the turn into the Redis window, move overflow and old turns to pending.

Rules: `memory_graph_agent.turn.closing.finish_turn` (the window, the access of what
``recall`` put in the prompt, after the reply, and, in ``memory_mode="background"``, due
memory work handed to the scheduler); this node also consumes ``end_session``. A turn's
last node: a memory run starts at ``backlog`` instead.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context, MemoryScheduler, current_thread_id
from graph.prompts import system_prompt
from graph.state import State
from memory_graph_agent.prompting.rendering import notices
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.turn.closing import finish_turn


async def trim_window(
    state: State,
    runtime: Runtime[Context],
    *,
    services: Services,
    settings: Settings,
    scheduler: MemoryScheduler | None = None,
) -> dict:
    """Push new messages (once each), move the oldest out of the window to pending."""
    ctx = runtime.context
    thread = current_thread_id()
    messages = state.get("messages") or []
    end_session = bool(state.get("end_session"))
    end = await finish_turn(
        services,
        settings,
        ctx,
        thread,
        messages,
        end_session=end_session,
        # the next prompt is estimated as this turn's system prompt plus what stays
        next_system_prompt=system_prompt(state, settings.window.profile_token_budget),
        recalled=state.get("recalled") or [],
        scheduler=scheduler,
    )
    update = {
        "messages": end.removed,
        "pending_count": end.window.pending,
        "compress": end.window.compress,
        "memory_scheduled": end.scheduled or end.deferred,  # either way not in this run
        "memory_events": notices("trim_window") + end.events,
    }
    if end_session:  # consumed: the thread's next turn is an ordinary one
        update["end_session"] = False
    return update
