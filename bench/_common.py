"""Shared helpers of `bench.overhead` and `bench.throughput`.

* `InstantChatModel`: a scripted fake chat model that answers instantly (like
  ``tests/fakes.py``'s), so a turn measures the graph and the memory, not a model.
* `isolated_services`: a fresh database and Redis key prefix per run (created and
  dropped like ``tests/conftest.py``), or the URLs/prefix the caller passes (pytest).
* Timing: `timed_node` wraps a node function (name and signature preserved with
  `functools.wraps`) and `instrument` wraps the embedding/search/touch calls of the
  live `Services`; both report into the `TurnRecord` of the running turn (a
  context variable, so concurrent turns never mix their numbers).
* Seeding: generated memory texts, vectors (embedded in batches, perturbed copies of
  embedded texts, or random) and a bulk ``COPY`` into the `MemoryStore` table.
* Output: percentiles, machine info, JSON and matplotlib (Agg) helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import logging
import os
import platform
import random
import re
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda

EMBEDDING = "local:all-minilm-l6-v2"
DIM = 384
TABLE = f"memories_{DIM}"
HNSW_INDEX = f"{TABLE}_hnsw"
PEERS_SEARCH_P50_MS = {
    "LangGraph PostgresStore": 6.4,
    "Mem0": 6.0,
    "langchain-postgres PGVector": 4.7,
}
"""Peers' search-only p50 (10k memories over 10 users, pre-embedded queries), per the issue."""

log = logging.getLogger("bench")

# --------------------------------------------------------------------------- timing


@dataclass
class TurnRecord:
    """What one turn spent where (seconds). Nodes that run twice in a turn are summed."""

    nodes: dict[str, float] = field(default_factory=dict)
    parts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add_node(self, name: str, seconds: float) -> None:
        """Add the duration of one node execution."""
        self.nodes[name] = self.nodes.get(name, 0.0) + seconds

    def add(self, part: str, seconds: float) -> None:
        """Add one timed call (``embed_query``, ``search``, ``model:respond``...)."""
        self.parts[part].append(seconds)

    def total(self, part: str) -> float:
        """Sum of one part's calls."""
        return sum(self.parts.get(part, ()))

    def total_prefix(self, prefix: str, exclude: Sequence[str] = ()) -> float:
        """Sum of every part whose name starts with ``prefix`` (minus ``exclude``)."""
        return sum(
            sum(v) for k, v in self.parts.items() if k.startswith(prefix) and k not in exclude
        )


CURRENT_TURN: contextvars.ContextVar[TurnRecord | None] = contextvars.ContextVar(
    "bench_turn", default=None
)
CURRENT_NODE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "bench_node", default=None
)


def _record(part: str, seconds: float) -> None:
    rec = CURRENT_TURN.get()
    if rec is not None:
        rec.add(part, seconds)


def timed_node(fn: Callable) -> Callable:
    """Wrap an async node ``fn(state, runtime)``; keeps its name (the graph node name)."""
    name = fn.__name__

    @functools.wraps(fn)
    async def wrapper(state, runtime):  # noqa: ANN001, ANN202 - same signature as the node
        token = CURRENT_NODE.set(name)
        start = time.perf_counter()
        try:
            return await fn(state, runtime)
        finally:
            elapsed = time.perf_counter() - start
            CURRENT_NODE.reset(token)
            rec = CURRENT_TURN.get()
            if rec is not None:
                rec.add_node(name, elapsed)

    return wrapper


def _timed_call(func: Callable, part: str) -> Callable:
    @functools.wraps(func)
    async def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        try:
            return await func(*args, **kwargs)
        finally:
            _record(part, time.perf_counter() - start)

    return wrapper


def _timed_sync_call(func: Callable, part: str) -> Callable:
    @functools.wraps(func)
    def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            _record(part, time.perf_counter() - start)

    return wrapper


INSTRUMENTED = (
    ("embeddings", "aembed_query", "embed_query"),
    ("embeddings", "aembed_documents", "embed_documents"),
    ("memories", "search", "search"),
    ("memories", "touch", "touch"),
    ("memories", "add", "memory_add"),
    ("memories", "summaries_since_reflection", "since_reflection"),
)
"""(services attribute, method, part name) timed by `instrument`."""


@contextlib.contextmanager
def instrument(services: Any) -> Iterator[None]:
    """Time the embedding and pgvector calls of ``services`` (instance-level patches).

    The query embedding of `recall` is ``embed_query``; the summary embedding inside
    `consolidate`'s ``memory_add`` is ``embed_documents``. Restored on exit.
    """
    patched = []
    for attr, method, part in INSTRUMENTED:
        obj = getattr(services, attr)
        if method in vars(obj):  # already instrumented (nested use): keep the outer one
            continue
        setattr(obj, method, _timed_call(getattr(obj, method), part))
        patched.append((obj, method))
    # MiniLM's own encode (runs under LocalEmbeddings' lock, in a worker thread that
    # inherits the turn's context): pure compute, without the wait for the lock
    model = getattr(services.embeddings, "_model", None)
    if model is not None and callable(getattr(model, "encode", None)):
        if "encode" not in vars(model):
            model.encode = _timed_sync_call(model.encode, "embed_compute")
            patched.append((model, "encode"))
    try:
        yield
    finally:
        for obj, method in patched:
            with contextlib.suppress(AttributeError):
                delattr(obj, method)


# ------------------------------------------------------------------------- fake model

_IDENTITY = re.compile(r"[Mm]y name is ([A-Z][a-z]+(?: [A-Z][a-z]+)?)")
_CITY = re.compile(r"\bI live in ([A-Z][a-z]+)\b")


def _prompt_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


def instant_handler(messages: list[BaseMessage]) -> str:
    """Answer each of the agent's prompts like a tiny but faithful model would."""
    text = _prompt_text(messages)
    if text.startswith("Summarize this part of a conversation"):
        body = text.split("<conversation>", 1)[-1].split("</conversation>", 1)[0]
        said = [ln.split(": ", 1)[1] for ln in body.strip().splitlines() if "] human: " in ln]
        return "The user said: " + " | ".join(said)
    if text.startswith("Extract durable facts"):
        facts = []
        if m := _IDENTITY.search(text):
            facts.append({"key": "name", "value": m.group(1), "importance": 0.95})
        if m := _CITY.search(text):
            facts.append({"key": "city", "value": m.group(1), "importance": 0.8})
        return json.dumps({"facts": facts})
    if text.startswith("Here are summaries of past conversations"):
        # no capitalised word: nothing the reflection guard could call invented
        return "across many conversations the user showed stable interests and goals."
    last = str(messages[-1].content)[:80] if messages else ""
    return f"Here is a short answer about: {last}"


class InstantChatModel(BaseChatModel):
    """A fake chat model that answers instantly; each call is timed as ``model:<node>``."""

    handler: Callable[[list[BaseMessage]], str] = instant_handler

    @property
    def _llm_type(self) -> str:
        return "bench-instant"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # noqa: ANN001
        reply = AIMessage(content=self.handler(messages))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # noqa: ANN001
        return self._generate(messages, stop=stop)

    async def ainvoke(self, input, config=None, **kwargs):  # noqa: ANN001, ANN201, A002
        """Time the whole LangChain call (callbacks included): that is the model's cost."""
        start = time.perf_counter()
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _record(f"model:{CURRENT_NODE.get() or '?'}", time.perf_counter() - start)

    def with_structured_output(self, schema, **kwargs):  # noqa: ANN001, ANN201
        """Parse the JSON answer into ``schema`` (what a JSON-mode provider returns)."""

        def parse(messages):  # noqa: ANN001, ANN202
            return schema.model_validate_json(self.invoke(messages).content)

        async def aparse(messages):  # noqa: ANN001, ANN202
            return schema.model_validate_json((await self.ainvoke(messages)).content)

        return RunnableLambda(parse, afunc=aparse)

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN201
        return self


def register_instant_model() -> tuple[str, InstantChatModel]:
    """Register a fresh `InstantChatModel`; returns (``registered:...`` spec, model)."""
    from memory_graph_agent.models import register_chat_model

    model = InstantChatModel()
    return register_chat_model(f"bench-instant-{uuid.uuid4().hex[:8]}", model), model


# ------------------------------------------------------------------ isolated services


@dataclass
class BenchEnv:
    """Where a benchmark run stores its data."""

    redis_url: str
    database_url: str
    key_prefix: str
    owned: bool
    """True when this run created the database/prefix and drops them at the end."""


@contextlib.asynccontextmanager
async def isolated_services(
    database_url: str | None = None,
    redis_url: str | None = None,
    key_prefix: str | None = None,
    tag: str = "bench",
) -> AsyncIterator[BenchEnv]:
    """A fresh database + key prefix (dropped afterwards), or the given ones (kept).

    Sets ``REDIS_URL`` / ``DATABASE_URL`` / ``MEMORY_KEY_PREFIX`` for the duration, so
    `memory_graph_agent.services.get_services` connects there; restores them on exit.
    """
    from memory_graph_agent.local.embedded import ensure_services
    from memory_graph_agent.services import with_database

    owned = database_url is None
    server_url = None
    if database_url is None or redis_url is None:
        urls = await asyncio.to_thread(ensure_services)
        redis_url = redis_url or urls.redis_url
        if database_url is None:
            server_url = urls.database_url
            db = f"{tag}_{uuid.uuid4().hex[:12]}"
            async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
                await conn.execute(f'CREATE DATABASE "{db}"')
            database_url = with_database(server_url, db)
            key_prefix = key_prefix or f"{tag}-{db}"
    key_prefix = key_prefix or f"{tag}-{uuid.uuid4().hex[:12]}"
    env = BenchEnv(redis_url, database_url, key_prefix, owned)
    values = {"REDIS_URL": redis_url, "DATABASE_URL": database_url, "MEMORY_KEY_PREFIX": key_prefix}
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if owned:
            await _drop_owned(env, server_url)


async def _drop_owned(env: BenchEnv, server_url: str | None) -> None:
    from redis.asyncio import Redis

    from memory_graph_agent.services import (
        _per_loop,  # the per-loop cache of this run's connections
    )

    services = _per_loop.get(asyncio.get_running_loop(), {}).pop(EMBEDDING, None)
    if services is not None:
        with contextlib.suppress(Exception):
            await services.memories.engine.close()
        with contextlib.suppress(Exception):
            await services.redis.aclose()
    redis = Redis.from_url(env.redis_url)
    try:
        batch = []
        async for key in redis.scan_iter(match=f"{env.key_prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                await redis.delete(*batch)
                batch = []
        if batch:
            await redis.delete(*batch)
    finally:
        await redis.aclose()
    if server_url:
        db = urlsplit(env.database_url).path.lstrip("/")
        async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


async def connect_services(env: BenchEnv) -> Any:
    """`get_services` for this run, checked to point at ``env``'s database."""
    from memory_graph_agent.services import get_services, pg_engine

    services = await get_services(EMBEDDING)
    if services.memories.engine is not pg_engine(env.database_url):
        raise RuntimeError(
            "the services cached for this event loop use another database than "
            f"{env.database_url!r}; run the benchmark in its own event loop"
        )
    if services.window.prefix != env.key_prefix:
        raise RuntimeError("the services cached for this event loop use another key prefix")
    return services


# ------------------------------------------------------------------------- statistics


def ms_stats(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """n, p50, p95, p99, mean, min, max in milliseconds (None when empty)."""
    if not seconds:
        return {
            "n": 0,
            "p50": None,
            "p95": None,
            "p99": None,
            "mean": None,
            "min": None,
            "max": None,
        }
    a = np.asarray(seconds, dtype=float) * 1000.0
    return {
        "n": int(a.size),
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "mean": round(float(a.mean()), 3),
        "min": round(float(a.min()), 3),
        "max": round(float(a.max()), 3),
    }


def parse_ints(text: str) -> list[int]:
    """``"1000,10k,1e5"`` → ``[1000, 10000, 100000]``."""
    out = []
    for raw in text.split(","):
        raw = raw.strip().lower()
        if not raw:
            continue
        mult = 1
        if raw.endswith("k"):
            raw, mult = raw[:-1], 1000
        elif raw.endswith("m"):
            raw, mult = raw[:-1], 1_000_000
        out.append(int(float(raw) * mult))
    if not out or any(v < 1 for v in out):
        raise ValueError(f"expected a comma-separated list of positive integers, got {text!r}")
    return out


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for the printed table ('-' when missing)."""
    return "-" if value is None else f"{value:.{digits}f}"


# ----------------------------------------------------------------------- machine info


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


async def machine_info(database_url: str) -> dict[str, Any]:
    """Cores, CPU, Python, PostgreSQL/pgvector versions, load, library versions."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in (
        "langgraph",
        "langchain-core",
        "langchain-postgres",
        "langgraph-checkpoint-postgres",
        "psycopg",
        "redis",
        "sentence-transformers",
        "torch",
        "numpy",
    ):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        pgvector = await (
            await conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        ).fetchone()
        pg = (await (await conn.execute("SHOW server_version")).fetchone())[0]
        settings = {}
        for name in (
            "shared_buffers",
            "work_mem",
            "maintenance_work_mem",
            "max_parallel_maintenance_workers",
            "max_connections",
        ):
            settings[name] = (await (await conn.execute(f"SHOW {name}")).fetchone())[0]
    try:
        import torch

        torch_threads = torch.get_num_threads()
    except Exception:  # noqa: BLE001
        torch_threads = None
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model(),
        "loadavg_at_start": list(os.getloadavg()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "postgres": pg,
        "pgvector": pgvector[0] if pgvector else None,
        "postgres_settings": settings,
        "torch_threads": torch_threads,
        "packages": versions,
    }


# ----------------------------------------------------------------- generated content

TOPICS = [
    "sourdough baking",
    "marathon training",
    "the Rust borrow checker",
    "Kubernetes upgrades",
    "tomato gardening",
    "jazz piano voicings",
    "a trip to Lisbon",
    "learning Japanese",
    "tax returns",
    "a kitchen renovation",
    "cycling in the Alps",
    "home espresso",
    "a Postgres migration",
    "birdwatching",
    "a wedding speech",
    "chess endgames",
    "sleep schedules",
    "a job interview at a bank",
    "climbing grades",
    "cat allergies",
    "budget spreadsheets",
    "the history of Rome",
    "electric cars",
    "watercolor painting",
    "a broken laptop hinge",
    "vegan recipes",
    "photography lenses",
    "a podcast launch",
    "a noisy neighbour",
    "retirement savings",
    "Go generics",
    "a hiking trip in Norway",
    "board game nights",
    "knee physiotherapy",
    "a React performance bug",
    "wine pairing",
    "a flat in Berlin",
    "guitar strings",
    "meditation",
    "a sister's birthday present",
    "fantasy football",
    "solar panels",
    "a dentist appointment",
    "bread flour types",
    "TypeScript types",
    "a lost passport",
    "sea kayaking",
    "a book club pick",
    "mechanical keyboards",
    "a dog's diet",
    "startup fundraising",
    "the French subjunctive",
    "winter tyres",
    "a conference talk",
    "house plants",
    "an allergy to peanuts",
    "Python packaging",
    "a moving checklist",
    "an insurance claim",
    "a piano recital",
]
_ACTS = [
    "asked for help with",
    "complained about",
    "is excited about",
    "wants advice on",
    "has been reading about",
    "spent the weekend on",
    "is worried about",
    "made progress on",
    "compared options for",
    "shared a plan for",
    "is budgeting for",
    "changed their mind about",
]
_WHEN = [
    "last week",
    "this morning",
    "over the holidays",
    "since January",
    "for two months",
    "yesterday",
    "every Sunday",
    "after work",
    "before the deadline",
    "this spring",
]
_DETAILS = [
    "They prefer simple, step-by-step instructions.",
    "They mentioned a budget of about 500 euros.",
    "They said the deadline is at the end of the month.",
    "They would like reminders on weekday mornings.",
    "They found the previous suggestion too complicated.",
    "They want to compare at least three alternatives.",
    "They asked to keep answers short and concrete.",
    "They noted that their partner disagrees.",
    "They plan to try again next weekend.",
    "They mentioned working from home on Fridays.",
]
_QUESTIONS = [
    "What did I tell you about {t}?",
    "Can you remind me of my plan for {t}?",
    "Any new ideas on {t} given what you know about me?",
    "I am back with more questions on {t}.",
    "Summarize what we discussed about {t}, please.",
    "Do you remember my budget for {t}?",
    "What would you suggest next for {t}?",
]


def memory_text(rng: random.Random, kind: str = "summary") -> str:
    """A 40-70 word memory that reads like this project's summaries/reflections."""
    a, b = rng.sample(TOPICS, 2)
    if kind == "reflection":
        return (
            f"Across many conversations the user {rng.choice(_ACTS)} {a} and {b}. "
            f"{rng.choice(_DETAILS)} {rng.choice(_DETAILS)} They tend to return to {a} "
            f"{rng.choice(_WHEN)} and value concrete, practical suggestions."
        )
    return (
        f"The user {rng.choice(_ACTS)} {a} {rng.choice(_WHEN)}. {rng.choice(_DETAILS)} "
        f"Later they {rng.choice(_ACTS)} {b} {rng.choice(_WHEN)}. {rng.choice(_DETAILS)} "
        f"The assistant suggested breaking {a} into small weekly steps."
    )


def user_question(rng: random.Random) -> str:
    """A user turn that relates to the generated memories (so recall finds hits)."""
    return rng.choice(_QUESTIONS).format(t=rng.choice(TOPICS))


# ---------------------------------------------------------------------------- seeding

PERTURB_SIGMA = 0.032
"""Per-dimension Gaussian noise added to a pooled embedding (384-d): cosine ~0.85 to it."""


async def embed_batched(embeddings: Any, texts: list[str], batch: int = 512) -> np.ndarray:
    """Embed many texts in large batches (MiniLM batch throughput >> one by one)."""
    out = []
    for i in range(0, len(texts), batch):
        out.append(
            np.asarray(await embeddings.aembed_documents(texts[i : i + batch]), dtype=np.float32)
        )
    return np.concatenate(out) if out else np.zeros((0, DIM), dtype=np.float32)


class VectorSource:
    """Vectors for seeded memories.

    ``perturbed`` (default): a pool of generated texts is embedded with MiniLM in
    batches; each seeded memory takes a pool text and its embedding plus Gaussian noise
    (renormalised, cosine ~0.85 to the original), so the data keeps the cluster
    structure of real embeddings at the cost of embedding only the pool.
    ``real``: every seeded text is embedded (batched). ``random``: random unit vectors.
    """

    def __init__(self, mode: str, embeddings: Any, rng: random.Random, pool: int = 2048):
        if mode not in ("perturbed", "real", "random"):
            raise ValueError(f"vector mode must be perturbed|real|random, got {mode!r}")
        self.mode = mode
        self.embeddings = embeddings
        self.rng = rng
        self.np_rng = np.random.default_rng(rng.getrandbits(32))
        self.pool_size = pool
        self.pool_texts: dict[str, list[str]] = {}
        self.pool_vecs: dict[str, np.ndarray] = {}
        self.embed_seconds = 0.0
        self.embedded_texts = 0

    async def _pool(self, kind: str) -> None:
        if kind in self.pool_texts:
            return
        n = self.pool_size if kind == "summary" else max(16, self.pool_size // 8)
        texts = [memory_text(self.rng, kind) for _ in range(n)]
        start = time.perf_counter()
        vecs = await embed_batched(self.embeddings, texts)
        self.embed_seconds += time.perf_counter() - start
        self.embedded_texts += n
        self.pool_texts[kind], self.pool_vecs[kind] = texts, vecs

    async def make(self, kinds: list[str]) -> tuple[list[str], np.ndarray]:
        """Texts and unit vectors (float32, shape (n, DIM)) for memories of these kinds."""
        n = len(kinds)
        if self.mode == "real":
            texts = [memory_text(self.rng, k) for k in kinds]
            start = time.perf_counter()
            vecs = await embed_batched(self.embeddings, texts)
            self.embed_seconds += time.perf_counter() - start
            self.embedded_texts += n
            return texts, vecs
        texts: list[str] = [""] * n
        vecs = np.empty((n, DIM), dtype=np.float32)
        for kind in set(kinds):
            await self._pool(kind)
            idx = [i for i, k in enumerate(kinds) if k == kind]
            pick = self.np_rng.integers(0, len(self.pool_texts[kind]), size=len(idx))
            for i, j in zip(idx, pick, strict=True):
                texts[i] = self.pool_texts[kind][j]
            if self.mode == "perturbed":
                vecs[idx] = self.pool_vecs[kind][pick] + self.np_rng.normal(
                    0.0, PERTURB_SIGMA, size=(len(idx), DIM)
                ).astype(np.float32)
            else:
                vecs[idx] = self.np_rng.normal(size=(len(idx), DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return texts, vecs


_NS = uuid.UUID("2b7f7f5e-3f61-4a43-9d7e-0d5f0c1b2a90")
COPY_COLUMNS = (
    "langchain_id",
    "content",
    "embedding",
    "user_id",
    "thread_id",
    "kind",
    "importance",
    "created_at",
    "last_accessed_at",
    "access_count",
    "source_ids",
    "stored_at",
)
"""The `MemoryStore` table's columns we fill: id, content, embedding, every metadata
column of ``memory_graph_agent.storage.memories.METADATA_COLUMNS`` and ``stored_at``."""

REFLECTION_EVERY = 11
"""Seeded history: 10 summaries, then one reflection citing them, repeated."""
SEED_STEP = timedelta(minutes=5)


def seeded_kind(i: int) -> str:
    """Kind of the i-th newest seeded memory of a user (i = 0 is the newest: a reflection)."""
    return "reflection" if i % REFLECTION_EVERY == 0 else "summary"


def _seed_id(user_id: str, i: int) -> uuid.UUID:
    return uuid.uuid5(_NS, f"{user_id}:{i}")


def _vector_literal(v: np.ndarray) -> str:
    return "[" + ",".join(map(repr, np.round(v.astype(np.float64), 6).tolist())) + "]"


async def seed_user(
    database_url: str,
    user_id: str,
    start: int,
    stop: int,
    vectors: VectorSource,
    anchor: datetime,
    chunk: int = 5000,
) -> dict[str, float]:
    """COPY the user's seeded memories ``start..stop-1`` (0 = newest) into the table.

    History runs backwards from ``anchor`` in 5-minute steps, so topping a user up later
    adds older memories and never changes which reflection is the latest. Summaries
    carry 5 message ids as provenance, reflections the ids of the 10 summaries before.
    """
    stats = {"rows": 0, "embed_s": 0.0, "copy_s": 0.0}
    rng = random.Random(f"{user_id}:{start}")
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for lo in range(start, stop, chunk):
            hi = min(stop, lo + chunk)
            kinds = [seeded_kind(i) for i in range(lo, hi)]
            t0 = time.perf_counter()
            texts, vecs = await vectors.make(kinds)
            stats["embed_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            cols = ", ".join(COPY_COLUMNS)
            async with conn.cursor() as cur:
                async with cur.copy(f'COPY "{TABLE}" ({cols}) FROM STDIN') as copy:
                    for n, i in enumerate(range(lo, hi)):
                        kind = kinds[n]
                        ts = anchor - SEED_STEP * i
                        if kind == "reflection":
                            sources = [str(_seed_id(user_id, j)) for j in range(i + 1, i + 11)]
                            importance = 0.9
                        else:
                            sources = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(5)]
                            importance = 0.5
                        await copy.write_row(
                            (
                                _seed_id(user_id, i),
                                texts[n],
                                _vector_literal(vecs[n]),
                                user_id,
                                None if kind == "reflection" else f"seed-{i // 40}",
                                kind,
                                importance,
                                ts,
                                None,
                                0,
                                sources,
                                ts,
                            )
                        )
            await conn.commit()
            stats["copy_s"] += time.perf_counter() - t0
            stats["rows"] += hi - lo
    return stats


async def drop_hnsw(database_url: str) -> None:
    """Drop the HNSW index before a bulk load (rebuilt by `build_hnsw`)."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f'DROP INDEX IF EXISTS "{HNSW_INDEX}"')


async def build_hnsw(database_url: str, maintenance_work_mem: str = "1GB") -> dict[str, Any]:
    """(Re)build the index exactly as `MemoryStore.open` defines it, then VACUUM ANALYZE."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        t0 = time.perf_counter()
        await conn.execute(
            f'CREATE INDEX IF NOT EXISTS "{HNSW_INDEX}" ON "{TABLE}" '
            "USING hnsw (embedding vector_cosine_ops)"
        )
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        await conn.execute(f'VACUUM (ANALYZE) "{TABLE}"')
        analyze_s = time.perf_counter() - t0
        rows = (await (await conn.execute(f'SELECT count(*) FROM "{TABLE}"')).fetchone())[0]
        size = (
            await (
                await conn.execute("SELECT pg_relation_size(%s::regclass)", (HNSW_INDEX,))
            ).fetchone()
        )[0]
    return {
        "build_s": round(build_s, 3),
        "vacuum_analyze_s": round(analyze_s, 3),
        "table_rows": int(rows),
        "index_mb": round(size / 2**20, 1),
        "maintenance_work_mem": maintenance_work_mem,
    }


# ---------------------------------------------------------------------- EXPLAIN check


@contextlib.contextmanager
def capture_sql(engine: Any) -> Iterator[list[tuple[str, Any]]]:
    """Capture the SQL (statement, parameters) the PGEngine sends, for EXPLAIN."""
    from sqlalchemy import event

    sync_engine = engine._pool.sync_engine  # PGEngine keeps its AsyncEngine as _pool
    captured: list[tuple[str, Any]] = []

    def listener(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        captured.append((statement, parameters))

    event.listen(sync_engine, "before_cursor_execute", listener)
    try:
        yield captured
    finally:
        event.remove(sync_engine, "before_cursor_execute", listener)


def _plan_nodes(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def _plan_summary(plan: dict) -> dict[str, Any]:
    nodes = list(_plan_nodes(plan))
    used = [n.get("Index Name") for n in nodes if n.get("Index Name")]
    return {
        "node_types": [n.get("Node Type") for n in nodes],
        "indexes": used,
        "uses_hnsw": HNSW_INDEX in used,
    }


async def explain_recall(
    services: Any, database_url: str, user_id: str, vector: list[float], k: int
) -> dict[str, Any]:
    """EXPLAIN the exact recall query `MemoryStore.search` sends (captured from SQLAlchemy).

    Returns the custom plan (EXPLAIN ANALYZE with the real parameters and the same
    ``SET LOCAL`` HNSW options) and the generic plan a prepared statement may switch to
    (``EXPLAIN (GENERIC_PLAN)``), each with whether the HNSW index is used.
    """
    with capture_sql(services.memories.engine) as captured:
        await services.memories.search(user_id, vector, k)
    sets = [s for s, _ in captured if s.strip().upper().startswith("SET LOCAL")]
    queries = [(s, p) for s, p in captured if "ORDER BY" in s and "LIMIT" in s]
    if not queries:
        return {"error": "recall query not captured", "captured": [s for s, _ in captured]}
    stmt, params = queries[-1]
    stmt = stmt.strip().rstrip(";")
    out: dict[str, Any] = {"set_local": sets, "sql": " ".join(stmt.split())[:600]}
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        async with conn.transaction():
            for s in sets:
                await conn.execute(s)
            row = await (
                await conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + stmt, params)
            ).fetchone()
            top = row[0][0]
            out["custom_plan"] = {
                **_plan_summary(top["Plan"]),
                "execution_ms": top.get("Execution Time"),
                "planning_ms": top.get("Planning Time"),
                "rows": top["Plan"].get("Actual Rows"),
            }
        names: list[str] = []

        def number(m: re.Match) -> str:
            if m.group(1) not in names:
                names.append(m.group(1))
            return f"${names.index(m.group(1)) + 1}"

        generic_sql = re.sub(r"%\((\w+)\)s", number, stmt)
        try:
            async with conn.transaction():
                for s in sets:
                    await conn.execute(s)
                row = await (
                    await conn.execute("EXPLAIN (GENERIC_PLAN, FORMAT JSON) " + generic_sql)
                ).fetchone()
                out["generic_plan"] = _plan_summary(row[0][0]["Plan"])
        except psycopg.Error as exc:  # GENERIC_PLAN needs PostgreSQL >= 16
            out["generic_plan"] = {"error": str(exc).splitlines()[0]}
    return out


async def prepared_recall_plans(services: Any) -> dict[str, Any]:
    """Custom vs generic plan executions of the recall query, as it really ran.

    psycopg prepares a statement after 5 executions on a connection, after which
    PostgreSQL may switch to the generic plan. Reads ``pg_prepared_statements`` on
    every idle connection of the PGEngine pool.
    """
    from sqlalchemy import text

    engine = services.memories.engine

    async def go() -> tuple[int, list[dict[str, Any]]]:
        pool = engine._pool.sync_engine.pool
        n = max(1, pool.checkedin())
        conns, rows = [], []
        try:
            for _ in range(n):
                conns.append(await engine._pool.connect())
            for conn in conns:
                result = await conn.execute(
                    text(
                        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
                    )
                )
                rows += [dict(r) for r in result.mappings()]
        finally:
            for conn in conns:
                await conn.close()
        return n, rows

    n, rows = await engine._run_as_async(go())
    recall = [r for r in rows if "ORDER BY" in r["statement"] and "<=>" in r["statement"]]
    return {
        "connections_checked": n,
        "prepared_recall_statements": len(recall),
        "generic_plan_executions": sum(int(r["generic_plans"]) for r in recall),
        "custom_plan_executions": sum(int(r["custom_plans"]) for r in recall),
    }


# --------------------------------------------------------------- lost / duplicated check


async def verify_conversation(services: Any, user_id: str, thread_id: str) -> dict[str, int]:
    """Every message that left the window is in exactly one summary, or still pending.

    ``lost``: left the window, in no summary and not pending. ``duplicated``: in two or
    more summaries, or in a summary and still pending. ``foreign``: a summary cites an
    id this thread never pushed or that is still in the window.
    """
    seen = set(
        await services.redis.smembers(f"{services.window.prefix}:seen:{user_id}:{thread_id}")
    )
    window = {m.id for m in await services.window.window(user_id, thread_id)}
    pending_list = [m.id for _, m in await services.window.pending(user_id, thread_id)]
    pending = set(pending_list)
    summaries = [
        s
        for s in await services.memories.list(user_id, kind="summary", limit=10**7)
        if s.thread_id == thread_id
    ]
    counts = Counter(sid for s in summaries for sid in s.source_ids)
    left = seen - window
    lost = left - pending - set(counts)
    duplicated = {m for m, c in counts.items() if c > 1} | (pending & set(counts))
    duplicated |= {m for m, c in Counter(pending_list).items() if c > 1}
    foreign = set(counts) - left
    return {
        "pushed": len(seen),
        "in_window": len(window),
        "left_window": len(left),
        "summarized": len(set(counts) & left),
        "pending": len(pending),
        "summaries": len(summaries),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "foreign": len(foreign),
    }


# ---------------------------------------------------------------------------- output


def write_json(path: Path, data: Any) -> None:
    """Write indented JSON (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def pyplot():  # noqa: ANN201
    """matplotlib.pyplot with the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def quiet_logs() -> None:
    """Keep the benchmark output to its tables (warnings of the memory nodes still show)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "sentence_transformers", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
