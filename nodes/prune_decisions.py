"""prune_decisions: age out the decision log (``decision_retention_days``)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import prune_decisions as prune_user_decisions
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


async def prune_decisions(
    state: MaintenanceState, runtime: Runtime[Context], *, services: Services, settings: Settings
) -> dict:
    """Delete each selected user's old decisions, but those a retry may still read."""
    days = settings.retention.decision_retention_days
    if days == 0:
        return {"decisions": [], "decision_retention": "off (decision_retention_days=0)"}
    dry_run = bool(state.get("dry_run"))
    out = []
    for user in state.get("users", []):
        found = await prune_user_decisions(services, user, days, dry_run)
        if found:
            out.append(found)
    return {"decisions": out, "decision_retention": f"older than {days} days"}
