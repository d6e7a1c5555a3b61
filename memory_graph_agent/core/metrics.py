"""Prometheus metrics of the memory pipeline, on the default registry.

They show up wherever that registry is exposed: ``--metrics-port``, ``memory-agent metrics``
and the ``/metrics`` of the LangGraph server. No label ever carries a user or thread id.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)

from memory_graph_agent.core.kinds import TIER_ORDER

TIERS = ("window", *(kind.value for kind in reversed(TIER_ORDER)), "profile")
SUMMARY_OUTCOMES = ("llm", "fallback", "raw", "failed")
REDIS_OPS = (
    "push",
    "window",
    "overflow",
    "pending",
    "pending_len",
    "ack",
    "threads",
    "profile_get",
    "profile_upsert",
    "admit",
)

RETRIEVAL_SECONDS = Histogram(
    "agent_memory_retrieval_seconds",
    "Time of the recall node's retrieval (query embedding + pgvector search).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
HITS = Counter(
    "agent_memory_hit_total",
    "Items that reached the prompt, per tier (window messages, recalled episodes, "
    "recalled summaries, recalled reflections, profile facts).",
    ["tier"],
)
PENDING_QUEUE_SIZE = Gauge(
    "agent_memory_pending_queue_size",
    "Pending-list length of the thread last trimmed or consolidated by this process.",
)
VECTOR_SIMILARITY = Histogram(
    "agent_memory_vector_similarity",
    "Cosine similarity of the memories recalled into the prompt.",
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
)
REDIS_FAILURES = Counter(
    "agent_memory_redis_failures_total",
    "Redis operations of the memory stores that raised a Redis/connection error.",
    ["op"],
)
SUMMARIES = Counter(
    "agent_memory_summaries_total",
    "Summaries by outcome: llm / fallback / raw (summarize), failed (consolidate could "
    "not store it).",
    ["outcome"],
)

DEATH_CAUSES = ("SIGSEGV", "SIGILL", "SIGBUS", "SIGABRT", "SIGKILL", "SIGTERM", "exit", "other")
MODEL_SERVER_DEATHS = Counter(
    "agent_memory_model_server_deaths_total",
    "Deaths of the local model server (llama.cpp), by the signal that killed it, 'exit' "
    "(it exited, e.g. refusing an unportable build) or 'other'.",
    ["cause"],
)

# Known label values start at 0, so a scrape shows every series before the first event.
for _tier in TIERS:
    HITS.labels(tier=_tier)
for _outcome in SUMMARY_OUTCOMES:
    SUMMARIES.labels(outcome=_outcome)
for _op in REDIS_OPS:
    REDIS_FAILURES.labels(op=_op)
for _cause in DEATH_CAUSES:
    MODEL_SERVER_DEATHS.labels(cause=_cause)

LLM_PURPOSES = ("summarize", "extract_facts", "consolidate", "reflect")
LLM_CALLS = Counter(
    "agent_memory_llm_calls_total",
    "Chat-model calls made by memory (not by the reply), per purpose; failed calls count.",
    ["purpose"],
)
LLM_TOKENS = Counter(
    "agent_memory_llm_tokens_total",
    "Tokens of memory's chat-model calls, per purpose and direction (input/output): the "
    "provider's usage when it reports one, else count_tokens_approximately.",
    ["purpose", "direction"],
)
for _purpose in LLM_PURPOSES:
    LLM_CALLS.labels(purpose=_purpose)
    for _direction in ("input", "output"):
        LLM_TOKENS.labels(purpose=_purpose, direction=_direction)

ALL_METRICS = (
    LLM_CALLS,
    LLM_TOKENS,
    RETRIEVAL_SECONDS,
    HITS,
    PENDING_QUEUE_SIZE,
    VECTOR_SIMILARITY,
    REDIS_FAILURES,
    SUMMARIES,
    MODEL_SERVER_DEATHS,
)

MEMORY_REGISTRY = CollectorRegistry(auto_describe=True)
"""A second registry holding only the ``agent_memory_*`` metrics (same objects)."""
for _metric in ALL_METRICS:
    MEMORY_REGISTRY.register(_metric)


def observe_retrieval() -> Any:
    """Context manager timing one retrieval into ``agent_memory_retrieval_seconds``."""
    return RETRIEVAL_SECONDS.time()


def record_similarities(recalled: Iterable[Mapping[str, Any]]) -> None:
    """Observe the similarity of each recalled item (items without one are skipped)."""
    for item in recalled:
        similarity = item.get("similarity")
        if similarity is not None:
            VECTOR_SIMILARITY.observe(float(similarity))


def record_prompt_hits(
    window_messages: int,
    recalled: Iterable[Mapping[str, Any]],
    profile: Mapping[str, Any] | None,
) -> None:
    """Count what one turn put in the prompt, per tier."""
    kinds = [item.get("kind") for item in recalled]
    HITS.labels(tier="window").inc(window_messages)
    for kind in reversed(TIER_ORDER):  # episode, summary, reflection
        HITS.labels(tier=kind.value).inc(kinds.count(kind))
    HITS.labels(tier="profile").inc(len(profile or {}))


Spent = dict[str, dict[str, int]]
"""Memory's model cost: ``{purpose: {"calls": n, "input": tokens, "output": tokens}}``."""
_SPENT: ContextVar[Spent | None] = ContextVar("memory_llm_spent", default=None)


def record_llm_call(purpose: str, input_tokens: int, output_tokens: int) -> None:
    """Count one memory model call and its tokens (and in the running `metering` block)."""
    input_tokens, output_tokens = max(0, input_tokens), max(0, output_tokens)
    LLM_CALLS.labels(purpose=purpose).inc()
    LLM_TOKENS.labels(purpose=purpose, direction="input").inc(input_tokens)
    LLM_TOKENS.labels(purpose=purpose, direction="output").inc(output_tokens)
    if (spent := _SPENT.get()) is not None:
        add_spent(spent, {purpose: {"calls": 1, "input": input_tokens, "output": output_tokens}})


def add_spent(total: Spent, more: Spent) -> Spent:
    """Add ``more`` into ``total`` (in place); return ``total``."""
    for purpose, counts in more.items():
        into = total.setdefault(purpose, {"calls": 0, "input": 0, "output": 0})
        for name, value in counts.items():
            into[name] = into.get(name, 0) + int(value)
    return total


def merge_spent(left: Spent | None, right: Spent | None) -> Spent:
    """Reducer of the state's ``memory_cost``: the sum of both (new dicts)."""
    return add_spent(add_spent({}, left or {}), right or {})


@contextmanager
def metering() -> Iterator[Spent]:
    """Collect the memory model calls recorded inside the block (this task and its copies)."""
    spent: Spent = {}
    token = _SPENT.set(spent)
    try:
        yield spent
    finally:
        _SPENT.reset(token)


def set_pending(size: int) -> None:
    """Record the pending-list length just observed."""
    PENDING_QUEUE_SIZE.set(size)


def record_summary(outcome: str) -> None:
    """Count one summary outcome (``llm``, ``fallback``, ``raw`` or ``failed``)."""
    if outcome not in SUMMARY_OUTCOMES:
        raise ValueError(f"unknown summary outcome {outcome!r}")
    SUMMARIES.labels(outcome=outcome).inc()


def exposition(memory_only: bool = False) -> bytes:
    """Text exposition of the default registry, or of the ``agent_memory_*`` metrics only."""
    return generate_latest(MEMORY_REGISTRY if memory_only else REGISTRY)


def start_metrics_server(port: int, addr: str = "127.0.0.1") -> tuple[Any, threading.Thread]:
    """Serve the default registry on ``http://addr:port/metrics`` from a daemon thread.

    ``port=0`` picks a free port (read it from ``server.server_port``). Returns the
    ``(server, thread)`` pair of `prometheus_client.start_http_server`; stop it with
    ``server.shutdown(); server.server_close()``.
    """
    try:
        return start_http_server(port, addr=addr)
    except OSError as exc:
        raise RuntimeError(f"cannot serve metrics on {addr}:{port}: {exc}") from exc
