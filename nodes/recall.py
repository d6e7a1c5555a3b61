"""recall: put the user's relevant long-term memories in the prompt, per ``recall_mode``.

- ``auto``: search every tier with the user's latest message (`memory_graph_agent.retrieval.retrieve`:
  hybrid search, scored by relevance + recency + importance, within the token budget);
- ``tool``: no search here, the model searches through the ``search_memory`` tool (which
  calls the same `retrieve`); a model that cannot call tools falls back to ``auto``;
- ``flat``: the user's hottest memories by importance, then recency, no search and no
  embedding (`memory_graph_agent.retrieval.hot_memories`).

Every recalled item keeps its score parts in ``recalled`` (visible in Studio).
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State
from memory_graph_agent.models import load_chat_model, supports_tool_calling
from memory_graph_agent.retrieval import hot_memories, retrieve
from memory_graph_agent.services import get_services
from memory_graph_agent.storage.failsafe import POSTGRES_DOWN, outages
from memory_graph_agent.utils import current_thread_id, latest_human_text


def effective_mode(ctx: Context) -> tuple[str, str | None]:
    """The mode recall runs in, and why it differs from ``ctx.recall_mode`` (if it does)."""
    if ctx.recall_mode == "tool" and not supports_tool_calling(load_chat_model(ctx.model)):
        return (
            "auto",
            f"recall: model {ctx.model!r} cannot call tools, tool mode falls back to auto",
        )
    return ctx.recall_mode, None


async def recall(state: State, runtime: Runtime[Context]) -> dict:
    """Fill ``recalled`` for this turn according to ``recall_mode``."""
    ctx = runtime.context
    events = list(state.get("memory_events", []))
    mode, note = effective_mode(ctx)
    if note:
        events.append(note)
    if mode == "tool":
        events.append("recall: tool mode, the model searches memory with search_memory")
        return {"recalled": [], "memory_events": events}
    services = await get_services(ctx.embedding_model)
    try:
        if mode == "flat":
            found = await hot_memories(services, ctx)
        else:
            query = latest_human_text(state["messages"])
            found = await retrieve(services, ctx, query, current_thread_id())
    except POSTGRES_DOWN as exc:  # answer from profile + window alone
        outages.failed("postgres", exc)
        events.append("recall: long-term memory unavailable, answering from profile and window")
        return {"recalled": [], "memory_events": events}
    prefix = "recall (flat): hottest " if mode == "flat" else "recall: "
    events.append(prefix + found.describe())
    return {"recalled": found.items, "memory_events": events}
