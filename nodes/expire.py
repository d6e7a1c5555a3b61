"""expire: remove memories whose expiry (set from their importance) has passed."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import entry, log_actions
from memory_graph_agent.services import Services


async def expire(state: MaintenanceState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Delete each selected user's expired, unpinned memories (only report on a dry run)."""
    out = []
    for user in state.get("users", []):
        found = [entry(m, expires_at=m.expires_at) for m in await services.memories.expired(user)]
        if found and not state.get("dry_run"):
            await log_actions(services, "expired", found)
            await services.memories.delete(user, [e["id"] for e in found])
        out += found
    return {"expired": out}
