"""reflect: distil accumulated summaries into one long-term insight about the user."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from graph.context import Context
from graph.guards import invents_few_entities
from graph.models import load_chat_model
from graph.prompts import REFLECT_PROMPT
from graph.state import State
from graph.utils import invoke_text, limit_words
from stores.failsafe import POSTGRES_DOWN, outages
from stores.memories import Memory
from stores.services import get_services

log = logging.getLogger(__name__)

REFLECTION_IMPORTANCE = 0.9


async def reflect(state: State, runtime: Runtime[Context]) -> dict:
    """Write a reflection citing its summaries once ``reflect_after`` have accumulated."""
    ctx = runtime.context
    events = list(state.get("memory_events", []))
    services = await get_services(ctx.embedding_model)
    try:
        since = await services.memories.summaries_since_reflection(ctx.user_id)
    except POSTGRES_DOWN as exc:
        outages.failed("postgres", exc)
        events.append("reflect: skipped (Postgres unavailable)")
        return {"memory_events": events}
    if len(since) < ctx.reflect_after:
        events.append(f"reflect: skipped ({len(since)} < {ctx.reflect_after} summaries)")
        return {"summaries_since_reflection": len(since), "memory_events": events}
    listing = "\n".join(f"- ({m.created_at:%Y-%m-%d}) {m.text}" for m in since)
    try:
        text = await invoke_text(
            load_chat_model(ctx.model),
            REFLECT_PROMPT.format(summaries=listing),
            ctx.model_timeout_s,
        )
        if not invents_few_entities(text, listing):
            raise ValueError(f"reflection not grounded in the summaries: {text[:80]!r}")
    except Exception as exc:  # nothing is lost: the summaries stay counted for next time
        log.warning("reflection failed (%s: %s); will retry later", type(exc).__name__, exc)
        events.append("reflect: model failed, skipped")
        return {"summaries_since_reflection": len(since), "memory_events": events}
    reflection = Memory(
        user_id=ctx.user_id,
        kind="reflection",
        text=limit_words(text, 200),
        importance=REFLECTION_IMPORTANCE,
        source_ids=[m.id for m in since],
    )
    try:
        await services.memories.add(reflection)
    except POSTGRES_DOWN as exc:  # the summaries stay counted; reflect again later
        outages.failed("postgres", exc)
        events.append("reflect: storing failed, will retry")
        return {"summaries_since_reflection": len(since), "memory_events": events}
    events.append(f"reflect: reflection {reflection.id[:8]} from {len(since)} summaries")
    return {"summaries_since_reflection": 0, "memory_events": events}
