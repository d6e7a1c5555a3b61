"""archive_idle: a session end for each thread idle ``idle_thread_days``, then its keys go."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from graph.prompts import MEMORY_PROMPTS
from memory_graph_agent.formation.idle_threads import archive_idle_threads
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


async def archive_idle(
    state: MaintenanceState, runtime: Runtime[Context], *, services: Services, settings: Settings
) -> dict:
    """Summarize each selected user's idle threads' windows, then free their Redis keys."""
    days = settings.retention.idle_thread_days
    if days == 0:
        return {"archived": [], "idle_threads": "off (idle_thread_days=0)"}
    dry_run, out = bool(state.get("dry_run")), []
    for user in state.get("users", []):
        out += await archive_idle_threads(
            services, settings, runtime.context, user, MEMORY_PROMPTS, dry_run
        )
    return {"archived": out, "idle_threads": f"idle for {days} days"}
