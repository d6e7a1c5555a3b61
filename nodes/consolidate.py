"""consolidate: store the summary durably, acknowledge its batch, extract facts.

Rules: `memory_graph_agent.formation.ingest.store_summary`. Only this run's `summarize` makes
drafts, so one naming another user or thread (a state edit, a forged checkpoint) is dropped.
"""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from graph.context import Context, current_thread_id
from graph.prompts import MEMORY_PROMPTS
from graph.state import State
from memory_graph_agent.core.records import event
from memory_graph_agent.formation.ingest import store_summary
from memory_graph_agent.formation.summaries import extend_thread_summary
from memory_graph_agent.prompting.rendering import notices
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings

log = logging.getLogger(__name__)


async def consolidate(
    state: State, runtime: Runtime[Context], *, services: Services, settings: Settings
) -> dict:
    """Upsert the summary under a deterministic id, ack its messages, update the profile."""
    ctx = runtime.context
    draft = state.get("summary")
    if not draft:
        return {"summary": None}
    events = notices("consolidate")
    if (draft.get("user_id"), draft.get("thread_id")) != (ctx.user_id, current_thread_id()):
        log.warning("dropping a summary that is not this run's (user/thread mismatch)")
        text = "consolidate: dropped a summary that is not this run's user/thread"
        events.append(event("consolidate", "dropped", text))
        return {"summary": None, "summary_stored": False, "memory_events": events}
    out = await store_summary(services, settings, ctx, draft, MEMORY_PROMPTS)
    update = {"summary": None, "summary_stored": out.stored, "memory_events": events + out.events}
    if not out.stored:
        return {**update, "memory_decisions": out.decisions}
    return {
        **update,
        "thread_summary": await extend_thread_summary(
            services, ctx.user_id, current_thread_id(), draft["text"], state.get("thread_summary")
        ),
        "summaries_since_reflection": out.summaries_since_reflection,
        "importance_since_reflection": out.importance_since_reflection,
        "memory_decisions": out.decisions,
        "pending_count": out.pending,
    }
