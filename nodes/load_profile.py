"""load_profile: validate the turn's input, then read the user's live profile and its changes.

A turn starts with this node and ``recall`` side by side, so it starts the turn's
``memory_events`` (as ``recall`` does: `graph.state.turn_start`), ``memory_decisions`` and
``memory_cost``. It writes only the channels whose value changed: an unchanged profile
costs the checkpoint no new blob. Input it refuses fails the step, and with it
``recall``, which writes nothing.
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from graph.context import Context, current_thread_id
from graph.state import State, turn_start
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.turn.admission import start_turn
from memory_graph_agent.turn.validation import check_id

RESET = ("memory_decisions", "memory_cost")
"""Accumulated per turn (by their reducers): set back to empty at the turn's start."""


async def load_profile(
    state: State, runtime: Runtime[Context], *, services: Services, settings: Settings
) -> dict:
    """Validate the new messages, admit the user to the thread, load their profile."""
    check_id(runtime.context.user_id, "user_id")
    thread_id = check_id(current_thread_id(), "thread_id")
    turn = await start_turn(  # one Redis round trip: admission, profile, running summary
        services,
        settings,
        runtime.context,
        thread_id,
        state.get("messages") or [],
        bool(state.get("end_session")),
    )
    update: dict = {"memory_events": turn_start(turn.events)}  # per turn: with recall's
    values = {
        "profile": turn.profile,
        "profile_changes": turn.changes,
        "end_session": turn.end_session,
        "memory_decisions": [],  # this turn's, from empty
        "memory_cost": {},
    }
    if turn.thread_summary is not None:  # Redis down: the checkpoint's stays
        values["thread_summary"] = turn.thread_summary
    for key, value in values.items():  # an unchanged channel keeps its checkpointed blob
        if key not in state or state[key] != value:
            update[key] = Overwrite(value) if key in RESET else value
    if turn.repairs:  # another user's rejected turn, or a thread archived while idle
        update["messages"] = turn.repairs
    return update
