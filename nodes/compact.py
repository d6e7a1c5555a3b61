"""compact: keep one memory of each group of near-duplicates, supersede the others."""

from __future__ import annotations

from collections import defaultdict

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.maintenance import entry, log_actions, plan_compaction
from memory_graph_agent.services import Services


async def compact(
    state: MaintenanceState, runtime: Runtime[Context], *, services: Services
) -> dict:
    """Supersede each user's active memories at least ``duplicate_similarity`` alike."""
    ctx = runtime.context
    removed = {e["id"] for key in ("expired", "evicted") for e in state.get(key, [])}
    out = []
    for user in state.get("users", []):
        pairs = await services.memories.duplicate_pairs(user, ctx.duplicate_similarity)
        ids = {i for a, b, _ in pairs for i in (a, b)} - removed
        memories = {m.id: m for m in await services.memories.get(user, sorted(ids))}
        found = [
            entry(dup, kept=kept.id, similarity=round(sim, 4))
            for dup, kept, sim in plan_compaction(memories, pairs)
        ]
        if found and not state.get("dry_run"):
            await log_actions(services, "compacted", found, target_key="kept")
            by_keeper: dict[str, list[str]] = defaultdict(list)
            for e in found:
                by_keeper[e["kept"]].append(e["id"])
            for kept, dups in by_keeper.items():
                await services.memories.supersede(user, dups, kept)
                # the keeper now stands for its duplicates: it lives as long as the
                # longest-lived of them (a superseded row is never recalled again)
                group = [memories[kept], *(memories[d] for d in dups)]
                ends = [m.expires_at for m in group]
                until = None if any(e is None for e in ends) else max(ends)
                await services.memories.extend_expiry(user, kept, until)
        out += found
    return {"compacted": out}
