"""compact: keep one memory of each group of near-duplicates, supersede the others."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import compact_memories
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


async def compact(
    state: MaintenanceState, runtime: Runtime[Context], *, services: Services, settings: Settings
) -> dict:
    """Supersede each user's active memories at least ``duplicate_similarity`` alike."""
    gone = {e["id"] for key in ("expired", "evicted") for e in state.get(key, [])}
    out = []
    for user in state.get("users", []):
        out += await compact_memories(
            services,
            user,
            settings.retention.duplicate_similarity,
            bool(state.get("dry_run")),
            gone,
        )
    return {"compacted": out}
