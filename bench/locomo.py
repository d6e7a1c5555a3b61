"""LoCoMo evidence recall of the memory pipeline, against retrieval baselines.

Each LoCoMo conversation is replayed turn by turn through the project's own memory
nodes (``trim_window → summarize → consolidate → reflect``, wired with the project's
routing functions; no ``respond``, no ``load_profile``/``recall`` during the replay).
Both speakers' turns enter the window as ``HumanMessage(content=text, name=speaker,
id=dia_id)`` stamped with their session's date; the summarizer runs in raw-text mode,
so no chat model is needed. Then every question goes through the project's ``recall``
node and is scored by **evidence recall**: the fraction of the question's evidence
dialog ids present in the context the agent would get, i.e. the live Redis window plus
the provenance (``source_ids``) of the recalled memories. Recall is hybrid: dense search
over the raw summaries, dense and full-text search over the raw turns (``episode``
items, provenance = the turn's dialog id, indexed by ``consolidate``), fused by RRF and
scored like a memory (relevance + recency + importance, `memory_graph_agent.retrieval.retrieve`: the
node calls it, so this measures the shipped ranking with the `Context` defaults, which
``WEIGHT_RELEVANCE``, ``WEIGHT_RECENCY``, ``WEIGHT_IMPORTANCE`` and
``RECENCY_HALF_LIFE_DAYS`` override). Questions run in file order and each recall
marks the summaries it returns as accessed, as in a live session: later questions see
them as recent (LoCoMo's own dates are from 2023, so nothing else is).

Baselines on the same turns, the same MiniLM embeddings and the same token budget:
the last ``window_size`` turns, dense top-k over raw turns, BM25, hybrid RRF
(dense + BM25), dense over 5-turn chunks, and the full conversation. Results are per
LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial)
and overall over categories 1-4.

    .venv/bin/python -m bench.locomo [--data PATH] [--out bench/out] [--limit N] [--budget 1800]

Writes ``<out>/locomo.json`` (numbers, data defects, config, machine) and
``<out>/locomo.png`` and prints a table. Choices, all recorded under ``config``:

* Tokens: ``count_tokens_approximately``. A retrieved turn or chunk costs what the
  recall node charges for a memory line (a ``SystemMessage`` of its rendered text,
  ``[<ts>] <speaker>: <text>``, the pipeline's transcript format); the window costs
  its messages. Budgets are filled greedily in rank order, skipping an item that does
  not fit (the recall node's rule).
* ``memory``: recall with the default ``recall_k`` (5: it bounds the summaries
  channel; the episode channels are sized from the budget) and
  ``memory_token_budget`` = budget, plus the window on top, so its context is larger
  than the budget; ``memory_in_budget`` gives recall only what the window leaves. Per
  question ``memory_in_budget`` runs first and its accesses are rolled back, so it sees
  the access history (recency) that ``memory`` left over the previous questions, not
  a second asking of the same question.
* The replay graph has no checkpointer: the Redis window is the source of truth, and
  ``trim_window`` only emits ``RemoveMessage`` for messages present in the state (the
  current turn's), so nothing accumulates across invocations.
* ``reflect_after`` and ``reflect_importance_threshold`` are 10**6 and the chat model
  is a registered guard that counts calls and raises: raw mode never calls it
  (``llm_calls`` in the JSON must be 0).
* Evidence ids are repaired when possible (``D:11:26`` → ``D11:26``, ``D30:05`` →
  ``D30:5``, ``'D8:6; D9:17'`` split); ids that cannot be parsed or point to no turn are
  dropped; questions left without evidence are not scored. Every case is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from bench._common import (
    EMBEDDING,
    connect_services,
    embed_batched,
    isolated_services,
    machine_info,
    pyplot,
    quiet_logs,
    write_json,
)
from graph.context import Context
from graph.routing import route_after_consolidate, route_after_summarize, route_after_trim
from graph.state import State
from memory_graph_agent.models import register_chat_model
from memory_graph_agent.storage.memories import _run
from memory_graph_agent.storage.window import StoredMessage
from nodes.consolidate import consolidate
from nodes.recall import recall
from nodes.reflect import reflect
from nodes.summarize import summarize
from nodes.trim_window import trim_window

DEFAULT_DATA = os.environ.get("LOCOMO_DATA", "/work/shared/data/locomo/locomo8.json")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED_CATEGORIES = (1, 2, 3, 4)
RECALL_K = 5
"""The `Context` default: the token budget, not ``recall_k``, limits hybrid recall."""
CHUNK_TURNS = 5
RRF_K = 60
BM25_K1, BM25_B = 1.5, 0.75
NO_REFLECTION = 10**6

METHODS = {
    "memory": "memory pipeline: window + hybrid recall (RRF of dense summaries, dense and "
    "full-text raw turns; recall fills the budget)",
    "memory_in_budget": "memory pipeline: window + recall within budget - window tokens",
    "window": "last window_size turns only",
    "dense": "dense top-k over raw turns (MiniLM, cosine), budget-filled",
    "bm25": "BM25 over raw turns, budget-filled",
    "hybrid": f"RRF (k={RRF_K}) of dense and BM25 over raw turns, budget-filled",
    "dense_chunks5": f"dense top-k over {CHUNK_TURNS}-turn chunks, budget-filled",
    "full": "the whole conversation",
}
REFERENCE = {
    "window": 0.02,
    "dense": 0.71,
    "bm25": 0.71,
    "hybrid": 0.79,
    "dense_chunks5": 0.64,
    "full": 1.0,
}
"""Evidence recall over categories 1-4 measured on locomo8.json (MiniLM, 1,800 tokens)."""
REFERENCE_FULL_TOKENS = 24_000

DEFECT_KINDS = {
    "joined": "one evidence entry holding several ids ('D8:6; D9:17'); split",
    "zero_padded": "leading zeros ('D30:05'); normalised to 'D30:5'",
    "malformed_repaired": "extra separator ('D:11:26'); repaired to 'D11:26'",
    "malformed_dropped": "not an id at all ('D'); dropped",
    "past_end": "turn number beyond the end of its session; dropped",
    "unknown_session": "session that has no turns; dropped",
    "missing_turn": "turn number inside a session but absent; dropped",
    "duplicate": "same id twice in one question; counted once",
    "empty_evidence": "question without evidence; not scored",
    "no_valid_evidence": "question whose evidence ids all were dropped; not scored",
    "bad_category": "category not in 1-5; not scored",
    "bad_turn_id": "turn whose dia_id is not D<session>:<turn>; kept as is",
    "unparsed_date": "session date that could not be parsed; its turns get no timestamp",
}

# ------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Turn:
    """One dialog turn, as it enters the memory window."""

    dia_id: str
    speaker: str
    text: str
    timestamp: str | None

    def message(self) -> HumanMessage:
        """The window message: tagged with the speaker and the session date."""
        extra = {"timestamp": self.timestamp} if self.timestamp else {}
        return HumanMessage(
            content=self.text, name=self.speaker, id=self.dia_id, additional_kwargs=extra
        )

    def line(self) -> str:
        """The transcript line the pipeline stores for this turn (``[ts] speaker: text``)."""
        return StoredMessage.from_message(self.message()).render()


@dataclass(frozen=True)
class Question:
    """One QA item; ``evidence`` holds the valid, canonical dialog ids only."""

    index: int
    text: str
    category: int
    evidence: tuple[str, ...]
    raw_evidence: tuple[str, ...]

    @property
    def scored(self) -> bool:
        """Whether the question enters the metric (known category, some evidence)."""
        return bool(self.evidence) and self.category in CATEGORIES


@dataclass
class Conversation:
    """One LoCoMo sample: turns in replay order and its questions."""

    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    sessions: int

    @property
    def user_id(self) -> str:
        """One memory user per conversation."""
        return safe_id(f"locomo-{self.sample_id}")

    @property
    def thread_id(self) -> str:
        """One thread per conversation."""
        return safe_id(f"replay-{self.sample_id}")


@dataclass
class Defects:
    """Counts of data defects, with a few examples of each kind."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)
    max_examples: int = 5

    def add(self, kind: str, where: str, value: Any) -> None:
        """Count one defect of ``kind`` found at ``where``."""
        if kind not in DEFECT_KINDS:
            raise ValueError(f"unknown defect kind {kind!r}")
        self.counts[kind] += 1
        if sum(e["kind"] == kind for e in self.examples) < self.max_examples:
            self.examples.append({"kind": kind, "where": where, "value": value})

    def as_dict(self) -> dict[str, Any]:
        """JSON view: every kind (zeros included), its meaning, examples."""
        return {
            "counts": {k: self.counts.get(k, 0) for k in DEFECT_KINDS},
            "meaning": DEFECT_KINDS,
            "examples": self.examples,
        }


def safe_id(text: str) -> str:
    """``text`` mapped to the project's id charset (1-64 of ``[A-Za-z0-9_.@-]``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.@-]+", "-", text).strip("_.@-")[:64]
    return cleaned or f"x{hashlib.sha1(text.encode()).hexdigest()[:12]}"


_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


def parse_session_date(text: str) -> str | None:
    """LoCoMo's ``'1:56 pm on 8 May, 2023'`` (or ISO) as ISO-8601, None if unparseable."""
    text = " ".join(str(text).split())
    for fmt in _DATE_FORMATS:
        with contextlib.suppress(ValueError):
            return datetime.strptime(text, fmt).isoformat()
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text).isoformat()
    return None


_ID = re.compile(r"D(\d+):(\d+)")
_REPAIRABLE_ID = re.compile(r"D\W*(\d+)\W+(\d+)")
_ID_SEPARATORS = re.compile(r"[;,\s]+")


def canonical_id(piece: str) -> tuple[str | None, str | None]:
    """(canonical ``D<s>:<t>`` or None, defect kind or None) for one evidence token."""
    if m := _ID.fullmatch(piece):
        fixed = f"D{int(m[1])}:{int(m[2])}"
        return fixed, None if fixed == piece else "zero_padded"
    if m := _REPAIRABLE_ID.fullmatch(piece):
        return f"D{int(m[1])}:{int(m[2])}", "malformed_repaired"
    return None, "malformed_dropped"


def _unknown_kind(dia_id: str, known_ids: Collection[str]) -> str:
    """Why a well-formed id matches no turn: past the session's end, or no such session."""
    session, turn = (int(x) for x in _ID.fullmatch(dia_id).groups())
    in_session = [int(m[2]) for k in known_ids if (m := _ID.fullmatch(k)) and int(m[1]) == session]
    if not in_session:
        return "unknown_session"
    return "past_end" if turn > max(in_session) else "missing_turn"


@dataclass(frozen=True)
class EvidenceParse:
    """The valid evidence ids of a question and the defects met on the way."""

    ids: tuple[str, ...]
    defects: tuple[tuple[str, str], ...]


def parse_evidence(raw: Sequence[Any] | None, known_ids: Collection[str]) -> EvidenceParse:
    """Split, repair and check a question's evidence list against the conversation's ids."""
    ids: list[str] = []
    defects: list[tuple[str, str]] = []
    for entry in raw or []:
        pieces = [p for p in _ID_SEPARATORS.split(str(entry).strip()) if p]
        if len(pieces) > 1:
            defects.append(("joined", str(entry)))
        for piece in pieces:
            dia_id, kind = canonical_id(piece)
            if kind:
                defects.append((kind, piece))
            if dia_id is None:
                continue
            if dia_id not in known_ids:
                defects.append((_unknown_kind(dia_id, known_ids), piece))
            elif dia_id in ids:
                defects.append(("duplicate", piece))
            else:
                ids.append(dia_id)
    if not raw:
        defects.append(("empty_evidence", ""))
    elif not ids:
        defects.append(("no_valid_evidence", json.dumps(list(raw))))
    return EvidenceParse(tuple(ids), tuple(defects))


def _session_numbers(conversation: dict[str, Any]) -> list[int]:
    return sorted(
        int(k.split("_")[1])
        for k, v in conversation.items()
        if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
    )


def load_turns(sample_id: str, conversation: dict[str, Any], defects: Defects) -> list[Turn]:
    """All turns in session order, stamped with their session date."""
    turns = []
    for n in _session_numbers(conversation):
        raw_date = conversation.get(f"session_{n}_date_time", "")
        stamp = parse_session_date(raw_date)
        if stamp is None:
            defects.add("unparsed_date", f"{sample_id} session_{n}", raw_date)
        for t in conversation[f"session_{n}"]:
            dia_id, kind = canonical_id(str(t["dia_id"]))
            if dia_id is None or kind:
                defects.add("bad_turn_id", sample_id, t["dia_id"])
            turn_id = dia_id if dia_id else str(t["dia_id"])
            turns.append(Turn(turn_id, str(t["speaker"]), str(t["text"]), stamp))
    return turns


def load_questions(
    sample_id: str, qa: list[dict[str, Any]], known_ids: Collection[str], defects: Defects
) -> list[Question]:
    """The sample's questions with parsed evidence; defects counted."""
    out = []
    for i, item in enumerate(qa):
        parsed = parse_evidence(item.get("evidence"), known_ids)
        for kind, value in parsed.defects:
            defects.add(kind, f"{sample_id} q{i}", value)
        category = int(item.get("category", 0))
        if category not in CATEGORIES:
            defects.add("bad_category", f"{sample_id} q{i}", item.get("category"))
        raw = tuple(str(e) for e in item.get("evidence") or [])
        out.append(Question(i, str(item["question"]), category, parsed.ids, raw))
    return out


def load_locomo(path: str | Path, limit: int | None = None) -> tuple[list[Conversation], Defects]:
    """Read a LoCoMo-format file (a list of samples); the first ``limit`` conversations."""
    samples = json.loads(Path(path).read_text())
    if isinstance(samples, dict):
        samples = [samples]
    defects = Defects()
    conversations = []
    for sample in samples[:limit] if limit else samples:
        sample_id = str(sample.get("sample_id") or f"sample-{len(conversations)}")
        conv = sample["conversation"]
        turns = load_turns(sample_id, conv, defects)
        known = {t.dia_id for t in turns}
        questions = load_questions(sample_id, sample.get("qa", []), known, defects)
        conversations.append(Conversation(sample_id, turns, questions, len(_session_numbers(conv))))
    return conversations, defects


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
    """Tokens of one context line, counted like the recall node counts a memory."""
    return count_tokens_approximately([SystemMessage(text)])


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


# -------------------------------------------------------------------- memory pipeline


class GuardChatModel(BaseChatModel):
    """The replay's chat model: counts calls and refuses them (raw mode needs none)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "locomo-guard"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        raise RuntimeError("the LoCoMo replay must not call a chat model")


def build_replay_graph() -> CompiledStateGraph:
    """trim_window → summarize → consolidate → reflect, routed like the agent's graph."""
    builder = StateGraph(State, context_schema=Context)
    for node in (trim_window, summarize, consolidate, reflect):
        builder.add_node(node)
    builder.add_edge(START, "trim_window")
    builder.add_conditional_edges("trim_window", route_after_trim)
    builder.add_conditional_edges("summarize", route_after_summarize)
    builder.add_conditional_edges("consolidate", route_after_consolidate)
    builder.add_edge("reflect", END)
    return builder.compile(name="locomo_replay")


def build_recall_graph() -> CompiledStateGraph:
    """The project's recall node alone."""
    builder = StateGraph(State, context_schema=Context)
    builder.add_node(recall)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", END)
    return builder.compile(name="locomo_recall")


def replay_context(conv: Conversation, model: str) -> Context:
    """Raw summaries, no reflection: the replay needs no model."""
    return Context(
        user_id=conv.user_id,
        model=model,
        embedding_model=EMBEDDING,
        summary_mode="raw",
        reflect_after=NO_REFLECTION,
        reflect_importance_threshold=float(NO_REFLECTION),
    )


def recall_context(conv: Conversation, model: str, budget: int, recall_k: int) -> Context:
    """The recall node's knobs for the questions (``min_similarity`` left at its default)."""
    return Context(
        user_id=conv.user_id,
        model=model,
        embedding_model=EMBEDDING,
        summary_mode="raw",
        reflect_after=NO_REFLECTION,
        reflect_importance_threshold=float(NO_REFLECTION),
        recall_k=recall_k,
        memory_token_budget=max(0, budget),
    )


def _thread_config(conv: Conversation) -> dict[str, Any]:
    return {"configurable": {"thread_id": conv.thread_id}}


async def check_fresh(services: Any, conv: Conversation) -> None:
    """Refuse to replay into a user that already has memory (results would be mixed)."""
    window = await services.window.window(conv.user_id, conv.thread_id)
    stored = await services.memories.count(conv.user_id)
    if window or stored:
        raise RuntimeError(
            f"user {conv.user_id!r} already has memory in this database/prefix; "
            "run against a fresh database (the default) or another key prefix"
        )


async def replay(
    graph: CompiledStateGraph, conv: Conversation, ctx: Context, advance: Callable[[], None]
) -> None:
    """Feed every turn, one graph invocation per turn."""
    config = _thread_config(conv)
    for turn in conv.turns:
        await graph.ainvoke({"messages": [turn.message()]}, config, context=ctx)
        advance()


@dataclass
class MemoryState:
    """What the pipeline holds for a conversation after the replay."""

    window_ids: set[str]
    window_tokens: int
    summaries: int
    summarized_ids: set[str]
    counts: dict[str, int]


async def memory_state(services: Any, conv: Conversation) -> MemoryState:
    """The live window and what long-term memory covers."""
    window = await services.window.window(conv.user_id, conv.thread_id)
    summaries = await services.memories.list(conv.user_id, kind="summary", limit=10**7)
    return MemoryState(
        window_ids={m.id for m in window},
        window_tokens=message_tokens([m.to_message() for m in window]),
        summaries=len(summaries),
        summarized_ids={sid for s in summaries for sid in s.source_ids},
        counts=await services.memories.count(conv.user_id),
    )


@contextlib.asynccontextmanager
async def accesses_rolled_back(services: Any, user_id: str) -> AsyncIterator[None]:
    """Restore the user's memory access statistics (recency signal) on exit."""
    table = services.memories.table
    rows = await _run(
        services.memories.engine,
        (
            f'SELECT langchain_id::text AS id, last_accessed_at, access_count FROM "{table}" '
            "WHERE user_id = :user_id",
            {"user_id": user_id},
        ),
    )
    try:
        yield
    finally:
        await _run(
            services.memories.engine,
            (
                f'UPDATE "{table}" t SET last_accessed_at = s.at, access_count = s.n '
                "FROM unnest(CAST(:ids AS uuid[]), CAST(:ats AS timestamptz[]), "
                "CAST(:ns AS integer[])) AS s(id, at, n) "
                "WHERE t.user_id = :user_id AND t.langchain_id = s.id",
                {
                    "user_id": user_id,
                    "ids": [r["id"] for r in rows],
                    "ats": [r["last_accessed_at"] for r in rows],
                    "ns": [r["access_count"] for r in rows],
                },
            ),
        )


async def recall_context_ids(
    graph: CompiledStateGraph, conv: Conversation, ctx: Context, question: Question
) -> tuple[set[str], int]:
    """Provenance ids and tokens of what the recall node returns for ``question``."""
    message = HumanMessage(question.text, id=f"q{question.index}")
    state = await graph.ainvoke({"messages": [message]}, _thread_config(conv), context=ctx)
    recalled = state.get("recalled") or []
    ids = {sid for item in recalled for sid in item.get("source_ids") or []}
    return ids, sum(int(item.get("tokens", 0)) for item in recalled)


# ------------------------------------------------------------------------------ runs


@dataclass
class Graphs:
    """The compiled graphs and the guard model of a run."""

    replay: CompiledStateGraph
    recall: CompiledStateGraph
    model_spec: str
    model: GuardChatModel


class LineProgress:
    """A plain progress report for logs (no terminal): one line per 10% of a task."""

    def __init__(self) -> None:
        self.tasks: dict[int, dict[str, Any]] = {}

    def add_task(self, description: str, total: int) -> int:
        """Register a task; returns its id."""
        self.tasks[len(self.tasks)] = {"description": description, "total": total, "done": 0}
        return len(self.tasks) - 1

    def update(self, task: int, description: str) -> None:
        """Rename a task (the conversation being processed)."""
        self.tasks[task]["description"] = description

    def advance(self, task: int) -> None:
        """One more step; print at every 10% of the total."""
        t = self.tasks[task]
        t["done"] += 1
        step = max(1, t["total"] // 10)
        if t["done"] % step == 0 or t["done"] == t["total"]:
            print(f"[locomo] {t['description']}: {t['done']}/{t['total']}", file=sys.stderr)


@contextlib.contextmanager
def progress_bar(enabled: bool) -> Iterator[Any]:
    """A rich progress bar on a terminal, `LineProgress` otherwise, silent if disabled."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    if enabled and not console.is_terminal:
        yield LineProgress()
        return
    with Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
    ) as bar:
        yield bar


async def evaluate_conversation(
    conv: Conversation,
    services: Any,
    graphs: Graphs,
    budget: int,
    recall_k: int,
    bar: Any,
    tasks: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Replay one conversation, then score every question for every method."""
    await check_fresh(services, conv)
    ctx = replay_context(conv, graphs.model_spec)
    bar.update(tasks["replay"], description=f"replay {conv.sample_id}")
    t0 = time.perf_counter()
    await replay(graphs.replay, conv, ctx, lambda: bar.advance(tasks["replay"]))
    replay_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    mem = await memory_state(services, conv)
    index = await build_raw_index(conv, services.embeddings, ctx.window_size)
    scored = [q for q in conv.questions if q.scored]
    qvecs = await embed_batched(services.embeddings, [q.text for q in scored])
    index_s = time.perf_counter() - t0

    full_ctx = recall_context(conv, graphs.model_spec, budget, recall_k)
    fit_ctx = recall_context(conv, graphs.model_spec, budget - mem.window_tokens, recall_k)
    bar.update(tasks["questions"], description=f"questions {conv.sample_id}")
    t0 = time.perf_counter()
    records = []
    for question, vector in zip(scored, qvecs, strict=True):
        contexts = baseline_contexts(index, question.text, vector, budget)
        # memory_in_budget is a probe of the same memory: its accesses are rolled back,
        # so both methods see the access history a live session of "memory" leaves
        async with accesses_rolled_back(services, conv.user_id):
            ids, tokens = await recall_context_ids(graphs.recall, conv, fit_ctx, question)
        contexts["memory_in_budget"] = (ids | mem.window_ids, tokens + mem.window_tokens)
        ids, tokens = await recall_context_ids(graphs.recall, conv, full_ctx, question)
        contexts["memory"] = (ids | mem.window_ids, tokens + mem.window_tokens)
        records.append(_record(conv, question, contexts))
        bar.advance(tasks["questions"])
    all_ids = {t.dia_id for t in conv.turns}
    info = {
        "sample_id": conv.sample_id,
        "user_id": conv.user_id,
        "thread_id": conv.thread_id,
        "sessions": conv.sessions,
        "turns": len(conv.turns),
        "questions": len(conv.questions),
        "scored_questions": len(scored),
        "window_size": ctx.window_size,
        "window_matches_last_turns": mem.window_ids == index.window_ids,
        "window_tokens": mem.window_tokens,
        "summaries": mem.summaries,
        "memories": mem.counts,
        "turns_outside_window_and_memory": len(all_ids - mem.window_ids - mem.summarized_ids),
        "full_tokens": index.full_tokens,
        "replay_s": round(replay_s, 2),
        "index_s": round(index_s, 2),
        "questions_s": round(time.perf_counter() - t0, 2),
    }
    return records, info


def _record(
    conv: Conversation, question: Question, contexts: dict[str, tuple[set[str], int]]
) -> dict[str, Any]:
    return {
        "sample_id": conv.sample_id,
        "index": question.index,
        "category": question.category,
        "evidence": list(question.evidence),
        "recall": {m: evidence_recall(question.evidence, contexts[m][0]) for m in METHODS},
        "tokens": {m: contexts[m][1] for m in METHODS},
    }


def data_summary(path: Path, conversations: Sequence[Conversation]) -> dict[str, Any]:
    """File identity and sizes."""
    questions = [q for c in conversations for q in c.questions]
    return {
        "path": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "conversations": len(conversations),
        "sessions": sum(c.sessions for c in conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "scored_questions": sum(q.scored for q in questions),
        "questions_by_category": dict(Counter(str(q.category) for q in questions)),
    }


def run_config(budget: int, recall_k: int, conversations: Sequence[Conversation]) -> dict:
    """Everything that defines the numbers."""
    sample = conversations[0] if conversations else Conversation("sample", [], [], 0)
    replay_ctx = asdict(replay_context(sample, "registered:locomo-guard"))
    recall_ctx = asdict(recall_context(sample, "registered:locomo-guard", budget, recall_k))
    for c in (replay_ctx, recall_ctx):
        c["user_id"] = "locomo-<sample_id>"
    return {
        "budget_tokens": budget,
        "embedding_model": EMBEDDING,
        "token_counter": "langchain_core count_tokens_approximately",
        "turn_text": "StoredMessage.render(): '[<session date ISO>[:16]] <speaker>: <text>'",
        "turn_cost": "count_tokens_approximately([SystemMessage(line)]), as recall counts",
        "window_cost": "count_tokens_approximately(window messages, speaker name included)",
        "budget_fill": "greedy in rank order, items that do not fit are skipped",
        "replay_context": replay_ctx,
        "recall_context": recall_ctx,
        "recall_context_in_budget": "recall_context with memory_token_budget = budget - "
        "window tokens of the conversation",
        "replay_graph": "trim_window -> summarize -> consolidate -> reflect "
        "(graph.routing), no checkpointer, one ainvoke per turn",
        "chunk_turns": CHUNK_TURNS,
        "bm25": {
            "k1": BM25_K1,
            "b": BM25_B,
            "idf": "ln(1 + (N - df + 0.5) / (df + 0.5))",
            "tokens": "lower-cased \\w+, English stopwords removed, suffixes ing/ed/es/s stripped",
        },
        "rrf_k": RRF_K,
        "methods": METHODS,
        "scored_categories": list(SCORED_CATEGORIES),
        "categories": {str(k): v for k, v in CATEGORIES.items()},
    }


def git_commit() -> str | None:
    """HEAD of the checkout (suffixed ``-dirty`` with local changes), if in git."""
    try:
        root = Path(__file__).resolve().parent.parent
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


async def run_benchmark(
    data: str | Path = DEFAULT_DATA,
    out: str | Path = "bench/out",
    *,
    limit: int | None = None,
    budget: int = 1800,
    recall_k: int = RECALL_K,
    database_url: str | None = None,
    redis_url: str | None = None,
    key_prefix: str | None = None,
    progress: bool = True,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run the benchmark; write ``locomo.json`` / ``locomo.png`` under ``out``.

    Without ``database_url`` a fresh database and key prefix are created on the
    embedded (or ``REDIS_URL``/``DATABASE_URL``) servers and dropped at the end; with
    them (e.g. pytest's ``memory_env``) they are used and left in place.
    """
    started = time.perf_counter()
    data, out = Path(data), Path(out)
    conversations, defects = load_locomo(data, limit)
    records: list[dict[str, Any]] = []
    per_conversation: list[dict[str, Any]] = []
    guard = GuardChatModel()
    graphs = Graphs(
        build_replay_graph(),
        build_recall_graph(),
        register_chat_model(f"locomo-guard-{uuid.uuid4().hex[:8]}", guard),
        guard,
    )
    async with isolated_services(database_url, redis_url, key_prefix, tag="bench_locomo") as env:
        services = await connect_services(env)
        machine = await machine_info(env.database_url)
        with progress_bar(progress and not quiet) as bar:
            n_turns = sum(len(c.turns) for c in conversations)
            n_questions = sum(q.scored for c in conversations for q in c.questions)
            tasks = {
                "replay": bar.add_task("replay", total=n_turns),
                "questions": bar.add_task("questions", total=n_questions),
            }
            for conv in conversations:
                recs, info = await evaluate_conversation(
                    conv, services, graphs, budget, recall_k, bar, tasks
                )
                records += recs
                per_conversation.append(info)
    report = {
        "benchmark": "locomo-evidence-recall",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime_s": round(time.perf_counter() - started, 1),
        "git_commit": git_commit(),
        "data": data_summary(data, conversations),
        "defects": defects.as_dict(),
        "config": run_config(budget, recall_k, conversations),
        "machine": machine,
        "llm_calls": guard.calls,
        "results": aggregate(records, list(METHODS)),
        "reference": {
            "overall_1_4": REFERENCE,
            "full_tokens_per_conversation": REFERENCE_FULL_TOKENS,
        },
        "conversations": per_conversation,
        "questions": records,
    }
    write_json(out / "locomo.json", report)
    plot(report, out / "locomo.png")
    if not quiet:
        print_table(report)
    return report


# ---------------------------------------------------------------------------- output


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_table(report: dict[str, Any]) -> None:
    """Evidence recall per category and overall, tokens, reference, to stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"LoCoMo evidence recall @ {report['config']['budget_tokens']} tokens")
    table.add_column("method")
    for c, name in CATEGORIES.items():
        table.add_column(f"{c} {name}", justify="right")
    for col in ("overall 1-4", "reference", "tokens/q"):
        table.add_column(col, justify="right")
    for method, r in report["results"].items():
        table.add_row(
            method,
            *(_fmt(r["by_category"][str(c)]) for c in CATEGORIES),
            _fmt(r["overall_1_4"], 3),
            _fmt(REFERENCE.get(method)),
            _fmt(r["tokens_mean"], 0),
        )
    console = Console(width=140)
    console.print(table)
    d = report["data"]
    counts = {k: v for k, v in report["defects"]["counts"].items() if v}
    console.print(
        f"{d['conversations']} conversations, {d['turns']} turns, {d['scored_questions']}/"
        f"{d['questions']} questions scored; defects: {counts}; llm calls: "
        f"{report['llm_calls']}; runtime {report['runtime_s']} s"
    )


def plot(report: dict[str, Any], path: Path) -> None:
    """Grouped bars of evidence recall per category and method, plus context tokens."""
    plt = pyplot()
    results = report["results"]
    methods = list(results)
    groups = [str(c) for c in CATEGORIES] + ["overall"]
    labels = [f"{c} {n}" for c, n in CATEGORIES.items()] + ["overall 1-4"]
    fig, (ax, ax_tokens) = plt.subplots(
        1, 2, figsize=(15, 6.2), gridspec_kw={"width_ratios": [3, 1.2]}
    )
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        r = results[method]
        values = [r["by_category"][g] if g != "overall" else r["overall_1_4"] for g in groups]
        xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, [v or 0.0 for v in values], width, label=method)
    ax.set_xticks(range(len(groups)), labels)
    ax.set_ylabel("evidence recall")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"LoCoMo evidence recall @ {report['config']['budget_tokens']} tokens")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    ax.grid(axis="y", alpha=0.3)
    tokens = [results[m]["tokens_mean"] or 0 for m in methods]
    ax_tokens.barh(methods, tokens, color=[f"C{j}" for j in range(len(methods))])
    ax_tokens.set_xscale("log")
    ax_tokens.invert_yaxis()
    ax_tokens.axvline(report["config"]["budget_tokens"], color="grey", linestyle="--", lw=1)
    for y, (m, t) in enumerate(zip(methods, tokens, strict=True)):
        ax_tokens.text(t, y, f" {t:,.0f} | {_fmt(results[m]['overall_1_4'])}", va="center")
    ax_tokens.set_title("context tokens per question | recall 1-4")
    ax_tokens.set_xlim(right=max(tokens + [1]) * 8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run."""
    p = argparse.ArgumentParser(
        prog="python -m bench.locomo",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data", default=DEFAULT_DATA, help="LoCoMo-format JSON file")
    p.add_argument("--out", default="bench/out", help="output folder (JSON + PNG)")
    p.add_argument("--limit", type=int, default=None, help="first N conversations only")
    p.add_argument("--budget", type=int, default=1800, help="context token budget")
    p.add_argument("--recall-k", type=int, default=RECALL_K, help="recall_k of the recall node")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    quiet_logs()
    asyncio.run(
        run_benchmark(
            a.data,
            a.out,
            limit=a.limit,
            budget=a.budget,
            recall_k=a.recall_k,
            progress=not a.no_progress,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
