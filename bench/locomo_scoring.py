"""The metric of `bench.locomo` and the retrieval baselines the memory is compared with.

Evidence recall is the fraction of a question's evidence dialog ids present in a
method's context (`evidence_recall`), averaged per LoCoMo category and over categories
1-4 (`aggregate`). The baselines work on the raw turns of one conversation
(`RawIndex`): the last window, dense top-k (MiniLM), BM25, their RRF fusion, dense over
5-turn chunks and the full conversation, each filled greedily into the token budget
(`fill_budget`), with turns costed like the recall node costs a memory line.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from bench.locomo_data import CATEGORIES, SCORED_CATEGORIES, Conversation
from bench.seeding import embed_batched
from memory_graph_agent.prompting.rendering import text_tokens

CHUNK_TURNS = 5
RRF_K = 60
BM25_K1, BM25_B = 1.5, 0.75

METHODS = {
    "memory_in_budget": "memory pipeline, the headline: window + recall, all within the budget",
    "memory": "memory pipeline with the window on top of the budget: window + recall of "
    "the full budget",
    "window": "last window_size turns only",
    "dense": "dense top-k over raw turns (MiniLM, cosine), budget-filled",
    "bm25": "BM25 over raw turns, budget-filled",
    "hybrid": f"RRF (k={RRF_K}) of dense and BM25 over raw turns, budget-filled",
    "dense_chunks5": f"dense top-k over {CHUNK_TURNS}-turn chunks, budget-filled",
    "full": "the whole conversation",
}

# ---------------------------------------------------------------------------- metric


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
        tokens: list[int] = []
        for r in records:
            by_cat[r["category"]].append(r["recall"][method])
            if r["category"] in SCORED_CATEGORIES:
                tokens.append(r["tokens"][method])
        scored = [x for c in SCORED_CATEGORIES for x in by_cat.get(c, [])]
        out[method] = {
            "by_category": {str(c): _mean(by_cat.get(c, [])) for c in CATEGORIES},
            "overall_1_4": _mean(scored),
            "tokens_mean": _mean(tokens),
            "questions": {str(c): len(by_cat.get(c, [])) for c in CATEGORIES},
        }
    return out


# ------------------------------------------------------------------------- retrieval

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
_WORD = re.compile(r"\w+")
_SUFFIXES = ("ing", "ed", "es", "s")


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased words, stopwords removed, light suffix stemming."""
    out = []
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        for suffix in _SUFFIXES:
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


def line_tokens(text: str) -> int:
    """Tokens of one context line, counted like the recall node counts a memory line."""
    return text_tokens(text)


def message_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens of window messages."""
    return count_tokens_approximately(list(messages)) if messages else 0


@dataclass
class RawIndex:
    """One conversation's raw turns (and 5-turn chunks) for the baselines."""

    ids: list[str]
    costs: list[int]
    vectors: np.ndarray
    bm25: BM25
    chunk_ids: list[list[str]]
    chunk_costs: list[int]
    chunk_vectors: np.ndarray
    window_ids: set[str]
    window_tokens: int

    @property
    def full_tokens(self) -> int:
        """Tokens of the whole conversation."""
        return sum(self.costs)


async def build_raw_index(conv: Conversation, embeddings: Any, window_size: int) -> RawIndex:
    """Embed every turn and every chunk of ``CHUNK_TURNS`` consecutive turns."""
    lines = [t.line() for t in conv.turns]
    chunks = [
        list(range(i, min(i + CHUNK_TURNS, len(lines)))) for i in range(0, len(lines), CHUNK_TURNS)
    ]
    chunk_texts = ["\n".join(lines[j] for j in c) for c in chunks]
    last = conv.turns[-window_size:]
    return RawIndex(
        ids=[t.dia_id for t in conv.turns],
        costs=[line_tokens(x) for x in lines],
        vectors=await embed_batched(embeddings, lines),
        bm25=BM25(lines),
        chunk_ids=[[conv.turns[j].dia_id for j in c] for c in chunks],
        chunk_costs=[line_tokens(x) for x in chunk_texts],
        chunk_vectors=await embed_batched(embeddings, chunk_texts),
        window_ids={t.dia_id for t in last},
        window_tokens=message_tokens([t.message() for t in last]),
    )


def baseline_contexts(
    index: RawIndex, question: str, vector: np.ndarray, budget: int
) -> dict[str, tuple[set[str], int]]:
    """(dialog ids in context, context tokens) of each baseline for one question."""
    dense = ranking((index.vectors @ vector).tolist())
    sparse = ranking(index.bm25.scores(question))

    def turns(order: Sequence[int]) -> tuple[set[str], int]:
        taken = fill_budget(order, index.costs, budget)
        return {index.ids[i] for i in taken}, sum(index.costs[i] for i in taken)

    taken = fill_budget(ranking((index.chunk_vectors @ vector).tolist()), index.chunk_costs, budget)
    return {
        "window": (index.window_ids, index.window_tokens),
        "dense": turns(dense),
        "bm25": turns(sparse),
        "hybrid": turns(rrf([dense, sparse])),
        "dense_chunks5": (
            {d for i in taken for d in index.chunk_ids[i]},
            sum(index.chunk_costs[i] for i in taken),
        ),
        "full": (set(index.ids), index.full_tokens),
    }
