"""Evidence recall, and the raw-turn baseline all three benchmarks share: dense + BM25, RRF."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from bench.locomo_data import CATEGORIES, SCORED_CATEGORIES
from bench.seeding import embed_batched
from memory_graph_agent.prompting.rendering import text_tokens

RRF_K = 60
BM25_K1, BM25_B = 1.5, 0.75
Shown = tuple[list[str], int]
"""What a method puts in the context: the turn ids, best ranked first, and their tokens."""
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves s t don ll ve re m d""".split()
)


def evidence_recall(evidence: Sequence[str], found: Collection[str]) -> float:
    """Fraction of the evidence ids present in ``found``."""
    if not evidence:
        raise ValueError("a question without evidence cannot be scored")
    return sum(e in found for e in evidence) / len(evidence)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def aggregate(records: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """Per method: mean evidence recall per category, overall over 1-4, mean tokens."""
    out: dict[str, Any] = {}
    for method in methods:
        by_cat: dict[int, list[float]] = defaultdict(list)
        for r in records:
            by_cat[r["category"]].append(r["recall"][method])
        scored = [r for r in records if r["category"] in SCORED_CATEGORIES]
        out[method] = {
            "by_category": {str(c): _mean(by_cat.get(c, [])) for c in CATEGORIES},
            "overall_1_4": _mean([x for c in SCORED_CATEGORIES for x in by_cat.get(c, [])]),
            "tokens_mean": _mean([r["tokens"][method] for r in scored]),
            "questions": {str(c): len(by_cat.get(c, [])) for c in CATEGORIES},
        }
    return out


def means(rows: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Each measure's mean per group and ``overall``, of ``(group, {measure: value})`` rows."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for group, values in rows:
        for measure, value in values.items():
            for g in (group, "overall"):
                by[measure][g].append(float(value))
    return {m: {g: round(float(np.mean(v)), 4) for g, v in gs.items()} for m, gs in by.items()}


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased words, stopwords removed, suffixes ing/ed/es/s stripped."""
    out = []
    for word in re.findall(r"\w+", text.lower()):
        if word in STOPWORDS:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.append(word)
    return out


class BM25:
    """Okapi BM25 (Lucene idf) over a small corpus, pure Python."""

    def __init__(self, docs: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> None:
        tokenized = [bm25_tokens(d) for d in docs]
        self.k1, self.b = k1, b
        self.lengths = [len(t) for t in tokenized]
        self.avg_length = (sum(self.lengths) / len(tokenized)) if tokenized else 0.0
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, tokens in enumerate(tokenized):
            for term, tf in Counter(tokens).items():
                self.postings[term].append((i, tf))
        n = len(tokenized)
        self.idf = {
            t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()
        }

    def scores(self, query: str) -> list[float]:
        """BM25 score of every document for ``query``."""
        out = [0.0] * len(self.lengths)
        for term in set(bm25_tokens(query)):
            for i, tf in self.postings.get(term, ()):
                norm = 1 - self.b + self.b * self.lengths[i] / (self.avg_length or 1.0)
                out[i] += self.idf[term] * tf * (self.k1 + 1) / (tf + self.k1 * norm)
        return out


def ranking(scores: Sequence[float]) -> list[int]:
    """Indices by descending score; ties keep corpus order."""
    return sorted(range(len(scores)), key=lambda i: -scores[i])


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion of several rankings of the same items."""
    fused: dict[int, float] = defaultdict(float)
    for order in rankings:
        for rank, item in enumerate(order, start=1):
            fused[item] += 1.0 / (k + rank)
    return sorted(fused, key=lambda i: -fused[i])


def fill_budget(order: Sequence[int], costs: Sequence[int], budget: int) -> list[int]:
    """Items taken in rank order while they fit; one that does not fit is skipped."""
    taken, used = [], 0
    for i in order:
        if used + costs[i] <= budget:
            taken.append(i)
            used += costs[i]
    return taken


def message_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens of window messages."""
    return count_tokens_approximately(list(messages)) if messages else 0


@dataclass
class RawIndex:
    """One user's raw turns, embedded and BM25-indexed, for the hybrid baseline."""

    ids: list[str]
    costs: list[int]
    vectors: np.ndarray
    bm25: BM25

    def shown(self, order: Sequence[int], budget: int) -> Shown:
        """The turns of ``order`` that fit in ``budget``, and their tokens."""
        taken = fill_budget(order, self.costs, budget)
        return [self.ids[i] for i in taken], sum(self.costs[i] for i in taken)

    def orders(self, question: str, vector: np.ndarray) -> tuple[list[int], list[int]]:
        """The turns ranked by the dense and the BM25 score."""
        return ranking((self.vectors @ vector).tolist()), ranking(self.bm25.scores(question))

    def hybrid(self, question: str, vector: np.ndarray, budget: int) -> Shown:
        """The RRF of both rankings, budget-filled."""
        return self.shown(rrf(self.orders(question, vector)), budget)


async def raw_index(embeddings: Any, ids: list[str], lines: list[str]) -> RawIndex:
    """Embed the turns' lines and index their words."""
    vectors = await embed_batched(embeddings, lines)
    return RawIndex(ids, [text_tokens(x) for x in lines], vectors, BM25(lines))
