"""backlog: the first node of a memory run, which reads the thread's waiting messages.

A memory run (`graph.background`) runs on the conversation's memory thread, with
``context.memory_of`` naming the conversation: START → backlog → summarize → consolidate
→ reflect. This node counts what waits in the conversation's pending list and starts the
run's report; `graph.routing.route_after_trim` then decides, as after a turn's
``trim_window``, whether a batch is due.
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from graph.context import Context, current_thread_id
from graph.state import State
from memory_graph_agent.prompting.rendering import notices
from memory_graph_agent.services.stores import Services
from memory_graph_agent.turn.windowing import read_backlog


async def backlog(state: State, runtime: Runtime[Context], *, services: Services) -> dict:
    """Count the conversation's pending messages; start this memory run's report."""
    waiting = await read_backlog(services, runtime.context.user_id, current_thread_id())
    return {
        "pending_count": waiting.pending,
        "compress": bool(state.get("compress")) and waiting.pending > 0,
        "memory_scheduled": False,
        "memory_events": Overwrite(notices("backlog") + waiting.events),
        "memory_decisions": Overwrite([]),
        "memory_cost": Overwrite({}),
    }
