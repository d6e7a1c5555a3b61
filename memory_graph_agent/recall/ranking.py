"""Reciprocal-rank fusion, the memory score, and greedy filling of a token budget.

Pure functions (no I/O), used by `memory_graph_agent.recall.retrieval` to merge its
channels (dense search
over summaries/reflections, dense and full-text search over raw episodic turns), to
score each candidate like a memory (relevance + recency + importance, each in [0, 1])
and to fill the prompt's token budget in score order.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_graph_agent.core.kinds import is_turn

RRF_K = 60
"""The usual RRF constant (Cormack et al., 2009): damps the weight of the top ranks."""


@dataclass
class Fused:
    """One fused item: its key, RRF score and 1-based rank in each channel that had it."""

    key: Hashable
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


def rrf(
    rankings: Mapping[str, Sequence[Hashable]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
    scores: Mapping[str, Sequence[float | None]] | None = None,
) -> list[Fused]:
    """Fuse ranked lists: ``score(item) = sum over channels of weight / (k + rank)``.

    Args:
        rankings: Channel name -> item keys, best first. A key repeated within one
            channel counts once, at its best rank.
        k: The RRF constant.
        weights: Optional per-channel weight (default 1.0).
        scores: Optional channel name -> the channel's score of each key (aligned with
            ``rankings``). Keys with equal scores share a rank (competition ranking,
            1-2-2-4), so equally similar items are equally relevant.

    Returns:
        Items by descending score. Ties go to the better single rank, then to the
        channel listed first in ``rankings``, so the order is deterministic.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    fused: dict[Hashable, Fused] = {}
    first: dict[Hashable, tuple[int, int]] = {}
    for channel_index, (channel, keys) in enumerate(rankings.items()):
        weight = 1.0 if weights is None else float(weights.get(channel, 1.0))
        channel_scores = None if scores is None else scores.get(channel)
        if channel_scores is not None and len(channel_scores) != len(keys):
            raise ValueError(f"scores of channel {channel!r} do not match its keys")
        rank = seen = 0
        previous: float | None = None
        for position, key in enumerate(keys):
            item = fused.get(key)
            if item is None:
                item = fused[key] = Fused(key, 0.0)
            elif channel in item.ranks:  # duplicate within the channel
                continue
            seen += 1
            score = None if channel_scores is None else channel_scores[position]
            tied = score is not None and previous is not None and math.isclose(score, previous)
            rank = rank if tied else seen
            previous = score
            item.ranks[channel] = rank
            item.score += weight / (k + rank)
            if key not in first or (rank, channel_index) < first[key]:
                first[key] = (rank, channel_index)
    return sorted(fused.values(), key=lambda f: (-f.score, *first[f.key]))


def shown_verbatim(item: Mapping[str, Any], by: Mapping[str, Any]) -> bool:
    """Whether ``by`` already shows the raw turn ``item`` word for word.

    True when ``by`` is a memory built from the turn's message (provenance) that quotes
    its text verbatim: a raw-text or fallback summary. An LLM summary paraphrases its
    turns, so the turn itself still adds detail.
    """
    if not is_turn(item.get("kind")) or is_turn(by.get("kind")):
        return False
    sources = item.get("source_ids") or ()
    if len(sources) != 1 or sources[0] not in (by.get("source_ids") or ()):
        return False
    body = str(item.get("text", "")).partition(": ")[2] or str(item.get("text", ""))
    return body in str(by.get("text", ""))


def fill_budget(
    items: Iterable[Mapping[str, Any]],
    budget: int,
    *,
    dedupe: bool = True,
    exclude: Iterable[str] = (),
) -> tuple[list[Mapping[str, Any]], int]:
    """Take items in order while they fit the budget; one that does not fit is skipped.

    Each item carries ``tokens`` (its cost), ``source_ids`` (the message or memory ids
    it shows), ``kind`` and ``text``; an item with a ``group`` (the date line its day's
    turns share) also pays ``group_tokens`` when it is the first of its group. Items
    whose every source id is in ``exclude`` (already in the prompt's window) are
    skipped. With ``dedupe``, a raw turn that a taken item already shows verbatim
    (`shown_verbatim`) is skipped, and taking such an item gives back the tokens of the
    turns it shows that were taken before (their group lines stay paid).

    Returns:
        The taken items in order and the tokens they use.
    """
    excluded = set(exclude)
    taken: list[Mapping[str, Any]] = []
    # Only a memory (not a turn) can show a turn (`shown_verbatim`), so a turn is
    # checked against the taken memories alone, and only a memory looks for taken turns.
    # A turn shows one source id, which a memory showing it lists: the ids of the taken
    # memories and turns tell which pairs to check at all (most items have none).
    memories: list[Mapping[str, Any]] = []
    memory_sources: set[Any] = set()
    turn_sources: set[Any] = set()
    groups: set[Any] = set()
    used = 0
    for item in items:
        ids = item.get("source_ids") or ()
        sources = set(ids)
        if sources and sources <= excluded:
            continue
        turn = is_turn(item.get("kind"))
        if (
            dedupe
            and turn
            and len(ids) == 1
            and ids[0] in memory_sources
            and any(shown_verbatim(item, t) for t in memories)
        ):
            continue
        shown = (
            [t for t in taken if shown_verbatim(t, item)]
            if dedupe and not turn and not turn_sources.isdisjoint(sources)
            else []
        )
        freed = sum(int(t["tokens"]) for t in shown)
        group = item.get("group")
        cost = int(item["tokens"]) + (
            int(item.get("group_tokens") or 0) if group is not None and group not in groups else 0
        )
        if used - freed + cost > budget:
            continue
        if shown:
            taken = [t for t in taken if not any(t is s for s in shown)]
        taken.append(item)
        if not turn:
            memories.append(item)
            memory_sources.update(sources)
        elif len(ids) == 1:
            turn_sources.add(ids[0])
        groups.add(group)
        used += cost - freed
    return taken, used


def recency(seen_at: datetime | None, now: datetime, half_life_days: float) -> float:
    """Exponential decay in [0, 1]: 1 when seen just now, 0.5 one half-life ago.

    ``seen_at`` is when the item was last accessed (or created, if never accessed);
    unknown times count as 0 and future times as now.
    """
    if seen_at is None:
        return 0.0
    if half_life_days <= 0:
        raise ValueError(f"half_life_days must be > 0, got {half_life_days}")
    age_days = max(0.0, (now - seen_at).total_seconds() / 86_400)
    return 0.5 ** (age_days / half_life_days)


def memory_score(
    relevance: float,
    recency_: float,
    importance: float,
    weights: tuple[float, float, float],
) -> float:
    """Weighted mean of relevance, recency and importance (each clamped to [0, 1]).

    Dividing by the weights' sum keeps the score in [0, 1] and leaves the order as a
    plain weighted sum would; with every weight 0 the score is the relevance.
    """
    relevance = min(1.0, max(0.0, float(relevance)))
    recency_ = min(1.0, max(0.0, float(recency_)))
    importance = min(1.0, max(0.0, float(importance)))
    total = sum(weights)
    if total <= 0:
        return relevance
    w_relevance, w_recency, w_importance = weights
    # summed left to right from 0, as sum() would: the same float, bit for bit
    return (0 + w_relevance * relevance + w_recency * recency_ + w_importance * importance) / total
