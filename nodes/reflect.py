"""reflect: distil accumulated summaries into one long-term insight about the user.

Due (Generative-Agents style) when the summed importance of the active summaries since
the last reflection reaches ``reflect_importance_threshold``, or after ``reflect_after``
summaries, whichever comes first. The model answers under the `ReflectionOut` schema:
an insight, which must not invent entities the summaries lack, and at most three stable
facts, which go through the same grounding and profile path as consolidate's, citing
the reflection.
"""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from graph.context import Context
from graph.prompts import REFLECT_PROMPT
from graph.state import State
from memory_graph_agent.consolidation import expires_at, record_fact_changes
from memory_graph_agent.facts import facts_grounded
from memory_graph_agent.guards import invents_few_entities
from memory_graph_agent.models import load_chat_model
from memory_graph_agent.schemas import ReflectionOut
from memory_graph_agent.services import get_services
from memory_graph_agent.storage.decisions import Decision
from memory_graph_agent.storage.failsafe import POSTGRES_DOWN, REDIS_DOWN, outages
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.profile import Fact
from memory_graph_agent.utils import defang, events_so_far, invoke_structured, limit_words

log = logging.getLogger(__name__)

REFLECTION_IMPORTANCE = 0.9


def reflection_due(count: int, importance: float, ctx: Context) -> bool:
    """Whether ``count`` summaries of summed ``importance`` call for a reflection."""
    return count >= ctx.reflect_after or (
        count > 0 and importance >= ctx.reflect_importance_threshold
    )


async def reflect(state: State, runtime: Runtime[Context]) -> dict:
    """Write a reflection citing its summaries once one is due; propose profile facts."""
    ctx = runtime.context
    events = events_so_far(state)
    services = await get_services(ctx.embedding_model)
    try:
        since = await services.memories.summaries_since_reflection(ctx.user_id)
    except POSTGRES_DOWN as exc:
        outages.failed("postgres", exc)
        events.append("reflect: skipped (Postgres unavailable)")
        return {"memory_events": events}
    importance = round(sum(m.importance for m in since), 3)
    progress = {"summaries_since_reflection": len(since), "importance_since_reflection": importance}
    if not reflection_due(len(since), importance, ctx):
        events.append(
            f"reflect: skipped ({len(since)} < {ctx.reflect_after} summaries, importance "
            f"{importance:.2f} < {ctx.reflect_importance_threshold})"
        )
        return {**progress, "memory_events": events}
    listing = "\n".join(f"- ({m.created_at:%Y-%m-%d}) {m.text}" for m in since)
    out = await invoke_structured(
        load_chat_model(ctx.model),
        ReflectionOut,
        REFLECT_PROMPT.format(summaries=defang(listing)),
        ctx.model_timeout_s,
    )
    if out is None or not out.insight.strip() or not invents_few_entities(out.insight, listing):
        # nothing is lost: the summaries stay counted for next time
        reason = "no answer" if out is None else f"not grounded: {out.insight[:80]!r}"
        log.warning("reflection failed (%s); will retry later", reason)
        events.append("reflect: model failed, skipped")
        return {**progress, "memory_events": events}
    reflection = Memory(
        user_id=ctx.user_id,
        kind="reflection",
        text=limit_words(out.insight, 200),
        importance=REFLECTION_IMPORTANCE,
        source_ids=[m.id for m in since],
        expires_at=expires_at(ctx, REFLECTION_IMPORTANCE),
    )
    decisions = list(state.get("memory_decisions") or [])
    try:
        await services.memories.add(reflection)
        decision, _ = await services.decisions.record(
            Decision(
                user_id=ctx.user_id,
                item_kind="reflection",
                item_id=reflection.id,
                action="created",
                detail={"sources": len(since), "importance_sum": importance},
            )
        )
        decisions.append(decision.as_dict())
    except POSTGRES_DOWN as exc:  # the summaries stay counted; reflect again later
        outages.failed("postgres", exc)
        events.append("reflect: storing failed, will retry")
        return {**progress, "memory_events": events}
    events.append(f"reflect: reflection {reflection.id[:8]} from {len(since)} summaries")
    proposed = [
        Fact(f.key, f.value, f.importance, source_ids=[reflection.id])
        for f in out.facts
        if f.importance >= ctx.min_fact_importance
    ]
    facts = facts_grounded(proposed, listing)
    if proposed:
        try:
            # A reflection reads older summaries: it may add a key or confirm a value,
            # never replace what consolidation learned from the user's latest words.
            current = await services.profile.get(ctx.user_id)
            facts = [
                f
                for f in facts
                if f.key not in current
                or current[f.key]["value"].strip().lower() == f.value.strip().lower()
            ]
            changes = await services.profile.upsert(ctx.user_id, facts, ctx.ttl_days)
            decisions += await record_fact_changes(
                services, ctx.user_id, None, reflection.id, changes
            )
            written = [f"{c.key} {c.action}" for c in changes]
            events.append(
                f"reflect: {len(facts)}/{len(proposed)} proposed facts grounded: "
                f"{', '.join(written) or 'none'}"
            )
        except (*REDIS_DOWN, *POSTGRES_DOWN) as exc:  # the reflection is stored already
            outages.failed("redis" if isinstance(exc, REDIS_DOWN) else "postgres", exc)
            events.append("reflect: proposed facts skipped (service down)")
    return {
        "summaries_since_reflection": 0,
        "importance_since_reflection": 0.0,
        "memory_decisions": decisions,
        "memory_events": events,
    }
