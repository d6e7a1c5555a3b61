"""Topic links between recalled turns: the best hits lend score to turns sharing their rare words.

Pseudo-relevance feedback inside the candidate pool, no extra search: the words of the
best turns that the query does not already carry (names, places, things) are what a
multi-hop question's other evidence tends to share with them. Rarity is measured in
the pool itself (a word every candidate has links nothing). Pure functions.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from typing import Any

from memory_graph_agent.core.entities import COMMON, MIN_WORD
from memory_graph_agent.core.kinds import is_turn

TOPIC_SEEDS = 3
"""How many of the best turns lend their words."""
_WORD = re.compile(r"[^\W\d_]+")
_TOPIC_WORD = re.compile(rf"[^\W\d_]{{{MIN_WORD},}}")
WORD_CACHE = 16384
"""Turn texts whose words are kept: a user's candidate turns recur from question to question."""


def topic_words(text: str) -> frozenset[str]:
    """The content words of a turn (after its ``Speaker:``), lower-cased, 4+ letters."""
    return _content_words(text.partition(": ")[2] or text)


@functools.lru_cache(maxsize=WORD_CACHE)
def _content_words(body: str) -> frozenset[str]:
    return frozenset(_TOPIC_WORD.findall(body.lower())).difference(COMMON)


def link_topics(
    items: list[dict[str, Any]], query: str, weight: float, seeds: int = TOPIC_SEEDS
) -> list[dict[str, Any]]:
    """Raise the RRF of turns that share rare words with the best turns; best RRF first.

    Each of the ``seeds`` best turns gives every other turn ``weight`` × its own RRF ×
    the share (by pool idf) of its new words (not in the query) that the turn also has.
    ``weight`` 0 returns the items as they are.
    """
    turns = [m for m in items if is_turn(m.get("kind"))]
    if weight <= 0 or len(turns) < 2:
        return items
    words = {m["id"]: topic_words(str(m.get("text", ""))) for m in turns}
    asked = topic_words(query) | {w for w in (m.lower() for m in _WORD.findall(query))}
    lenders = turns[:seeds]
    lendable = frozenset().union(*(words[m["id"]] for m in lenders)) - asked
    having: dict[str, list[str]] = defaultdict(list)  # lendable word -> the turns that have it
    for key, found in words.items():
        for w in found & lendable:
            having[w].append(key)
    n = len(turns)
    bonus: dict[str, float] = defaultdict(float)
    for seed in lenders:
        # in word order: the sums, and so ties in the ranking, never depend on hash order;
        # a word every candidate has (idf 0) lends nothing
        lent = {
            w: math.log(n / len(having[w]))
            for w in sorted(words[seed["id"]] - asked)
            if len(having[w]) < n
        }
        total, lender, lent_by = sum(lent.values()), weight * seed["rrf"], seed["id"]
        for w, share in lent.items():
            add = lender * share / total  # = weight * rrf * share / total, as floats too
            for key in having[w]:
                if key != lent_by:
                    bonus[key] += add
    out = []
    for m in items:
        if m.get("id") in bonus:
            m = {
                **m,
                "rrf": round(m["rrf"] + bonus[m["id"]], 6),
                "topic_bonus": round(bonus[m["id"]], 6),
            }
        out.append(m)
    return sorted(out, key=lambda m: -m["rrf"])
