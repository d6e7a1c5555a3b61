"""A database written by the previous version (``vector`` columns, ``tsv`` with positions;
real Postgres) is upgraded in place to ``halfvec``: every row kept, recall finds the same
turns and memories, and the searches still read the HNSW index."""

from __future__ import annotations

from memory_graph_agent.services.models import load_embeddings
from memory_graph_agent.storage.corpus_stats import corpus_statistics
from memory_graph_agent.storage.episode_index import episode_content
from memory_graph_agent.storage.episodes import _SCHEMA, EpisodeLog
from memory_graph_agent.storage.memories import FILLFACTOR, MemoryStore
from memory_graph_agent.storage.memory_rows import (
    LIFECYCLE_COLUMNS,
    METADATA_COLUMNS,
    _vector_literal,
    memory_id,
)
from memory_graph_agent.storage.nearest_turns import _KNN_SQL
from memory_graph_agent.storage.window import StoredMessage
from tests.builders import V1_VECTOR_SCHEMA
from tests.conftest import EMBEDDING

TURNS = [
    "I adopted a grey cat called Miso last spring.",
    "Miso sounds lovely! How is she settling in?",
    "My brother Tomas moved to Montreal for a job at a bakery.",
    "A bakery in Montreal, he must be up very early.",
    "I am training for the Lisbon half marathon in October.",
    "Good luck with the marathon training!",
]
MEMORIES = ["The user has a cat named Miso.", "The user runs; Lisbon half marathon."]
QUESTIONS = ["What is my cat called?", "Where does my brother live?", "Which race am I in?"]


def previous_vector_schema(table: str, dim: int) -> list[str]:
    """The turns' table as the previous version made it (its schema version 2)."""
    return [
        *(s.format(table=table, dim=dim) for s in V1_VECTOR_SCHEMA),
        f'ALTER TABLE "{table}" ALTER COLUMN tsv SET STORAGE MAIN',
        *corpus_statistics(table),
    ]


def previous_memory_schema(table: str) -> list[str]:
    """The memories' DDL of the previous version (its schema version 2)."""
    return [
        f'ALTER TABLE "{table}" ALTER COLUMN embedding SET STORAGE PLAIN',
        f'ALTER TABLE "{table}" SET (fillfactor = {FILLFACTOR})',
        f'ALTER TABLE "{table}" ADD COLUMN stored_at TIMESTAMPTZ NOT NULL '
        "DEFAULT clock_timestamp()",
        *(f'ALTER TABLE "{table}" ADD COLUMN {name} {decl}' for name, decl in LIFECYCLE_COLUMNS),
        f'CREATE INDEX "{table}_user_kind" ON "{table}" (user_id, kind, stored_at)',
        f'CREATE INDEX "{table}_hnsw" ON "{table}" USING hnsw (embedding vector_cosine_ops)',
    ]


OLD_KNN = (
    'SELECT {id} AS id FROM "{table}" WHERE user_id = :user_id '
    "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 3"
)


async def _previous_database(db, embeddings, dim: int, user: str) -> None:
    """The previous version's tables, with turns and memories written as it wrote them."""
    turns, memories = f"episode_vectors_{dim}", f"memories_{dim}"
    await db.query("CREATE EXTENSION IF NOT EXISTS vector")
    await db.migrate("episodes", 1, *_SCHEMA)
    await db.migrate(turns, 2, *previous_vector_schema(turns, dim))
    await db.vectors.ainit_vectorstore_table(
        table_name=memories, vector_size=dim, metadata_columns=list(METADATA_COLUMNS)
    )
    await db.migrate(memories, 2, *previous_memory_schema(memories))
    log = EpisodeLog(db, dim)
    messages = [
        StoredMessage(f"m{i}", ("human", "ai")[i % 2], text, f"2024-05-0{i + 1}T10:00:00+00:00")
        for i, text in enumerate(TURNS)
    ]
    await log.append(user, "t1", messages)
    contents = [episode_content(m) for m in messages]
    for m, content, vector in zip(
        messages, contents, await embeddings.aembed_documents(contents), strict=True
    ):
        await db.query(
            f'INSERT INTO "{turns}" (user_id, thread_id, message_id, embedding, content, ts) '
            "VALUES (:u, 't1', :m, CAST(:v AS vector), :c, :ts)",
            {"u": user, "m": m.id, "v": _vector_literal(vector), "c": content, "ts": m.ts},
        )
    for text in MEMORIES:  # as `MemoryStore.add` wrote them (a vector literal)
        await db.query(
            f'INSERT INTO "{memories}" (langchain_id, content, embedding, user_id, kind, '
            "importance, created_at, access_count, source_ids) VALUES (CAST(:id AS uuid), :c, "
            ":v, :u, 'summary', 0.5, now(), 0, ARRAY[:c])",
            {
                "id": memory_id(user, None, "summary", [text]),
                "c": text,
                "v": _vector_literal(await embeddings.aembed_query(text)),
                "u": user,
            },
        )


async def _column(db, table: str) -> tuple[str, str]:
    rows = await db.query(
        "SELECT format_type(a.atttypid, a.atttypmod) AS type, a.attstorage AS storage "
        "FROM pg_attribute a WHERE a.attrelid = CAST(:t AS regclass) AND a.attname = 'embedding'",
        {"t": f'"{table}"'},
    )
    return rows[0]["type"], rows[0]["storage"]


async def test_a_database_of_the_previous_version_is_upgraded_in_place(fresh_db):
    db, user = fresh_db, "upgrade-user"
    embeddings, dim = load_embeddings(EMBEDDING)
    await _previous_database(db, embeddings, dim, user)
    turns, memories = f"episode_vectors_{dim}", f"memories_{dim}"
    assert (await _column(db, turns))[0] == f"vector({dim})"
    vectors = {q: await embeddings.aembed_query(q) for q in QUESTIONS}
    before = {}
    for q, v in vectors.items():
        for table, key in ((turns, "message_id"), (memories, "langchain_id::text")):
            params = {"user_id": user, "q": _vector_literal(v)}
            rows = await db.query(OLD_KNN.format(id=key, table=table), params)
            before[table, q] = [r["id"] for r in rows]
    keyword_before = [
        h.message_id for h in await EpisodeLog(db, dim).keyword_search(user, "Montreal bakery", 2)
    ]
    first = f"SELECT embedding::text AS e FROM \"{turns}\" WHERE message_id = 'm0'"
    old_vector = await db.query(first)

    log = await EpisodeLog.open(db, dim)
    store = await MemoryStore.open(db, embeddings, dim)

    for table in (turns, memories):
        assert await _column(db, table) == (f"halfvec({dim})", "p")  # in the row, as before
        index = await db.query(
            "SELECT indexdef FROM pg_indexes WHERE indexname = :i", {"i": f"{table}_hnsw"}
        )
        assert "halfvec_cosine_ops" in index[0]["indexdef"]
    with_positions = f'SELECT count(*) AS n FROM "{turns}" WHERE tsv <> strip(tsv)'
    assert (await db.query(with_positions))[0]["n"] == 0  # the words kept, not where they are
    assert len(await log.history(user)) == len(TURNS)
    assert (await db.query(f'SELECT count(*) AS n FROM "{turns}"'))[0]["n"] == len(TURNS)
    new_vector = await db.query(first)
    old_values = [float(x) for x in old_vector[0]["e"].strip("[]").split(",")]
    new_values = [float(x) for x in new_vector[0]["e"].strip("[]").split(",")]
    assert max(abs(a - b) for a, b in zip(old_values, new_values, strict=True)) < 1e-3
    for q, v in vectors.items():
        found = await log.dense_search(user, v, 3)
        assert [h.message_id for h in found] == before[turns, q], q
        remembered = await store.search(user, v, 3)
        assert [m.id for m in remembered] == before[memories, q], q
    words = [h.message_id for h in await log.keyword_search(user, "Montreal bakery", 2)]
    assert words == keyword_before and set(words) == {"m2", "m3"}
    # the HNSW index still serves the searches' order (turns: as for a user of many turns)
    literal = _vector_literal(vectors[QUESTIONS[0]])
    knn = (_KNN_SQL.format(table=turns, where=""), {"user_id": user, "q": literal, "k": 3})
    for *options, (sql, params) in (
        [*log.dense_statements(user, vectors[QUESTIONS[0]], 3)[:-1], knn],
        store.search_statements(user, vectors[QUESTIONS[0]], 3),
    ):
        plan = await db.run(
            *options,
            "SET LOCAL enable_seqscan = off",
            "SET LOCAL enable_sort = off",
            ("EXPLAIN " + sql, params),
        )
        nodes = [r["QUERY PLAN"].split("(cost")[0] for r in plan]
        assert any("_hnsw" in n for n in nodes) and not any("Sort" in n for n in nodes), nodes
    # opened again: nothing left to convert
    assert not await db.migrate(turns, 3) and not await db.migrate(memories, 3)
