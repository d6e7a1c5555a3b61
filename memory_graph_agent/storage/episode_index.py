"""Searching the episodic log: index raw turns (vector + full text), then find them.

A mixin of `episodes.EpisodeLog`: one row per summarized human or AI message in
``episode_vectors_<dim>``, searched densely (HNSW) and by keyword (GIN), always per user.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.storage import nearest_turns
from memory_graph_agent.storage.entity_links import EntityLinks
from memory_graph_agent.storage.memory_rows import VectorLiteral, _vector_literal
from memory_graph_agent.storage.nearest_turns import _DENSE_SQL, _KNN_SQL
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Database, Statement
from memory_graph_agent.storage.window import StoredMessage, parse_ts

EMBED_WORDS = 150  # keeps the date and speaker within MiniLM's 256 word pieces
INDEXED_ROLES = ("human", "ai")
_SPEAKERS = {"human": "user", "ai": "assistant"}
_QUERY_WORD = re.compile(r"[^\W_]+")
MAX_QUERY_WORDS = 32
ADJACENT_LOOKAHEAD = 4
"""Messages with text looked at on each side for the adjacent turn (whitespace-only skipped)."""
SPEAKER_SQL = "lower(split_part(content, ': ', 1))"
"""A stored turn's speaker, lower-cased (the ``Speaker`` of ``Speaker: text``); indexed per user."""
MAX_SPEAKER_WORDS = 64
"""The query words tried as speakers' names at most (`dense_statements`)."""
SERIAL = "SET LOCAL max_parallel_workers_per_gather = 0"
"""A user's search is one backend's work: a parallel plan's workers cost more than they save."""
KEYWORD_CANDIDATES = 1000  # about how many turns the keyword channel scores at most
BM25_K1, BM25_B = 1.2, 0.75


def speaker(message: StoredMessage) -> str:
    """Who said it: the message's ``name`` if set, else ``user`` / ``assistant``."""
    return message.name or _SPEAKERS.get(message.role, message.role)


def episode_content(message: StoredMessage) -> str:
    """The indexed (and recalled) text of a message: ``Speaker: text``."""
    return f"{speaker(message)}: {message.content}"


def embedding_text(content: str, ts: datetime) -> str:
    """What is embedded: ``[YYYY-MM-DD] Speaker: text``, cut to `EMBED_WORDS` words."""
    words = content.split()
    body = content if len(words) <= EMBED_WORDS else " ".join(words[:EMBED_WORDS])
    return f"[{ts.date().isoformat()}] {body}"


def contextual_vectors(
    own: Sequence[Sequence[float]],
    before: Sequence[float] | None,
    after: Sequence[float] | None,
    weight: float,
) -> list[list[float]]:
    """Each turn's stored vector: its own plus ``weight`` times each adjacent turn's.

    ``own`` are consecutive turns' embeddings in log order; ``before`` / ``after`` the
    embeddings of the turns just outside them (``None`` at the thread's ends). The sum is
    normalized to unit length (cosine search). With ``weight`` 0 the vectors are unchanged.
    A short answer ("Yes, last Saturday!") then also sits near the question it answers.
    """
    if weight < 0:
        raise ValueError(f"weight must be >= 0, got {weight}")
    vectors = [np.asarray(v, dtype=np.float64) for v in own]
    if weight == 0 or not vectors:
        return [v.tolist() for v in vectors]
    around = [before, *vectors, after]
    out = []
    for i, v in enumerate(vectors):
        mixed = v.copy()
        for side in (around[i], around[i + 2]):
            if side is not None:
                mixed += weight * np.asarray(side, dtype=np.float64)
        norm = float(np.linalg.norm(mixed))
        out.append((mixed / norm if norm > 0 else v).tolist())
    return out


def keyword_terms(text: str) -> list[str]:
    """The query's distinct words, lower-cased, letters and digits only (tsquery-safe)."""
    return list(dict.fromkeys(w.lower() for w in _QUERY_WORD.findall(text)))[:MAX_QUERY_WORDS]


def _to_message(row: dict) -> StoredMessage:
    ts = row["ts"].isoformat()
    return StoredMessage(row["message_id"], row["role"], row["content"], ts, name=row["name"])


@dataclass
class EpisodeHit:
    """One raw turn found by the dense or the keyword channel."""

    thread_id: str
    message_id: str
    content: str
    ts: datetime
    similarity: float | None = None
    keyword_score: float | None = None
    hops: int | None = None
    """A neighbour's distance in turns from the turn that linked it (`episode_links`)."""


_KEYWORD_SQL = (
    "WITH terms AS ("
    "  SELECT DISTINCT lex, quote_literal(lex)::tsquery AS tq "
    "  FROM unnest(tsvector_to_array(to_tsvector('english', :words))) AS lex), "
    # corpus statistics kept per user on every write (`corpus_statistics`): no scan
    "corpus AS MATERIALIZED ("
    "  SELECT COALESCE(u.n, 0) AS n, COALESCE(u.total_len::numeric / NULLIF(u.n, 0), 1) AS avglen "
    '  FROM (SELECT) AS one LEFT JOIN "{table}_corpus" u ON u.user_id = :user_id), '
    "counts AS MATERIALIZED ("
    "  SELECT t.lex, t.tq, COALESCE(d.df, 0) AS df FROM terms t "
    '  LEFT JOIN "{table}_terms" d ON d.user_id = :user_id AND d.lex = t.lex), '
    "weights AS MATERIALIZED ("
    "  SELECT w.lex, w.tq, w.df, ln(1 + (c.n - w.df + 0.5) / (w.df + 0.5)) AS idf, "
    "  sum(w.df) OVER (ORDER BY w.df, w.lex) AS reach "
    "  FROM counts w CROSS JOIN corpus c), "
    # candidates: turns with one of the rarest words, as long as they are expected to
    # number at most :cap (the rarest word always counts)
    "selective AS ("
    "  SELECT string_agg(quote_literal(lex), ' | ')::tsquery AS q FROM weights "
    "  WHERE reach <= :cap OR df = (SELECT min(df) FROM weights)), "
    "hits AS MATERIALIZED ("
    "  SELECT e.thread_id, e.message_id, e.content, e.ts, e.tsv || ''::tsvector AS tsv "
    '  FROM "{table}" e WHERE e.user_id = :user_id AND e.tsv @@ (SELECT q FROM selective)) '
    "SELECT h.thread_id, h.message_id, h.content, h.ts, "
    "  (SELECT sum(w.idf) FROM weights w WHERE h.tsv @@ w.tq) * (:k1 + 1) "
    "  / (1 + :k1 * (1 - :b + :b * length(h.tsv) / c.avglen)) AS score "
    "FROM hits h CROSS JOIN corpus c "
    "ORDER BY score DESC, h.ts DESC, h.message_id, h.thread_id LIMIT :k"
)
"""BM25-like keyword search of `EpisodeIndex.keyword_search` (``{table}``: the vector table)."""


def dense_hits(rows: list[dict[str, Any]]) -> list[EpisodeHit]:
    """The hits of `EpisodeIndex.dense_statements`' rows, nearest first."""
    # relaxed_order may return them slightly out of order
    return sorted(map(episode_hit, rows), key=lambda h: -(h.similarity or 0.0))


def keyword_hits(rows: list[dict[str, Any]]) -> list[EpisodeHit]:
    """The hits of `EpisodeIndex.keyword_statement`'s rows, best first."""
    return list(map(episode_hit, rows))


def episode_hit(row: dict[str, Any]) -> EpisodeHit:
    """The turn of a row (``distance`` or ``score`` when the row is a search's hit)."""
    distance = row.get("distance")
    return EpisodeHit(
        thread_id=row["thread_id"],
        message_id=row["message_id"],
        content=row["content"],
        ts=row["ts"],
        similarity=None if distance is None else 1.0 - float(distance),
        keyword_score=None if row.get("score") is None else float(row["score"]),
        hops=row.get("hops"),
    )


@guarded("postgres")
class EpisodeIndex:
    """Index and search the raw turns of every user, always per user."""

    db: Database
    dim: int | None
    vector_table: str | None
    query_options: list[str]
    entities: EntityLinks | None

    async def index(
        self,
        user_id: str,
        thread_id: str,
        messages: list[StoredMessage],
        embeddings: Embeddings,
        context_weight: float = 0.0,
    ) -> int:
        """Embed and upsert the (already logged) human and AI messages with text; count them.

        ``messages`` are consecutive in the log. With ``context_weight`` above 0 each
        stored vector also carries that share of the adjacent turns' embeddings
        (`contextual_vectors`), the turns just outside ``messages`` read from the log: a
        turn's vector is the same however the turns were batched, as long as the turn
        after it is logged (a session end indexes the newest turn before any later one).
        """
        table = self._table()
        validate_id(user_id, "user_id")
        validate_id(thread_id, "thread_id")
        keep = [m for m in messages if m.role in INDEXED_ROLES and m.content.strip()]
        if not keep:
            return 0
        stamps = [parse_ts(m.ts) for m in keep]
        contents = [episode_content(m).replace("\x00", "") for m in keep]
        texts = [embedding_text(c, t) for c, t in zip(contents, stamps, strict=True)]
        before, after = (
            await self._adjacent(user_id, thread_id, keep[0].id, keep[-1].id)
            if context_weight > 0
            else (None, None)
        )
        head, tail = (
            [embedding_text(episode_content(m), parse_ts(m.ts))] if m else []
            for m in (before, after)
        )
        embedded = await embeddings.aembed_documents(head + texts + tail)  # one batch
        vectors = contextual_vectors(
            embedded[len(head) : len(head) + len(texts)],
            embedded[0] if head else None,
            embedded[-1] if tail else None,
            context_weight,
        )
        ids = [m.id for m in keep]
        await self.db.run(
            (
                f'INSERT INTO "{table}" (user_id, thread_id, message_id, embedding, content, ts) '
                "SELECT :user_id, :thread_id, m.id, CAST(m.v AS halfvec), m.content, m.ts "
                "FROM unnest(CAST(:ids AS text[]), CAST(:vectors AS text[]), "
                "CAST(:contents AS text[]), CAST(:ts AS timestamptz[])) AS m(id, v, content, ts) "
                "ON CONFLICT (user_id, thread_id, message_id) DO UPDATE SET "
                "embedding = EXCLUDED.embedding, content = EXCLUDED.content, ts = EXCLUDED.ts",
                {
                    "user_id": user_id,
                    "thread_id": thread_id,
                    "ids": ids,
                    "vectors": [_vector_literal(v) for v in vectors],
                    "contents": contents,
                    "ts": stamps,
                },
            ),
            # the turns' entity edges, in the same transaction (`entity_links`)
            *self._entities().write_statements(user_id, thread_id, ids, contents),
        )
        return len(keep)

    async def _adjacent(
        self, user_id: str, thread_id: str, first: str, last: str
    ) -> tuple[StoredMessage | None, StoredMessage | None]:
        """The indexable turns logged just before ``first`` and just after ``last``."""
        side = (
            "(SELECT {tag} AS side, n.seq, n.message_id, n.role, n.name, n.content, n.ts "
            "FROM episodes n WHERE n.user_id = :user_id AND n.thread_id = :thread_id "
            # an AI message that only calls tools has no text: it is no turn
            "AND n.role = ANY(CAST(:roles AS text[])) AND n.content <> '' "
            "AND n.seq {op} (SELECT e.seq FROM episodes e "
            "WHERE e.user_id = :user_id AND e.thread_id = :thread_id AND e.message_id = :{end}) "
            "ORDER BY n.seq {order} LIMIT :look)"
        )
        rows = await self.db.query(
            side.format(tag="'before'", op="<", end="first", order="DESC")
            + " UNION ALL "
            + side.format(tag="'after'", op=">", end="last", order="ASC"),
            {
                "user_id": user_id,
                "thread_id": thread_id,
                "first": first,
                "last": last,
                "roles": list(INDEXED_ROLES),
                "look": ADJACENT_LOOKAHEAD,
            },
        )
        found: dict[str, StoredMessage] = {}
        # nearest first on each side; a whitespace-only message is no turn (`index`)
        for row in sorted(rows, key=lambda r: -r["seq"] if r["side"] == "before" else r["seq"]):
            if row["side"] not in found and row["content"].strip():
                found[row["side"]] = _to_message(row)
        return found.get("before"), found.get("after")

    async def index_batch(
        self,
        user_id: str,
        thread_id: str,
        ids: list[str],
        embeddings: Embeddings,
        context_weight: float = 0.0,
    ) -> int:
        """Index the logged messages with these ids (a stored summary's sources)."""
        messages = await self.messages(user_id, thread_id, ids)
        return await self.index(user_id, thread_id, messages, embeddings, context_weight)

    async def backfill(
        self,
        embeddings: Embeddings,
        user_id: str | None = None,
        batch: int = 256,
        context_weight: float = 0.0,
    ) -> int:
        """Index summarized messages that have no vector yet (a failed index step); count them.

        With ``context_weight`` (as `index`) each message is indexed on its own, its
        adjacent turns read from the log; without, a thread's messages go in one batch.
        """
        table = self._table()
        where = "AND e.user_id = :user_id " if user_id else ""
        total = 0
        while True:
            rows = await self.db.query(
                "SELECT e.user_id, e.thread_id, e.message_id, e.role, e.name, e.content, e.ts "
                f'FROM episodes e LEFT JOIN "{table}" v USING (user_id, thread_id, message_id) '
                "WHERE e.summarized AND v.message_id IS NULL "
                "AND e.role = ANY(CAST(:roles AS text[])) AND e.content <> '' "
                f"{where}ORDER BY e.user_id, e.thread_id, e.seq LIMIT :batch",
                {
                    "user_id": validate_id(user_id, "user_id") if user_id else None,
                    "roles": list(INDEXED_ROLES),
                    "batch": batch,
                },
            )
            if not rows:
                return total
            groups: dict[tuple[str, str], list[StoredMessage]] = {}
            for r in rows:
                groups.setdefault((r["user_id"], r["thread_id"]), []).append(_to_message(r))
            done = 0
            for (user, thread), msgs in groups.items():
                # the missing ones need not be adjacent: alone, each reads its neighbours
                for part in [[m] for m in msgs] if context_weight > 0 else [msgs]:
                    done += await self.index(user, thread, part, embeddings, context_weight)
            if not done:  # only whitespace-only messages left
                return total
            total += done

    async def dense_search(self, user_id: str, vector: list[float], k: int) -> list[EpisodeHit]:
        """The user's ``k`` indexed turns nearest to ``vector`` (cosine), nearest first."""
        return dense_hits(await self.db.run(*self.dense_statements(user_id, vector, k)))

    def dense_statements(
        self, user_id: str, vector: list[float] | VectorLiteral, k: int
    ) -> list[Statement]:
        """The HNSW options and the kNN query of `dense_search` (rows for `dense_hits`)."""
        params = {"user_id": validate_id(user_id, "user_id"), "q": _vector_literal(vector), "k": k}
        params["exact"] = nearest_turns.EXACT_TURNS
        return [*self._dense_options(k), (_DENSE_SQL.format(table=self._table()), params)]

    def speaker_statements(
        self,
        user_id: str,
        vector: list[float] | VectorLiteral,
        k: int,
        speakers: Sequence[str],
        speaker_k: int,
    ) -> list[Statement] | None:
        """The ``speaker_k`` turns nearest to ``vector`` said by any of ``speakers``.

        ``speakers``: words that may name one (`entities.speaker_names`; the first
        `MAX_SPEAKER_WORDS`), scanned only if one of them spoke (a probe of the index first).
        """
        words = list(dict.fromkeys(w for w in speakers if w))[:MAX_SPEAKER_WORDS]
        if speaker_k <= 0 or not words:
            return None
        table, probe = self._table(), SPEAKER_SQL.replace("content", "s.content")
        named = (
            f"AND {SPEAKER_SQL} = ANY(CAST(:speakers AS text[])) AND EXISTS (SELECT 1 FROM "
            f'"{table}" s WHERE s.user_id = :user_id AND {probe} = ANY(CAST(:speakers AS text[]))) '
        )
        params = {"user_id": validate_id(user_id, "user_id"), "q": _vector_literal(vector)}
        params.update(k=speaker_k, speakers=words)
        return [*self._dense_options(k), (_KNN_SQL.format(table=table, where=named), params)]

    def _dense_options(self, k: int) -> list[Statement]:
        ef_search = f"SET LOCAL hnsw.ef_search = {min(1000, max(100, int(k)))}"
        # No parallel sort: its workers would start before the one-time filter that skips it
        return [ef_search, SERIAL, *(f"SET LOCAL {p}" for p in self.query_options)]

    async def keyword_search(self, user_id: str, text: str, k: int) -> list[EpisodeHit]:
        """The user's ``k`` best indexed turns for any word of ``text``, best first.

        BM25-like, so a rare word ("XJ-9000") outweighs a common speaker name; corpus
        statistics kept on write (`corpus_stats`) and candidates chosen by the rarest
        words keep long logs cheap.
        """
        statement = self.keyword_statement(user_id, text, k)
        return [] if statement is None else keyword_hits(await self.db.run(statement))

    def keyword_statement(self, user_id: str, text: str, k: int) -> Statement | None:
        """The query of `keyword_search` (``None`` for a text without words)."""
        terms = keyword_terms(text)
        if not terms:
            return None
        return (
            _KEYWORD_SQL.format(table=self._table()),
            {
                "user_id": validate_id(user_id, "user_id"),
                "words": " ".join(terms),
                "cap": KEYWORD_CANDIDATES,
                "k1": BM25_K1,
                "b": BM25_B,
                "k": k,
            },
        )
