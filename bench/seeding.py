"""Seeding the memory table for a benchmark: vectors, bulk ``COPY`` and the HNSW index.

`seed_size` tops a user up with `seed_user` (``COPY`` of memories and their raw turns, the
vectors from a `VectorSource`), the HNSW indexes dropped for the load and rebuilt after it
exactly as `MemoryStore.open` defines them. `memory_text` writes a 40-70 word summary or
reflection about two of `TOPICS`; `user_question` asks about one of them, so recall finds
hits among the seeded memories.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import psycopg

from memory_graph_agent.core.entities import entity_keys
from memory_graph_agent.storage.halfvec import hnsw_index

DIM = 384
"""Dimension of the benchmark embeddings (`bench.env.EMBEDDING`, MiniLM)."""
TABLE = f"memories_{DIM}"
"""The `MemoryStore` table of that dimension."""
HNSW_INDEX = f"{TABLE}_hnsw"
"""Its HNSW index, as `MemoryStore.open` names it."""
TURN_TABLE = f"episode_vectors_{DIM}"
ENTITY_TABLE = f"{TURN_TABLE}_entities"
"""The raw turns' vector table (`EpisodeLog`) and its HNSW index."""
TURN_HNSW_INDEX = f"{TURN_TABLE}_hnsw"
TURNS_PER_SUMMARY = 5
MAX_SEEDED_TURNS = 50_000
"""Turns are seeded under the newest summaries only, up to this many per user."""

MAINTENANCE_WORK_MEM = "1GB"
"""The session setting of the HNSW builds."""
PERTURB_SIGMA = 0.032
"""Per-dimension Gaussian noise added to a pooled embedding (384-d): cosine ~0.85 to it."""

TOPICS = [
    "sourdough baking", "marathon training", "the Rust borrow checker", "Kubernetes upgrades",
    "tomato gardening", "jazz piano voicings", "a trip to Lisbon", "learning Japanese",
    "tax returns", "a kitchen renovation", "cycling in the Alps", "home espresso",
    "a Postgres migration", "birdwatching", "a wedding speech", "chess endgames",
    "sleep schedules", "a job interview at a bank", "climbing grades", "cat allergies",
    "budget spreadsheets", "the history of Rome", "electric cars", "watercolor painting",
    "a broken laptop hinge", "vegan recipes", "photography lenses", "a podcast launch",
    "a noisy neighbour", "retirement savings", "Go generics", "a hiking trip in Norway",
    "board game nights", "knee physiotherapy", "a React performance bug", "wine pairing",
    "a flat in Berlin", "guitar strings", "meditation", "a sister's birthday present",
    "fantasy football", "solar panels", "a dentist appointment", "bread flour types",
    "TypeScript types", "a lost passport", "sea kayaking", "a book club pick",
    "mechanical keyboards", "a dog's diet", "startup fundraising", "the French subjunctive",
    "winter tyres", "a conference talk", "house plants", "an allergy to peanuts",
    "Python packaging", "a moving checklist", "an insurance claim", "a piano recital",
]  # fmt: skip
_ACTS = [
    "asked for help with", "complained about", "is excited about", "wants advice on",
    "has been reading about", "spent the weekend on", "is worried about", "made progress on",
    "compared options for", "shared a plan for", "is budgeting for", "changed their mind about",
]  # fmt: skip
_WHEN = [
    "last week", "this morning", "over the holidays", "since January", "for two months",
    "yesterday", "every Sunday", "after work", "before the deadline", "this spring",
]  # fmt: skip
_DETAILS = [
    "They prefer simple, step-by-step instructions.",
    "They mentioned a budget of about 500 euros.",
    "They said the deadline is at the end of the month.",
    "They would like reminders on weekday mornings.",
    "They found the previous suggestion too complicated.",
    "They want to compare at least three alternatives.",
    "They asked to keep answers short and concrete.",
    "They noted that their partner disagrees.", "They plan to try again next weekend.",
    "They mentioned working from home on Fridays.",
]  # fmt: skip
_QUESTIONS = [
    "What did I tell you about {t}?", "Can you remind me of my plan for {t}?",
    "Any new ideas on {t} given what you know about me?",
    "I am back with more questions on {t}.", "Summarize what we discussed about {t}, please.",
    "Do you remember my budget for {t}?", "What would you suggest next for {t}?",
]  # fmt: skip


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


async def embed_batched(embeddings: Any, texts: list[str], batch: int = 512) -> np.ndarray:
    """Embed many texts in large batches (MiniLM batch throughput >> one by one)."""
    out = []
    for i in range(0, len(texts), batch):
        out.append(
            np.asarray(await embeddings.aembed_documents(texts[i : i + batch]), dtype=np.float32)
        )
    return np.concatenate(out) if out else np.zeros((0, DIM), dtype=np.float32)


class VectorSource:
    """Vectors for seeded memories: a pooled text's MiniLM embedding plus Gaussian noise.

    A pool of generated texts is embedded in batches; each seeded memory takes a pool text
    and its vector plus noise (renormalised, cosine ~0.85 to it), so the data keeps the
    cluster structure of real embeddings at the cost of embedding only the pool.
    """

    mode = "perturbed"

    def __init__(self, embeddings: Any, rng: random.Random, pool: int = 2048):
        self.embeddings, self.rng, self.pool_size = embeddings, rng, pool
        self.np_rng = np.random.default_rng(rng.getrandbits(32))
        self.pool_texts: dict[str, list[str]] = {}
        self.pool_vecs: dict[str, np.ndarray] = {}

    async def make(self, kinds: list[str]) -> tuple[list[str], np.ndarray]:
        """Texts and unit vectors (float32, shape (n, DIM)) for memories of these kinds."""
        texts: list[str] = [""] * len(kinds)
        vecs = np.empty((len(kinds), DIM), dtype=np.float32)
        for kind in set(kinds):
            if kind not in self.pool_texts:
                n = self.pool_size if kind == "summary" else max(16, self.pool_size // 8)
                pool = [memory_text(self.rng, kind) for _ in range(n)]
                self.pool_texts[kind] = pool
                self.pool_vecs[kind] = await embed_batched(self.embeddings, pool)
            idx = [i for i, k in enumerate(kinds) if k == kind]
            pick = self.np_rng.integers(0, len(self.pool_texts[kind]), size=len(idx))
            for i, j in zip(idx, pick, strict=True):
                texts[i] = self.pool_texts[kind][j]
            noise = self.np_rng.normal(0.0, PERTURB_SIGMA, size=(len(idx), DIM))
            vecs[idx] = self.pool_vecs[kind][pick] + noise.astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return texts, vecs


_NS = uuid.UUID("2b7f7f5e-3f61-4a43-9d7e-0d5f0c1b2a90")
COPY_COLUMNS = ("langchain_id", "content", "embedding", "user_id", "thread_id", "kind",
                "importance", "created_at", "last_accessed_at", "access_count", "source_ids",
                "stored_at")  # fmt: skip
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
    max_turns: int = MAX_SEEDED_TURNS,
) -> dict[str, float]:
    """COPY the user's seeded memories ``start..stop-1`` (0 = newest) into the table.

    History runs backwards from ``anchor`` in 5-minute steps, so topping a user up later
    adds older memories and never changes which reflection is the latest. Summaries
    carry 5 message ids as provenance, reflections the ids of the 10 summaries before.
    The summaries among the newest ``max_turns / 5`` memories also get their 5 raw
    turns, logged and indexed as `EpisodeLog` stores them, so recall searches turns too.
    """
    stats = {"rows": 0, "turns": 0, "embed_s": 0.0, "copy_s": 0.0}
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
            turned: list[int] = []
            async with conn.cursor() as cur:
                async with cur.copy(f'COPY "{TABLE}" ({cols}) FROM STDIN') as copy:
                    for n, i in enumerate(range(lo, hi)):
                        kind = kinds[n]
                        ts = anchor - SEED_STEP * i
                        if kind == "reflection":
                            sources = [str(_seed_id(user_id, j)) for j in range(i + 1, i + 11)]
                            importance = 0.9
                        elif i < max_turns // TURNS_PER_SUMMARY:
                            sources = [f"turn-{i}-{k}" for k in range(TURNS_PER_SUMMARY)]
                            turned.append(i)
                            importance = 0.5
                        else:
                            sources = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(5)]
                            importance = 0.5
                        thread = None if kind == "reflection" else f"seed-{i // 40}"
                        vec = _vector_literal(vecs[n])
                        row = (_seed_id(user_id, i), texts[n], vec, user_id, thread, kind)
                        await copy.write_row((*row, importance, ts, None, 0, sources, ts))
            stats["turns"] += await _seed_turns(conn, user_id, turned, vectors, anchor)
            await conn.commit()
            stats["copy_s"] += time.perf_counter() - t0
            stats["rows"] += hi - lo
    return stats


async def _seed_turns(
    conn: psycopg.AsyncConnection,
    user_id: str,
    summaries: list[int],
    vectors: VectorSource,
    anchor: datetime,
) -> int:
    """Log and index the raw turns of the seeded summaries ``summaries``."""
    keys = [(i, k) for i in summaries for k in range(TURNS_PER_SUMMARY)]
    if not keys:
        return 0
    texts, vecs = await vectors.make(["summary"] * len(keys))
    rows = []
    for n, (i, k) in enumerate(keys):
        ts = anchor - SEED_STEP * i + timedelta(seconds=k)
        role = "human" if k % 2 == 0 else "ai"
        rows.append((f"seed-{i // 40}", f"turn-{i}-{k}", role, texts[n], ts, vecs[n]))
    async with conn.cursor() as cur:
        columns = "user_id, thread_id, message_id, role, content, ts, summarized"
        async with cur.copy(f"COPY episodes ({columns}) FROM STDIN") as copy:
            for thread, mid, role, text, ts, _ in rows:
                await copy.write_row((user_id, thread, mid, role, text, ts, True))
        columns = "user_id, thread_id, message_id, embedding, content, ts"
        async with cur.copy(f'COPY "{TURN_TABLE}" ({columns}) FROM STDIN') as copy:
            for thread, mid, role, text, ts, vec in rows:
                speaker = "user" if role == "human" else "assistant"
                content = f"{speaker}: {text}"
                await copy.write_row((user_id, thread, mid, _vector_literal(vec), content, ts))
        # the turns' entity edges, as `EpisodeIndex.index` writes them with each turn
        await cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{ENTITY_TABLE}"',))
        if (await cur.fetchone())[0]:
            columns = "user_id, entity, thread_id, message_id"
            async with cur.copy(f'COPY "{ENTITY_TABLE}" ({columns}) FROM STDIN') as copy:
                for thread, mid, role, text, _, _ in rows:
                    speaker = "user" if role == "human" else "assistant"
                    for key in entity_keys(f"{speaker}: {text}"):
                        await copy.write_row((user_id, key, thread, mid))
    return len(rows)


async def drop_hnsw(database_url: str) -> None:
    """Drop the HNSW indexes before a bulk load (rebuilt by `build_hnsw`)."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for index in (HNSW_INDEX, TURN_HNSW_INDEX):
            await conn.execute(f'DROP INDEX IF EXISTS "{index}"')


async def build_hnsw(database_url: str) -> dict[str, Any]:
    """(Re)build the indexes exactly as `MemoryStore.open` defines them, then VACUUM ANALYZE."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:

        async def one(sql: str, *params: Any) -> Any:
            return (await (await conn.execute(sql, params or None)).fetchone())[0]

        await conn.execute(f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        t0 = time.perf_counter()
        for table in (TABLE, TURN_TABLE):
            await conn.execute(hnsw_index(table))
        t1 = time.perf_counter()
        for table in (f'"{TABLE}"', f'"{TURN_TABLE}"', "episodes"):
            await conn.execute(f"VACUUM (ANALYZE) {table}")
        t2 = time.perf_counter()
        rows = await one(f'SELECT count(*) FROM "{TABLE}"')
        turns = await one(f'SELECT count(*) FROM "{TURN_TABLE}"')
        size = await one("SELECT pg_relation_size(%s::regclass)", HNSW_INDEX)
    return {"build_s": round(t1 - t0, 3), "vacuum_analyze_s": round(t2 - t1, 3),
            "table_rows": int(rows), "turn_rows": int(turns), "index_mb": round(size / 2**20, 1),
            "maintenance_work_mem": MAINTENANCE_WORK_MEM}  # fmt: skip


async def seed_size(
    database_url: str, user_id: str, seeded: int, size: int, others: list[str], per_other: int,
    vectors: VectorSource, anchor: datetime, say: Callable[[str], None] = lambda _message: None,
) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """Top ``user_id`` up from ``seeded`` to ``size`` memories, ``others`` to ``per_other``.

    The HNSW indexes are dropped for the load and rebuilt after it (also when it fails).
    Returns (seeding stats, `build_hnsw`'s).
    """
    stats: dict[str, Any] = {"bench_user_rows": 0, "other_rows": 0, "vector_s": 0.0, "copy_s": 0.0}
    await drop_hnsw(database_url)
    try:
        if size > seeded:
            say(f"seeding {size - seeded} memories for {user_id}")
        if others:
            say(f"seeding {len(others)} other users x {per_other} memories")
        users = [(user_id, seeded, size)] * (size > seeded) + [(o, 0, per_other) for o in others]
        for user, start, stop in users:
            st = await seed_user(database_url, user, start, stop, vectors, anchor)
            if user == user_id:
                stats["bench_user_rows"], stats["bench_user_turns"] = st["rows"], st["turns"]
            else:
                stats["other_rows"] += st["rows"]
            stats["vector_s"] += st["embed_s"]
            stats["copy_s"] += st["copy_s"]
    except BaseException:  # never leave the table without its index
        await build_hnsw(database_url)
        raise
    say("building the HNSW index")
    index = await build_hnsw(database_url)
    stats = {k: round(v, 3) if isinstance(v, float) else v for k, v in stats.items()}
    return {**stats, "vectors": vectors.mode}, index
