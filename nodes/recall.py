"""recall: fetch the user's relevant summaries and reflections from pgvector."""

from __future__ import annotations

from langchain_core.messages import SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.runtime import Runtime

from graph import metrics
from graph.context import Context
from graph.state import State
from graph.utils import latest_human_text, render_memory
from stores.failsafe import POSTGRES_DOWN, outages
from stores.services import get_services


async def recall(state: State, runtime: Runtime[Context]) -> dict:
    """Embed the latest user message once and keep the top-k memories within budget."""
    ctx = runtime.context
    query = latest_human_text(state["messages"])
    services = await get_services(ctx.embedding_model)
    try:
        with metrics.observe_retrieval():
            vector = await services.embeddings.aembed_query(query)
            hits = await services.memories.search(
                ctx.user_id, vector, ctx.recall_k, ctx.min_similarity
            )
        outages.ok("postgres")
    except POSTGRES_DOWN as exc:  # answer from profile + window alone
        outages.failed("postgres", exc)
        event = "recall: long-term memory unavailable, answering from profile and window"
        return {"recalled": [], "memory_events": [*state.get("memory_events", []), event]}
    recalled, used = [], 0
    for memory in hits:
        item = memory.as_dict()
        cost = count_tokens_approximately([SystemMessage(render_memory(item))])
        if used + cost > ctx.memory_token_budget:
            continue
        used += cost
        item["tokens"] = cost
        recalled.append(item)
    metrics.record_similarities(recalled)
    try:
        await services.memories.touch(ctx.user_id, [m["id"] for m in recalled])
    except POSTGRES_DOWN as exc:  # access statistics are best effort
        outages.failed("postgres", exc)
    event = f"recall: {len(recalled)} of {len(hits)} hits kept ({used} tokens)"
    return {"recalled": recalled, "memory_events": [*state.get("memory_events", []), event]}
