"""prune_checkpoints: keep each thread's latest checkpoint only (``checkpoint_retention``)."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import CheckpointRetention, prune_thread_checkpoints
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.server_threads import RetentionUnsupportedError

log = logging.getLogger(__name__)


async def prune_checkpoints(
    state: MaintenanceState,
    runtime: Runtime[Context],
    *,
    services: Services,
    settings: Settings,
    checkpoints: CheckpointRetention | None,
) -> dict:
    """Prune the selected users' threads; say why not when retention is off or unavailable."""
    if settings.retention.checkpoint_retention == "off":
        return {"pruned": [], "retention": "off (checkpoint_retention)"}
    if checkpoints is None:
        return {"pruned": [], "retention": "no checkpointer given to this maintenance graph"}
    users, dry_run = state.get("users", []), bool(state.get("dry_run"))
    try:
        found = await prune_thread_checkpoints(services, checkpoints, users, dry_run)
    except RetentionUnsupportedError as exc:
        log.warning("checkpoint retention unsupported by this server's runtime: %s", exc)
        return {"pruned": [], "retention": f"unsupported by the server's runtime: {exc}"}
    return {"pruned": found, "retention": "keep_latest"}
