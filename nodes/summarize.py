"""summarize: draft a summary of the thread's overflow (`summaries.draft_summary`)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context, current_thread_id
from graph.prompts import SUMMARIZE_PROMPT
from graph.state import State, draining
from memory_graph_agent.services import Services
from memory_graph_agent.summaries import draft_summary


async def summarize(state: State, runtime: Runtime[Context], *, services: Services) -> dict:
    """Summarize the oldest pending messages (≤ 100 words); raw text if the model fails."""
    draft, drained, events = await draft_summary(
        services, runtime.context, current_thread_id(), draining(state), SUMMARIZE_PROMPT
    )
    update: dict = {"summary": draft, "memory_events": events}
    if drained:  # this is the last batch of the drain: compression done
        update["compress"] = False
    return update
