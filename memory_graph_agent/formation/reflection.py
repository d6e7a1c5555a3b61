"""Reflection: distil accumulated summaries into one long-term insight about the user.

Due when the summed importance since the last reflection reaches a threshold, or after
``reflect_after`` summaries. Its facts are grounded like consolidation's; a failed
reflection loses nothing. Its prompt is bounded (`select_for_reflection`), so the
summaries that pile up after a failure never make it too large to succeed again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.core.records import MemoryEvent, event
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.core.tokens import text_tokens
from memory_graph_agent.formation.consolidation import expires_at, record_fact_changes
from memory_graph_agent.profile.facts import facts_grounded
from memory_graph_agent.prompting.budgets import context_tokens, cut_text, trigger_budget
from memory_graph_agent.prompting.guards import invents_few_entities
from memory_graph_agent.prompting.llm import invoke_structured
from memory_graph_agent.prompting.rendering import defang, limit_words
from memory_graph_agent.prompting.schemas import ReflectionOut
from memory_graph_agent.services.models import load_chat_model
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.decisions import Decision
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.storage.profile import Fact

log = logging.getLogger(__name__)

REFLECTION_IMPORTANCE = 0.9
ITEM_TOKENS = 300
"""A summary is shown to reflection cut to this (a raw-text fallback is a whole transcript)."""


def select_for_reflection(since: list[Memory], budget: int) -> tuple[list[Memory], str]:
    """The summaries a reflection reads, and their listing, within ``budget`` tokens.

    Each is cut to `ITEM_TOKENS`; the most important go first (then the newest), as many
    as fit; they are listed oldest first. The others stay stored and recallable; the
    reflection cites only what it read.
    """
    lines: dict[str, str] = {}
    used = 0
    for m in sorted(since, key=lambda m: (m.importance, m.created_at), reverse=True):
        line = f"- ({m.created_at:%Y-%m-%d}) {cut_text(m.text, ITEM_TOKENS)}"
        cost = text_tokens(line + "\n")
        if used + cost <= budget:
            lines[m.id] = line
            used += cost
    if since and not lines:  # a budget smaller than one summary: read the first, cut
        first = max(since, key=lambda m: (m.importance, m.created_at))
        lines[first.id] = f"- ({first.created_at:%Y-%m-%d}) {cut_text(first.text, budget)}"
    chosen = [m for m in since if m.id in lines]
    return chosen, "\n".join(lines[m.id] for m in chosen)


def reflection_due(count: int, importance: float, settings: Settings) -> bool:
    """Whether ``count`` summaries of summed ``importance`` call for a reflection."""
    return count >= settings.formation.reflect_after or (
        count > 0 and importance >= settings.formation.reflect_importance_threshold
    )


@dataclass
class Reflected:
    """What `reflect_if_due` did; ``since``/``importance`` are the progress left after it."""

    since: int = 0
    importance: float = 0.0
    decisions: list[dict[str, Any]] = field(default_factory=list)
    events: list[MemoryEvent] = field(default_factory=list)

    def note(self, kind: str, text: str) -> None:
        """Add an event of `reflect`."""
        self.events.append(event("reflect", kind, text))


async def reflect_if_due(
    services: Services, settings: Settings, ctx: RunContext, prompt: str
) -> Reflected:
    """Write a reflection citing its summaries once one is due; propose profile facts."""
    out = Reflected()
    user = ctx.user_id
    try:
        since = await services.memories.summaries_since_reflection(user)
    except StoreUnavailable:
        out.note("unavailable", "reflect: skipped (Postgres unavailable)")
        return out
    out.since, out.importance = len(since), round(sum(m.importance for m in since), 3)
    if not reflection_due(out.since, out.importance, settings):
        out.note(
            "not_due",
            f"reflect: skipped ({out.since} < {settings.formation.reflect_after} summaries, "
            f"importance "
            f"{out.importance:.2f} < {settings.formation.reflect_importance_threshold})",
        )
        return out
    budget = trigger_budget(context_tokens(settings, ctx.model), settings.window.trigger_ratio)
    read, listing = select_for_reflection(since, budget - text_tokens(prompt))
    answer = await invoke_structured(
        load_chat_model(ctx.model),
        ReflectionOut,
        prompt.format(summaries=defang(listing)),
        settings.limits.model_timeout_s,
        "reflect",
    )
    if (
        answer is None
        or not answer.insight.strip()
        or not invents_few_entities(answer.insight, listing)
    ):
        reason = "no answer" if answer is None else f"not grounded: {answer.insight[:80]!r}"
        log.warning("reflection failed (%s); will retry later", reason)
        out.note("model_failed", "reflect: model failed, skipped")
        return out
    reflection = Memory(
        user_id=user,
        kind=MemoryKind.REFLECTION,
        text=limit_words(answer.insight, 200),
        importance=REFLECTION_IMPORTANCE,
        source_ids=[m.id for m in read],
        expires_at=expires_at(settings, REFLECTION_IMPORTANCE),
    )
    try:
        await services.memories.add(reflection)
        decision, _ = await services.decisions.record(
            Decision(
                user_id=user,
                item_kind=MemoryKind.REFLECTION,
                item_id=reflection.id,
                action="created",
                detail={
                    "sources": len(read),
                    "since_last": len(since),
                    "importance_sum": out.importance,
                },
            )
        )
    except StoreUnavailable:  # the summaries stay counted; reflect again later
        out.note("storage_failed", "reflect: storing failed, will retry")
        return out
    out.decisions.append(decision.as_dict())
    out.note(
        "stored",
        f"reflect: reflection {reflection.id[:8]} from {len(read)} of {len(since)} summaries",
    )
    out.since, out.importance = 0, 0.0
    await _propose_facts(services, settings, ctx, answer, reflection.id, listing, out)
    return out


async def _propose_facts(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    answer: ReflectionOut,
    reflection_id: str,
    listing: str,
    out: Reflected,
) -> None:
    """Grounded facts of the reflection that add a key or confirm a value, never replace.

    A reflection reads older summaries: it must not overwrite what consolidation learned
    from the user's latest words.
    """
    proposed = [
        Fact(f.key, f.value, f.importance, source_ids=[reflection_id])
        for f in answer.facts
        if f.importance >= settings.formation.min_fact_importance
    ]
    if not proposed:
        return
    facts = facts_grounded(proposed, listing)
    try:
        current = await services.profile.get(ctx.user_id)
        facts = [
            f
            for f in facts
            if f.key not in current
            or current[f.key]["value"].strip().lower() == f.value.strip().lower()
        ]
        changes = await services.profile.upsert(ctx.user_id, facts, settings.retention.ttl_days)
        out.decisions += await record_fact_changes(
            services, ctx.user_id, None, reflection_id, changes
        )
    except StoreUnavailable:  # the reflection is stored already
        out.note("facts_skipped", "reflect: proposed facts skipped (service down)")
        return
    written = [f"{c.key} {c.action}" for c in changes]
    out.note(
        "facts",
        f"reflect: {len(facts)}/{len(proposed)} proposed facts grounded: "
        f"{', '.join(written) or 'none'}",
    )
