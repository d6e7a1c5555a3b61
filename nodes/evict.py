"""evict: remove old memories that never became important."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import entry, log_actions
from memory_graph_agent.services import Services


async def evict(state: MaintenanceState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Delete unpinned memories below ``evict_below_importance`` older than ``evict_after_days``.

    On a dry run, memories `expire` would already remove are not counted twice.
    """
    ctx = runtime.context
    gone = {e["id"] for e in state.get("expired", [])}
    out = []
    for user in state.get("users", []):
        old = await services.memories.evictable(
            user, ctx.evict_below_importance, ctx.evict_after_days
        )
        found = [entry(m, created_at=m.created_at) for m in old if m.id not in gone]
        if found and not state.get("dry_run"):
            await log_actions(services, "evicted", found)
            await services.memories.delete(user, [e["id"] for e in found])
        out += found
    return {"evicted": out}
