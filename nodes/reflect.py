"""reflect: distil summaries into one insight (rules: `memory_graph_agent.formation.reflection`)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.prompts import REFLECT_PROMPT
from graph.state import State
from memory_graph_agent.formation.reflection import reflect_if_due
from memory_graph_agent.prompting.rendering import notices
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


async def reflect(
    state: State, runtime: Runtime[Context], *, services: Services, settings: Settings
) -> dict:
    """Write a reflection citing its summaries once one is due; propose profile facts."""
    out = await reflect_if_due(services, settings, runtime.context, REFLECT_PROMPT)
    return {
        "summaries_since_reflection": out.since,
        "importance_since_reflection": out.importance,
        "memory_decisions": out.decisions,
        "memory_events": notices("reflect") + out.events,
    }
