"""Retrieval that ranks like a memory: the search behind recall, `search_memory` and the CLI.

`retrieve` embeds the query once and runs every channel of `recall.channels.CHANNELS`
concurrently (dense search over summaries and reflections, dense and full-text search
over the raw turns that left the window, dense search over the turns of whomever the
query names), beside the read of what the window shows. The channels' rankings are fused
by reciprocal rank (`ranking.rrf`), then the memory graph's links add turns (`linking`):
a recalled summary's turns, and the turns just before and after the best turns (evidence
is often next to a hit). Every candidate is scored
like a memory (relevance, recency, importance) and the token budget is filled in score
order, skipping turns already in the window or quoted by a taken raw summary. The kept
items come back in prompt order: reflections, summaries, then turns by date, each day's
turns under one date line (`rendering.render_memories`). `recall.modes` picks it or
the search-free ``recall_mode='flat'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memory_graph_agent.core import metrics
from memory_graph_agent.core.kinds import TIER_ORDER, is_turn
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.prompting.rendering import episode_header, render_memory, text_tokens
from memory_graph_agent.prompting.screen import OnScreen, Screen
from memory_graph_agent.recall.channels import CHANNELS, RecallChannel
from memory_graph_agent.recall.channels.base import Found, Hit, Search, search_channels
from memory_graph_agent.recall.conversation import (
    conversation_chars,
    conversation_items,
    leads,
)
from memory_graph_agent.recall.entity_linking import link_entities, link_speakers, reach_entities
from memory_graph_agent.recall.linking import NEIGHBOUR_PREFETCH, linked_turns
from memory_graph_agent.recall.positions import Pointer, pointed
from memory_graph_agent.recall.ranking import RRF_K, fill_budget, memory_score, recency, rrf
from memory_graph_agent.recall.topics import link_topics
from memory_graph_agent.recall.updates import newest_first
from memory_graph_agent.recall.widening import idle, widen
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import RecallWeights, Settings
from memory_graph_agent.storage.episodes import EpisodeHit
from memory_graph_agent.storage.outages import StoreUnavailable

MIN_EPISODE_DEPTH = 20


@dataclass
class Retrieval:
    """What a retrieval kept for the prompt.

    Attributes:
        items: The kept items in prompt order, each with its text, provenance and score
            parts.
        candidates: How many candidates competed for the budget (after the similarity
            floor, before the window and budget).
        tokens: Tokens the kept items cost (``count_tokens_approximately`` of each line).
        budget: The token budget that was filled.
    """

    items: list[dict[str, Any]] = field(default_factory=list)
    candidates: int = 0
    tokens: int = 0
    budget: int = 0

    def describe(self) -> str:
        """One line for ``memory_events``: items of each kind, tokens."""
        kinds = [(k, sum(m["kind"] == k for m in self.items)) for k in TIER_ORDER]
        parts = [f"{self.tokens} tokens"] + [f"{n} {k}" for k, n in kinds if n]
        return f"{len(self.items)} of {self.candidates} hits kept ({', '.join(parts)})"


def episode_depth(settings: Settings, budget: int | None = None) -> int:
    """How many turns each episode channel returns."""
    budget = settings.window.memory_token_budget if budget is None else budget
    return max(
        settings.recall.k, MIN_EPISODE_DEPTH, budget // max(1, settings.recall.candidate_tokens)
    )


def recall_search(settings: Settings, user_id: str, query: str, budget: int) -> Search:
    """The query every channel of a recall of ``query`` filling ``budget`` tokens searches."""
    around = NEIGHBOUR_PREFETCH if settings.recall.weights.neighbour_weight > 0 else 0
    return Search(settings, user_id, query, episode_depth(settings, budget), around)


def rankings(found: Found, channels: Sequence[RecallChannel] = CHANNELS) -> dict[str, list[Hit]]:
    """Each ranking's hits, best first, in the channels' order.

    A channel that joins another's ranking (`RecallChannel.ranking`) adds its hits to
    that list, which is then ordered by score (stable: the owner's hit first on a tie);
    a candidate both found is counted once.
    """
    lists: dict[str, list[Hit]] = {}
    shared: set[str] = set()
    for channel in channels:
        hits = found.channels[channel.name].hits
        if channel.ranking in lists:
            shared.add(channel.ranking)
        lists.setdefault(channel.ranking, []).extend(hits)
    for name in shared:
        unique = {hit.key: hit for hit in reversed(lists[name])}  # the first of a key wins
        lists[name] = sorted((h for h in lists[name] if unique[h.key] is h), key=lambda h: -h.score)
    return lists


def fuse(
    found: Found,
    min_similarity: float,
    k: int = RRF_K,
    channels: Sequence[RecallChannel] = CHANNELS,
) -> list[dict[str, Any]]:
    """RRF (constant ``k``) of the channels' rankings, best first.

    A candidate only similarity rankings found (`RecallChannel.floor`) is dropped below
    the similarity floor ``min_similarity``.
    """
    items: dict[str, dict[str, Any]] = {}
    for channel in channels:
        shown_as = channel.score_field
        for hit in found.channels[channel.name].hits:
            item = items.get(hit.key) or items.setdefault(hit.key, hit.item(hit.record))
            item[shown_as] = round(hit.score, 4)
    lists = rankings(found, channels)
    owners = {c.ranking: c for c in reversed(channels)}  # a ranking's first channel
    score_fields = list(dict.fromkeys(c.score_field for c in channels))
    by_field: dict[str, list[str]] = {}
    for name in lists:
        by_field.setdefault(owners[name].rank_field, []).append(name)
    rank_fields = list(by_field.items())
    floored = {name for name in lists if owners[name].floor}
    keys = {name: [h.key for h in hits] for name, hits in lists.items()}
    scores = {name: [round(h.score, 6) for h in hits] for name, hits in lists.items()}
    out = []
    for fused in rrf(keys, k, scores=scores):
        item, ranks = items[fused.key], fused.ranks
        for score_field in score_fields:
            item.setdefault(score_field, None)
        for rank_field, names in rank_fields:
            item[rank_field] = _first_rank(ranks, names)
        item["rrf"] = round(fused.score, 6)
        if floored.issuperset(ranks) and (item["similarity"] or 0.0) < min_similarity:
            continue
        out.append(item)
    return out


def _first_rank(ranks: dict[str, int], names: list[str]) -> int | None:
    for name in names:
        rank = ranks.get(name)
        if rank is not None:
            return rank
    return None


def score(
    items: list[dict[str, Any]], weights: RecallWeights, now: datetime
) -> list[dict[str, Any]]:
    """Add relevance, recency, importance and score to fused items; best score first.

    Ties keep the fused order (``sorted`` is stable).
    """
    best = max((item["rrf"] for item in items), default=0.0)
    half_life = weights.recency_half_life_days
    parts = (weights.weight_relevance, weights.weight_recency, weights.weight_importance)
    seen: dict[str | None, float] = {}  # turns of one sitting share their times
    for item in items:
        relevance = item["relevance"] = round(item["rrf"] / best, 6) if best > 0 else 0.0
        at = item.get("seen_at")
        fresh = seen.get(at)
        if fresh is None:
            fresh = seen[at] = round(recency(parse_time(at), now, half_life), 6)
        item["recency"] = fresh
        importance = item["importance"] = float(item.get("importance") or 0.0)
        item["score"] = round(memory_score(relevance, fresh, importance, parts), 6)
    return sorted(items, key=lambda m: -m["score"])


def with_tokens(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each item's prompt cost; a turn also names the date line its group pays once."""
    for item in items:
        item["tokens"] = text_tokens(render_memory(item))
        if is_turn(item["kind"]):
            item["group"] = episode_header(item)
            item["group_tokens"] = text_tokens(item["group"])
    return items


def parse_time(ts: str | None) -> datetime | None:
    """An ISO timestamp, or ``None``."""
    return None if not ts else datetime.fromisoformat(ts)


def prompt_order(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reflections, then summaries, each in the given order, then turns as they were said."""

    def key(m: dict[str, Any]) -> tuple[int, str]:
        tier = TIER_ORDER.get(m["kind"], 1)
        return (tier, str(m.get("created_at", ""))) if is_turn(m["kind"]) else (tier, "")

    return sorted((dict(m) for m in items), key=key)


async def window_ids(services: Services, user_id: str, thread_id: str) -> set[str] | None:
    """The ids the thread's Redis window holds; ``None`` if Redis is down."""
    try:
        return {m.id for m in await services.window.window(user_id, thread_id)}
    except StoreUnavailable:
        return None


async def _on_screen(
    services: Services, user_id: str, thread_id: str, budget: int, shown: set[str] | Screen | None
) -> OnScreen:
    """What is on screen: ``shown``, or read from the window (a `Screen`, or its ids)."""
    if isinstance(shown, set):
        return OnScreen(shown, budget)
    held = await window_ids(services, user_id, thread_id)
    if shown is None:  # recall still works without Redis, a turn may show twice
        return OnScreen(held or set(), budget)
    return shown.of(held)


async def _conversation(
    services: Services, user_id: str, thread_id: str, budget: int, shown: set[str] | Screen | None
) -> list[EpisodeHit]:
    """A turn's thread, newest first, as much as ``budget`` could show (`recall.conversation`).

    Only a turn's recall (``shown`` is its `Screen`) fills its budget from its thread.
    """
    if not isinstance(shown, Screen):
        return []
    return await services.episodes.recent(user_id, thread_id, conversation_chars(budget))


async def _pointed(
    services: Services, user_id: str, thread_id: str, pointer: Pointer
) -> list[EpisodeHit]:
    """The thread's turns at the places the question names (`recall.positions`), if any."""
    if not pointer:
        return []
    return await services.episodes.asked(
        user_id, thread_id, pointer.from_start, pointer.back, pointer.every
    )


async def record_access(services: Services, user_id: str, items: list[dict[str, Any]]) -> None:
    """Mark recalled summaries/reflections accessed (best effort: statistics only).

    The ``recall`` node leaves this to ``trim_window``, after the reply: no write on the
    path before the model.
    """
    try:
        await services.memories.touch(user_id, [m["id"] for m in items if not is_turn(m["kind"])])
    except StoreUnavailable:
        pass


async def retrieve(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    query: str,
    thread_id: str,
    *,
    budget: int | None = None,
    touch: bool = True,
    vector: list[float] | Awaitable[list[float]] | None = None,
    shown: set[str] | Screen | None = None,
) -> Retrieval:
    """Search every long-term tier for ``query``, score, and fill the token budget.

    Args:
        services: The stores.
        settings: The deployment's: ``recall`` (k, min_similarity, weights) and
            (unless ``budget`` is given) ``window.memory_token_budget``.
        ctx: The run's context: whose memory is searched.
        query: The text to search for (the user's message, or the model's tool query).
        thread_id: The thread whose Redis window is already in the prompt: its turns
            are not returned again.
        budget: Token budget of the kept items; defaults to ``settings.window.memory_token_budget``.
        touch: Record the access of the kept summaries/reflections (recency signal);
            ``False`` for read-only views such as ``memory show --query``.
        vector: ``query``'s embedding, or the embedding still running, when the caller
            already has it (the one a turn's run started, `graph.prefetch`); else a new one.
        shown: Ids of the messages the prompt already shows; ``None`` reads the thread's
            Redis window for them; a `Screen` (a turn's state) reads it too and tells
            what of the state is on screen, and the budget they leave (`Screen.of`).

    Returns:
        The kept items in prompt order with their score parts.

    Raises:
        StoreUnavailable: Postgres is down; the caller decides how to degrade.
    """
    budget = settings.window.memory_token_budget if budget is None else max(0, budget)
    at_most = shown.of(set()).budget if isinstance(shown, Screen) else budget
    if at_most == 0:  # nothing could be shown: skip the embedding and the searches
        return Retrieval()
    with metrics.observe_retrieval():
        weights = settings.recall.weights
        search = recall_search(settings, ctx.user_id, query, budget)
        # only a turn's recall (a `Screen`) knows the conversation a question points into
        pointer = pointed(query) if isinstance(shown, Screen) else Pointer()
        found, on, recent, asked = await asyncio.gather(
            search_channels(  # the keyword search and the window overlap the embedding
                services,
                search,
                services.embeddings.aembed_query(query) if vector is None else vector,
                CHANNELS,
            ),
            _on_screen(services, ctx.user_id, thread_id, budget, shown),
            _conversation(services, ctx.user_id, thread_id, at_most, shown),
            _pointed(services, ctx.user_id, thread_id, pointer),
        )
    memories = found.memories
    hits = fuse(found, settings.recall.min_similarity, weights.recall_rrf_k)
    linked, reached = await asyncio.gather(  # two links, side by side
        linked_turns(services, settings, ctx, hits, memories, found),
        reach_entities(services, settings, ctx, hits, query),
    )
    fused = link_topics(link_entities(linked, reached), query, weights.topic_weight)
    fused = link_speakers(fused, query, weights.speaker_weight)
    scored = score(fused, weights, datetime.now(UTC))
    if settings.recall.newest_first:  # an update never ranks below what it replaced
        scored = newest_first(scored, query)
    candidates = with_tokens(scored)
    competed = len(candidates)
    said = with_tokens(conversation_items(recent))
    if said and leads(candidates, settings.recall.conversation_similarity):
        candidates, said = said, candidates  # the conversation first, recall in what it leaves
    if asked:  # the turns the question points at, before anything else, each once
        first = with_tokens(conversation_items(asked, via="position"))
        ids = {m["id"] for m in first}
        candidates = first + [m for m in candidates if m["id"] not in ids]
        said = [m for m in said if m["id"] not in ids]
    kept, used = fill_budget(candidates, on.budget, exclude=on.shown)
    if said:  # what the first leaves goes to the other, in its order
        taken = {m["id"] for m in kept}
        more = [m for m in said if m["id"] not in taken]
        kept, used = fill_budget([*kept, *more], on.budget, exclude=on.shown)
    if isinstance(shown, Screen) and idle(used, on.budget):  # still idle: widen the net
        more = await widen(services, settings, ctx, thread_id, query, kept, on.budget - used)
        kept, used = fill_budget([*kept, *with_tokens(more)], on.budget, exclude=on.shown)
    items = prompt_order(kept)
    metrics.record_similarities(items)
    if touch:
        await record_access(services, ctx.user_id, items)
    return Retrieval(items=items, candidates=competed, tokens=used, budget=on.budget)
