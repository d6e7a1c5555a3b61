"""Shared by the maintenance nodes: how a touched memory is reported and logged."""

from __future__ import annotations

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
