"""report: summarise what a maintenance run did (or would do, on a dry run)."""

from __future__ import annotations

import logging
from collections import Counter

from langgraph.runtime import Runtime

from graph.context import Context
from graph.maintenance_state import MaintenanceState
from memory_graph_agent.prompting.rendering import now_iso

log = logging.getLogger(__name__)

ACTIONS = ("expired", "evicted", "compacted")
THREAD_ACTIONS = ("pruned", "held")
"""What prune_checkpoints did to a thread's checkpoints (its entries' ``action``)."""


async def report(state: MaintenanceState, runtime: Runtime[Context]) -> dict:
    """Counts per action, overall and per user, in ``report``; logged too."""
    per_user: dict[str, Counter] = {u: Counter() for u in state.get("users", [])}
    for action in ACTIONS:
        for e in state.get(action, []):
            per_user.setdefault(e["user_id"], Counter())[action] += 1
    for e in state.get("pruned", []):
        per_user.setdefault(e["user_id"], Counter())[f"checkpoints_{e['action']}"] += 1
    for e in state.get("archived", []):
        per_user.setdefault(e["user_id"], Counter())[f"threads_{e['action']}"] += 1
    for e in (e for e in state.get("decisions", []) if e["pruned"]):
        per_user.setdefault(e["user_id"], Counter())["decisions_pruned"] += e["pruned"]
    totals = {a: len(state.get(a, [])) for a in ACTIONS}
    threads = Counter(e["action"] for e in state.get("pruned", []))
    totals |= {f"checkpoints_{a}": threads[a] for a in THREAD_ACTIONS}
    idle = Counter(e["action"] for e in state.get("archived", []))
    totals |= {"threads_archived": idle["archived"], "threads_held": idle["held"]}
    totals["decisions_pruned"] = sum(e["pruned"] for e in state.get("decisions", []))
    out = {
        "dry_run": bool(state.get("dry_run")),
        "users": len(per_user),
        **totals,
        "retention": state.get("retention", ""),
        "decision_retention": state.get("decision_retention", ""),
        "idle_threads": state.get("idle_threads", ""),
        "per_user": {
            u: {a: c[a] for a in ACTIONS} | {k: n for k, n in c.items() if k not in ACTIONS}
            for u, c in per_user.items()
            if c
        },
        "finished_at": now_iso(),
    }
    log.info("maintenance %s: %s", "dry run" if out["dry_run"] else "done", totals)
    return {"report": out}
