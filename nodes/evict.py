"""evict: remove old memories that never became important."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import evict_memories
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


async def evict(
    state: MaintenanceState, runtime: Runtime[Context], *, services: Services, settings: Settings
) -> dict:
    """Delete unpinned memories below ``evict_below_importance`` older than ``evict_after_days``.

    On a dry run, memories `expire` would already remove are not counted twice.
    """
    dry_run = bool(state.get("dry_run"))
    gone = {e["id"] for e in state.get("expired", [])}
    out = []
    for user in state.get("users", []):
        out += await evict_memories(
            services,
            user,
            settings.retention.evict_below_importance,
            settings.retention.evict_after_days,
            dry_run,
            gone,
        )
    return {"evicted": out}
