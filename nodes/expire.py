"""expire: remove memories whose expiry (set from their importance) has passed."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import expire_memories
from memory_graph_agent.services.stores import Services


async def expire(state: MaintenanceState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Delete each selected user's expired, unpinned memories (only report on a dry run)."""
    dry_run = bool(state.get("dry_run"))
    out = []
    for user in state.get("users", []):
        out += await expire_memories(services, user, dry_run)
    return {"expired": out}
