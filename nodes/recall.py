"""recall: hybrid search over every memory tier, fused by reciprocal rank, within budget.

Channels, run concurrently after one query embedding:

- ``memory``: dense search over the user's summaries and reflections (pgvector);
- ``episode_dense``: dense search over the user's raw episodic turns (the messages that
  left the window, one vector each);
- ``episode_keyword``: full-text search over the same turns (Postgres ``tsvector``,
  any query word may match, BM25-like IDF weighting).

The lists are fused with RRF (`stores.fusion`), turns still in the thread's Redis
window (already in the prompt) are dropped, and the token budget is filled greedily in
fused order; a turn that a taken raw-text summary quotes verbatim is not shown twice.
The prompt then lists the kept items tier by tier (reflections, summaries, episodes),
each tier in fused order. Every item keeps its score parts (similarity, ranks, RRF).

Depth: the summaries/reflections channel returns ``recall_k`` items (as before); each
episode channel returns ``max(recall_k, 20, memory_token_budget // 60)``: raw turns are
short (~30 tokens), so the two episode channels together can fill the budget, and the
token budget, not ``recall_k``, decides how many turns reach the prompt.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.runtime import Runtime

from graph import metrics
from graph.context import Context
from graph.state import State
from graph.utils import current_thread_id, latest_human_text, render_memory
from stores.episodes import EpisodeHit
from stores.failsafe import POSTGRES_DOWN, REDIS_DOWN, outages
from stores.fusion import RRF_K, fill_budget, rrf
from stores.memories import Memory
from stores.services import Services, get_services

MIN_EPISODE_DEPTH = 20
TOKENS_PER_EPISODE_CANDIDATE = 60
"""One candidate per channel per 60 budget tokens: two channels of ~30-token turns."""
TIER_ORDER = {"reflection": 0, "summary": 1, "episode": 2}


def episode_depth(ctx: Context) -> int:
    """How many turns each episode channel returns."""
    return max(
        ctx.recall_k, MIN_EPISODE_DEPTH, ctx.memory_token_budget // TOKENS_PER_EPISODE_CANDIDATE
    )


def episode_item(hit: EpisodeHit) -> dict[str, Any]:
    """A recalled raw turn, rendered as ``- [episode <date>] Speaker: text``."""
    return {
        "id": f"{hit.thread_id}:{hit.message_id}",
        "kind": "episode",
        "text": hit.content,
        "thread_id": hit.thread_id,
        "created_at": hit.ts.isoformat(),
        "source_ids": [hit.message_id],
    }


async def _window_ids(services: Services, user_id: str, thread_id: str) -> set[str]:
    """Ids of the thread's window messages (already in the prompt); empty if Redis is down."""
    try:
        return {m.id for m in await services.window.window(user_id, thread_id)}
    except REDIS_DOWN as exc:  # recall still works, a turn may show twice
        outages.failed("redis", exc)
        return set()


async def _search(
    services: Services, ctx: Context, query: str, thread_id: str
) -> tuple[list[Memory], list[EpisodeHit], list[EpisodeHit], set[str]]:
    vector = await services.embeddings.aembed_query(query)
    depth = episode_depth(ctx)
    memories, dense, keyword, window = await asyncio.gather(
        services.memories.search(ctx.user_id, vector, ctx.recall_k),
        services.episodes.dense_search(ctx.user_id, vector, depth),
        services.episodes.keyword_search(ctx.user_id, query, depth),
        _window_ids(services, ctx.user_id, thread_id),
    )
    return memories, dense, keyword, window


def fuse(
    memories: list[Memory],
    dense: list[EpisodeHit],
    keyword: list[EpisodeHit],
    min_similarity: float,
) -> list[dict[str, Any]]:
    """RRF of the three channels; dense-only hits below ``min_similarity`` are dropped."""
    items: dict[str, dict[str, Any]] = {}
    for memory in memories:
        items[memory.id] = memory.as_dict()
    for hit in dense:
        item = items.setdefault(f"{hit.thread_id}:{hit.message_id}", episode_item(hit))
        item["similarity"] = round(hit.similarity, 4)
    for hit in keyword:
        item = items.setdefault(f"{hit.thread_id}:{hit.message_id}", episode_item(hit))
        item["keyword_score"] = round(hit.keyword_score or 0.0, 4)
    rankings = {
        "memory": [m.id for m in memories],
        "episode_dense": [f"{h.thread_id}:{h.message_id}" for h in dense],
        "episode_keyword": [f"{h.thread_id}:{h.message_id}" for h in keyword],
    }
    out = []
    for fused in rrf(rankings, RRF_K):
        item = items[fused.key]
        item.setdefault("similarity", None)
        item["dense_rank"] = fused.ranks.get("memory") or fused.ranks.get("episode_dense")
        item["keyword_rank"] = fused.ranks.get("episode_keyword")
        item["rrf"] = round(fused.score, 6)
        dense_only = item["keyword_rank"] is None
        if dense_only and (item["similarity"] or 0.0) < min_similarity:
            continue
        out.append(item)
    return out


async def recall(state: State, runtime: Runtime[Context]) -> dict:
    """Embed the latest user message once, search every tier, fuse, fill the budget."""
    ctx = runtime.context
    query = latest_human_text(state["messages"])
    thread_id = current_thread_id()
    services = await get_services(ctx.embedding_model)
    try:
        with metrics.observe_retrieval():
            memories, dense, keyword, window = await _search(services, ctx, query, thread_id)
        outages.ok("postgres")
    except POSTGRES_DOWN as exc:  # answer from profile + window alone
        outages.failed("postgres", exc)
        event = "recall: long-term memory unavailable, answering from profile and window"
        return {"recalled": [], "memory_events": [*state.get("memory_events", []), event]}
    candidates = fuse(memories, dense, keyword, ctx.min_similarity)
    for item in candidates:
        item["tokens"] = count_tokens_approximately([SystemMessage(render_memory(item))])
    kept, used = fill_budget(candidates, ctx.memory_token_budget, exclude=window)
    recalled = sorted((dict(item) for item in kept), key=lambda m: TIER_ORDER.get(m["kind"], 1))
    metrics.record_similarities(recalled)
    touched = [m["id"] for m in recalled if m["kind"] != "episode"]
    try:
        await services.memories.touch(ctx.user_id, touched)
    except POSTGRES_DOWN as exc:  # access statistics are best effort
        outages.failed("postgres", exc)
    kinds = [
        (k, sum(m["kind"] == k for m in recalled)) for k in ("episode", "summary", "reflection")
    ]
    parts = [f"{used} tokens"] + [f"{n} {k}" for k, n in kinds if n]
    event = f"recall: {len(recalled)} of {len(candidates)} hits kept ({', '.join(parts)})"
    return {"recalled": recalled, "memory_events": [*state.get("memory_events", []), event]}
