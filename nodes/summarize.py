"""summarize: draft a summary of the thread's overflow (`summaries.draft_summary`).

In a memory run (``context.memory_of``) that finds the batch leased by another worker
(or its retries backing off), it asks the scheduler for another run when the batch can
be claimed again, so a dead worker's batch needs no new turn to be summarized.
"""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from graph.context import Context, MemoryScheduler, current_thread_id
from graph.prompts import SUMMARIZE_PROMPT
from graph.state import State, draining
from memory_graph_agent.core.records import event
from memory_graph_agent.formation.summaries import draft_summary
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings

log = logging.getLogger(__name__)


async def summarize(
    state: State,
    runtime: Runtime[Context],
    *,
    services: Services,
    settings: Settings,
    scheduler: MemoryScheduler | None = None,
) -> dict:
    """Summarize the oldest pending messages (≤ 100 words); raw text if the model fails."""
    ctx, thread, drain = runtime.context, current_thread_id(), draining(state)
    drafted = await draft_summary(services, settings, ctx, thread, drain, SUMMARIZE_PROMPT)
    events = list(drafted.events)
    if drafted.retry_in_s is not None and ctx.memory_of and scheduler is not None:
        try:
            await scheduler(ctx, thread, drain, after_s=drafted.retry_in_s)
        except Exception as exc:  # noqa: BLE001 - the batch waits for the next turn's run
            log.warning("could not schedule a later memory run of %s: %r", thread, exc)
        else:
            text = f"summarize: another memory run in {drafted.retry_in_s:.1f} s"
            events.append(event("summarize", "retry_scheduled", text))
    update: dict = {"summary": drafted.draft, "memory_events": events}
    if drafted.drained:  # this is the last batch of the drain: compression done
        update["compress"] = False
    return update
