"""select_users: the users a maintenance run covers (one, or everyone with anything stored)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.services.stores import Services


async def select_users(
    state: MaintenanceState, runtime: Runtime[Context], *, services: Services
) -> dict:
    """``all_users``: every user with memories, threads or decisions; else ``user_id``."""
    if state.get("all_users"):
        found = set(await services.memories.users()) | await services.threads.owners()
        found |= set(await services.decisions.users())
        return {"users": sorted(found)}
    return {"users": [validate_id(state.get("user_id") or runtime.context.user_id, "user_id")]}
