"""Consolidation of a new summary with the user's similar memories (used by `consolidate`).

Below ``formation.merge_similarity`` the summary is simply created; otherwise the model picks
created / merged / updated / strengthened / discarded, and any invalid answer falls back
to created. The new row is always stored (nothing is deleted, only superseded), and the
decision is logged before it is applied, so a replay never bumps a target twice.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.prompting.guards import invents_few_entities, summary_is_faithful
from memory_graph_agent.prompting.llm import invoke_structured
from memory_graph_agent.prompting.rendering import defang
from memory_graph_agent.prompting.schemas import ConsolidationDecision
from memory_graph_agent.services.models import load_chat_model
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.decisions import Decision
from memory_graph_agent.storage.memories import Memory

log = logging.getLogger(__name__)

CANDIDATES = 3
STRENGTHEN_BUMP = 0.1


def expires_at(settings: Settings, importance: float, pinned: bool = False) -> datetime | None:
    """When a memory of this importance expires (``None``: never), by ``retention.ttl_days``."""
    days = settings.retention.ttl_days(importance, pinned)
    return None if days is None else datetime.now(UTC) + timedelta(days=days)


def _render_candidates(candidates: list[Memory]) -> str:
    return "\n".join(
        f"- id={m.id[:8]} ({m.created_at:%Y-%m-%d}, similarity {m.similarity or 0:.2f}) "
        f"{defang(m.text)}"
        for m in candidates
    )


def _resolve_target(target: str, candidates: list[Memory]) -> Memory | None:
    """The candidate the model named: by full id, id prefix (as shown) or 1-based index."""
    target = target.strip().removeprefix("id=").strip()
    if not target:
        return None
    for m in candidates:
        if m.id == target or (len(target) >= 8 and m.id.startswith(target)):
            return m
    if target.isdigit() and 1 <= int(target) <= len(candidates):
        return candidates[int(target) - 1]
    return None


def _created(memory: Memory, reason: str, **detail: Any) -> Decision:
    return Decision(
        user_id=memory.user_id,
        thread_id=memory.thread_id,
        item_kind=MemoryKind.SUMMARY,
        item_id=memory.id,
        action="created",
        detail={"reason": reason, **detail},
    )


async def decide(
    settings: Settings,
    ctx: RunContext,
    services: Services,
    memory: Memory,
    vector: list[float],
    prompt: str | None,
) -> Decision:
    """Compare ``memory`` with the user's nearest active summaries and decide (not applied).

    ``prompt=None`` (raw summary mode, which never calls the model) always creates.
    """
    if prompt is None:
        return _created(memory, "raw summary mode: no consolidation call")
    candidates = await services.memories.similar(
        memory.user_id,
        vector,
        CANDIDATES,
        min_similarity=settings.formation.merge_similarity,
        kind=MemoryKind.SUMMARY,
        exclude_ids=[memory.id],
    )
    if not candidates:
        return _created(
            memory, f"no memory with similarity >= {settings.formation.merge_similarity}"
        )
    seen = [{"id": m.id, "similarity": round(m.similarity or 0.0, 4)} for m in candidates]
    out = await invoke_structured(
        load_chat_model(ctx.model),
        ConsolidationDecision,
        prompt.format(new=defang(memory.text), existing=_render_candidates(candidates)),
        settings.limits.model_timeout_s,
        "consolidate",
    )
    if out is None:
        return _created(memory, "consolidation call failed", candidates=seen)
    if out.action == "created":
        return _created(memory, out.reason or "new information", candidates=seen)
    target = _resolve_target(out.target_id, candidates)
    if target is None:
        return _created(
            memory, f"model named no candidate ({out.target_id!r})", model_action=out.action
        )
    detail: dict[str, Any] = {
        "reason": out.reason,
        "candidates": seen,
        "target_importance": target.importance,
        "target_text": target.text,
    }
    if out.action == "merged":
        merged = (out.merged_text or "").strip()
        both = f"{memory.text}\n{target.text}"
        if not merged or not (
            summary_is_faithful(merged, both) and invents_few_entities(merged, both)
        ):
            return _created(
                memory, "merged text not faithful to both memories", model_action="merged"
            )
        detail["merged_text"] = merged
    return Decision(
        user_id=memory.user_id,
        thread_id=memory.thread_id,
        item_kind=MemoryKind.SUMMARY,
        item_id=memory.id,
        action=out.action,
        target_id=target.id,
        detail=detail,
    )


async def apply(
    settings: Settings,
    ctx: RunContext,
    services: Services,
    memory: Memory,
    vector: list[float],
    decision: Decision,
    fresh: bool,
) -> None:
    """Store ``memory`` as ``decision`` says; ``fresh=False`` (a replay) skips the bump.

    Every step is an idempotent write except the importance bump of ``strengthened``.
    """
    user, target = memory.user_id, decision.target_id
    target_importance = float(decision.detail.get("target_importance", 0.0))
    if decision.action in ("merged", "updated"):
        memory.importance = max(memory.importance, target_importance)
    memory.expires_at = expires_at(settings, memory.importance)
    if decision.action == "merged":
        memory.text = decision.detail["merged_text"]
        vector = None  # the merged text needs its own vector
    if decision.action in ("strengthened", "discarded") and target:
        memory.status, memory.superseded_by = "superseded", target
    await services.memories.add(memory, vector=vector)
    if decision.action in ("merged", "updated") and target:
        await services.memories.supersede(user, [target], memory.id)
    if decision.action == "strengthened" and target and fresh:
        bumped = min(1.0, target_importance + STRENGTHEN_BUMP)
        await services.memories.strengthen(
            user, target, STRENGTHEN_BUMP, expires_at=expires_at(settings, bumped)
        )


async def consolidate_memory(
    settings: Settings,
    ctx: RunContext,
    services: Services,
    memory: Memory,
    vector: list[float],
    prompt: str | None,
) -> Decision:
    """Decide (or reuse the recorded decision of a replay), record, then apply.

    ``prompt`` is the consolidation prompt; ``None`` never calls the model (creates).
    """
    decision = await services.decisions.get(memory.user_id, MemoryKind.SUMMARY, memory.id)
    fresh = False
    if decision is None:
        decision, fresh = await services.decisions.record(
            await decide(settings, ctx, services, memory, vector, prompt)
        )
    await apply(settings, ctx, services, memory, vector, decision, fresh)
    return decision


async def record_fact_changes(
    services: Services, user_id: str, thread_id: str | None, source_id: str, changes: list
) -> list[dict[str, Any]]:
    """Log the profile-fact changes (`storage.profile.FactChange`) caused by ``source_id``.

    One decision per fact key and source, so a replay does not log twice. Returns the
    decisions as dicts (for the ``memory_decisions`` state key).
    """
    out = []
    for change in changes:
        decision, _ = await services.decisions.record(
            Decision(
                user_id=user_id,
                thread_id=thread_id,
                item_kind=MemoryKind.FACT,
                item_id=f"{source_id}:{change.key}",
                action=change.action,
                target_id=change.key,
                detail={
                    "old_value": change.old_value,
                    "new_value": change.new_value,
                    "importance": change.importance,
                    "source_id": source_id,
                },
            )
        )
        out.append(decision.as_dict())
    return out
