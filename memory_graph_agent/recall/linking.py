"""The memory graph's links: turns reached from what recall found, not from the query.

A recalled summary links to the turns it was made from; a recalled turn links to the
turns said just before and after it in its thread. Multi-hop and follow-up evidence
often shares no word with the question but sits next to a hit or under a summary.
"""

from __future__ import annotations

from typing import Any

from memory_graph_agent.core.kinds import MemoryKind, is_turn
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.recall.channels.base import Found
from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.recall.ranking import shown_verbatim
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import RecallWeights, Settings
from memory_graph_agent.storage.episodes import EpisodeHit
from memory_graph_agent.storage.memories import Memory

NEIGHBOUR_SOURCES = 10
"""How many of the best turns bring their neighbours (20 or 30 recall the same on LoCoMo)."""
NEIGHBOUR_PREFETCH = NEIGHBOUR_SOURCES
"""Each turn search brings the neighbours of its 10 best turns in its own statement
(`recall.channels`). The 10 best fused turns were all among them for 89 of 100 questions at
10k memories (91 with 20, which cost the turn search 0.7 ms more); the rest are fetched."""


def best_turns(items: list[dict[str, Any]], n: int = NEIGHBOUR_SOURCES) -> list[tuple[str, str]]:
    """``(thread_id, message_id)`` of the ``n`` best-fused raw turns."""
    turns = [m for m in items if is_turn(m["kind"])][:n]
    return [(m["thread_id"], m["source_ids"][0]) for m in turns]


def summary_turns(memories: list[Memory]) -> list[tuple[str, str]]:
    """``(thread_id, message_id)`` of the turns the recalled summaries were made from."""
    keys = dict.fromkeys(
        (m.thread_id, sid)
        for m in memories
        if m.kind == MemoryKind.SUMMARY and m.thread_id
        for sid in m.source_ids
    )
    return list(keys)


def quotes_all(memory: Memory, turns: list[EpisodeHit]) -> bool:
    """Whether a summary is just the transcript of its turns (all of them fetched)."""
    if memory.kind != MemoryKind.SUMMARY or not memory.source_ids:
        return False
    sources = {(memory.thread_id, sid) for sid in memory.source_ids}
    quoted = [episode_item(h) for h in turns if (h.thread_id, h.message_id) in sources]
    shown = {"kind": memory.kind, "text": memory.text, "source_ids": memory.source_ids}
    return len(quoted) == len(sources) and all(shown_verbatim(t, shown) for t in quoted)


def _borrow(by_key: dict[str, dict[str, Any]], hit: EpisodeHit, rrf_score: float, via: str) -> None:
    """Give ``hit`` the RRF ``rrf_score`` if it is more than it has; add it if new."""
    key = f"{hit.thread_id}:{hit.message_id}"
    item = by_key.get(key)
    if item is None:
        item = by_key[key] = episode_item(hit)
        item.update(similarity=None, keyword_score=None, dense_rank=None, keyword_rank=None)
        item.update(rrf=0.0)
    if rrf_score > item["rrf"]:
        item.update(rrf=round(rrf_score, 6), via=via)


def link_turns(
    items: list[dict[str, Any]],
    memories: list[Memory],
    members: list[EpisodeHit],
    neighbours: list[tuple[tuple[str, str], EpisodeHit]],
    weights: RecallWeights,
) -> list[dict[str, Any]]:
    """Turns reached through the memory graph's links, added to the fused ``items``.

    A turn a recalled summary was made from gains ``summary_turn_weight / (k + rank)``
    of that summary; a summary that only quotes its turns word for word (raw mode, or a
    failed model call) gives way to them, so the prompt pays for the turns that rank,
    not for the whole transcript. A neighbour of one of the best turns, ``hops`` turns
    away, is worth ``neighbour_weight ** hops`` of that turn. Returns every item, best
    RRF first.
    """
    by_key = {item["id"]: dict(item) for item in items}
    rank = {}
    for r, m in enumerate(sorted(memories, key=lambda m: -(m.similarity or 0.0)), 1):
        for sid in m.source_ids if m.kind == MemoryKind.SUMMARY else ():
            rank.setdefault((m.thread_id, sid), r)
    for hit in members:
        r = rank.get((hit.thread_id, hit.message_id))
        if r is None or weights.summary_turn_weight <= 0:
            continue
        key = f"{hit.thread_id}:{hit.message_id}"
        base = by_key[key]["rrf"] if key in by_key else 0.0
        lent = weights.summary_turn_weight / (weights.recall_rrf_k + r)
        _borrow(by_key, hit, base + lent, "summary")
    for memory in memories:
        if memory.id in by_key and quotes_all(memory, members):
            del by_key[memory.id]  # a raw transcript: its turns are shown one by one
    for (thread, message), hit in neighbours:
        parent = by_key.get(f"{thread}:{message}")
        if parent is not None and weights.neighbour_weight > 0:
            lent = weights.neighbour_weight ** (hit.hops or 1) * parent["rrf"]
            _borrow(by_key, hit, lent, "neighbour")
    return sorted(by_key.values(), key=lambda m: -m["rrf"])


async def linked_turns(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    fused: list[dict[str, Any]],
    memories: list[Memory],
    found: Found | None = None,
) -> list[dict[str, Any]]:
    """The summaries' turns and the best turns' neighbours, ranked in.

    What the channels' searches brought with their results (``found``: the turns of every found
    summary, the neighbours of each turn search's best turns) is used as it is; what it
    did not bring is fetched in one round trip (everything, without ``found``).
    """
    members = summary_turns(memories)
    around = best_turns(fused) if settings.recall.weights.neighbour_weight > 0 else []
    if not members and not around:
        return fused
    known = found.neighbours if found else {}
    fetch_members = [] if found else members
    fetch_around = [key for key in around if key not in known]
    turns = [found.members[k] for k in members if k in found.members] if found else []
    fetched: dict[tuple[str, str], list[EpisodeHit]] = {}
    if fetch_members or fetch_around:
        reach = settings.recall.weights.neighbour_reach
        more, pairs = await services.episodes.linked(
            ctx.user_id, fetch_members, fetch_around, reach
        )
        turns += more  # empty unless the members were fetched here
        for key, hit in pairs:
            fetched.setdefault(key, []).append(hit)
    neighbours = [(key, hit) for key in around for hit in known.get(key, fetched.get(key, []))]
    return link_turns(fused, memories, turns, neighbours, settings.recall.weights)
