"""The conversation in progress and recall: who fills a turn's budget first, per turn.

A turn's recall takes what scores best; a question about the conversation itself ("what
did I ask first?", "recap what we said") finds little that way, and older turns of the
same thread reach the prompt only if they rank. So the thread's own older turns
(`EpisodeLog.recent`) are offered too, newest first, each whole: one that does not fit is
skipped for an older one that does. Each turn decides which comes first (`leads`): the
conversation when nothing remembered matches the message well, else recall; the other
fills what the first leaves. Nothing is shown twice: a turn on screen,
recalled already, or quoted word for word by a recalled raw summary is passed over
(`ranking.fill_budget`). The turns are shown like recalled turns, in the order said, and
carry ``via: "conversation"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.storage.episodes import EpisodeHit

CHARS_PER_TOKEN = 4
"""ASCII's rate (`core.tokens`); other scripts cost more tokens per character."""


def conversation_chars(budget: int) -> int:
    """How much of the thread's newest text a ``budget`` of tokens may need.

    The window and what recall shows of the thread may take the whole budget, the turns
    still to fill it come before them: twice the budget's characters.
    """
    return 2 * CHARS_PER_TOKEN * max(0, budget)


def leads(items: Sequence[Mapping[str, Any]], floor: float) -> bool:
    """Whether the conversation in progress fills the budget before recall's ``items``.

    Decided per turn from what the searches found: when nothing they found (a summary, a
    reflection, a turn of any thread off screen) is at least ``floor`` alike to the
    message, memory has no good answer, and the message is most likely about the
    conversation being held. ``floor`` 0: never.
    """
    return floor > 0 and all(float(m.get("similarity") or 0.0) < floor for m in items)


SCORE_PARTS = ("similarity", "keyword_score", "dense_rank", "keyword_rank", "rrf", "relevance")


def unscored(hit: EpisodeHit, via: str = "conversation") -> dict[str, Any]:
    """A turn no search found, as a recalled turn with empty score parts, taken ``via``."""
    return {**episode_item(hit), **dict.fromkeys(SCORE_PARTS), "via": via}


def conversation_items(
    turns: Sequence[EpisodeHit], kept: Sequence[Mapping[str, Any]] = (), via: str = "conversation"
) -> list[dict[str, Any]]:
    """The thread's ``turns`` (newest first) as recalled turns, those ``kept`` left out.

    Each carries ``via`` (``"conversation"``; ``"position"`` for the turns a question
    points at, `recall.positions`) and no score: the fill takes them in this order,
    before or after recall's hits (`leads`), while they fit (`ranking.fill_budget`).
    """
    taken = {str(item.get("id")) for item in kept}
    items = []
    for hit in turns:
        if f"{hit.thread_id}:{hit.message_id}" not in taken:
            items.append({**unscored(hit, via), "recency": None, "score": None})
    return items
