"""Maintenance rules: which near-duplicates to supersede, and how actions are logged."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memory_graph_agent.services import Services
from memory_graph_agent.storage.decisions import Decision
from memory_graph_agent.storage.memories import Memory


def entry(memory: Memory, **extra: Any) -> dict[str, Any]:
    """One report line about ``memory``."""
    return {
        "id": memory.id,
        "user_id": memory.user_id,
        "kind": memory.kind,
        "importance": memory.importance,
        "text": memory.text[:120],
        **extra,
    }


async def log_actions(
    services: Services, action: str, entries: list[dict[str, Any]], target_key: str = ""
) -> None:
    """Record one ``maintenance`` decision per entry (``item_id`` is ``action:memory id``)."""
    for e in entries:
        await services.decisions.record(
            Decision(
                user_id=e["user_id"],
                item_kind="maintenance",
                item_id=f"{action}:{e['id']}",
                action=action,
                target_id=e.get(target_key) if target_key else e["id"],
                detail={k: v for k, v in e.items() if k not in ("user_id",)},
            )
        )


def plan_compaction(
    memories: dict[str, Memory], pairs: list[tuple[str, str, float]]
) -> list[tuple[Memory, Memory, float]]:
    """``(duplicate, kept, similarity)`` for each memory to supersede.

    The keeper of a group is the pinned, then most important, then oldest memory;
    pinned memories are never superseded.
    """
    neighbours: dict[str, dict[str, float]] = defaultdict(dict)
    for a, b, sim in pairs:
        if a in memories and b in memories:
            neighbours[a][b] = neighbours[b][a] = sim
    order = sorted(
        (memories[i] for i in neighbours),
        key=lambda m: (not m.pinned, -m.importance, m.created_at, m.id),
    )
    rank = {m.id: i for i, m in enumerate(order)}
    superseded: dict[str, tuple[Memory, Memory, float]] = {}
    for keeper in order:
        if keeper.id in superseded:
            continue
        for other_id, sim in neighbours[keeper.id].items():
            other = memories[other_id]
            # higher-ranked neighbours are keepers already (they would have taken this one)
            if other_id not in superseded and not other.pinned and rank[other_id] > rank[keeper.id]:
                superseded[other_id] = (other, keeper, sim)
    return list(superseded.values())
