"""trim_window: mirror the turn into the Redis window, move overflow and old turns to pending.

Rules: `memory_graph_agent.turn.windowing.update_window`; this node also consumes ``end_session``,
records the access of what ``recall`` put in the prompt (after the reply, off the hot path)
and, in ``memory_mode="background"``, hands due memory work to the scheduler. It is the
first node of a memory run (``context.memory_of``): there it only reads the backlog and
starts that run's report.
"""

from __future__ import annotations

from langchain_core.messages import RemoveMessage
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from graph.context import Context, MemoryScheduler, current_thread_id
from graph.prompts import system_prompt
from graph.state import State
from memory_graph_agent.core.records import event
from memory_graph_agent.recall.retrieval import record_access
from memory_graph_agent.services.stores import Services
from memory_graph_agent.turn.rendering import notices
from memory_graph_agent.turn.windowing import read_backlog, update_window


async def trim_window(
    state: State,
    runtime: Runtime[Context],
    *,
    services: Services,
    scheduler: MemoryScheduler | None = None,
) -> dict:
    """Push new messages (once each), move the oldest out of the window to pending."""
    ctx = runtime.context
    thread = current_thread_id()
    if ctx.memory_of:  # a memory run starts here: the backlog, and its own report
        backlog = await read_backlog(services, ctx.user_id, thread)
        return {
            "pending_count": backlog.pending,
            "compress": bool(state.get("compress")) and backlog.pending > 0,
            "memory_scheduled": False,
            "memory_events": Overwrite(notices("trim_window") + backlog.events),
            "memory_decisions": Overwrite([]),
            "memory_cost": Overwrite({}),
        }
    messages = state.get("messages") or []
    end_session = bool(state.get("end_session"))
    # the next prompt is estimated as this turn's system prompt plus what stays
    system = system_prompt(state, ctx.profile_token_budget)
    window = await update_window(services, ctx, ctx.user_id, thread, messages, end_session, system)
    if not end_session:  # after the reply: the recall of this turn, as access statistics
        await record_access(services, ctx.user_id, state.get("recalled") or [])
    in_state = {m.id for m in messages}
    events = notices("trim_window") + window.events
    update = {
        "messages": [RemoveMessage(id=m.id) for m in window.moved if m.id in in_state],
        "pending_count": window.pending,
        "compress": window.compress,
        "memory_scheduled": False,
    }
    if end_session:  # consumed: the thread's next turn is an ordinary one
        update["end_session"] = False
    due = window.pending >= ctx.summary_batch or window.compress
    if scheduler is not None and ctx.memory_mode == "background" and due and not end_session:
        try:
            await scheduler(ctx, thread, window.compress)
        except Exception as exc:  # no scheduler reachable: form memory in this run
            text = f"trim_window: background memory unavailable ({type(exc).__name__}), inline"
            events.append(event("trim_window", "inline", text))
        else:
            update["memory_scheduled"] = True
            text = f"trim_window: {window.pending} messages handed to a background memory run"
            events.append(event("trim_window", "scheduled", text))
    return {**update, "memory_events": events}
