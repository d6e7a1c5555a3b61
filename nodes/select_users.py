"""select_users: the users a maintenance run covers (one, or everyone with memories)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.services.stores import Services


async def select_users(
    state: MaintenanceState, runtime: Runtime[Context], *, services: Services
) -> dict:
    """``all_users``: every user with memories; else ``user_id`` or the context's user."""
    if state.get("all_users"):
        return {"users": await services.memories.users()}
    return {"users": [validate_id(state.get("user_id") or runtime.context.user_id, "user_id")]}
