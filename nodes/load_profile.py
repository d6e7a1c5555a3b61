"""load_profile: validate the turn's input, then read the user's live profile and its changes.

The first node of a turn, so it also starts the turn's ``memory_events`` and ``memory_decisions``.
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from graph.context import Context, current_thread_id
from graph.state import State
from memory_graph_agent.admission import start_turn
from memory_graph_agent.services import Services


async def load_profile(state: State, runtime: Runtime[Context], *, services: Services) -> dict:
    """Validate the new messages, admit the user to the thread, load their profile."""
    turn = await start_turn(
        services,
        runtime.context,
        current_thread_id(),
        state.get("messages") or [],
        bool(state.get("end_session")),
    )
    update = {
        "profile": turn.profile,
        "profile_changes": turn.changes,
        "end_session": turn.end_session,
        "memory_events": Overwrite(turn.events),  # per turn: this node starts the list
        "memory_decisions": Overwrite([]),
    }
    if turn.repairs:  # another user's rejected turn, left in this thread's checkpoint
        update["messages"] = turn.repairs
    return update
