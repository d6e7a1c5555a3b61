"""The keyword channel's per-user corpus statistics (real Postgres): exact after every kind
of write, empty after a forgotten user, the same ranking as the sampled statistics they
replace, and a table of the previous schema converted by its migration."""

from __future__ import annotations

import asyncio
import uuid

from memory_graph_agent.storage.corpus_stats import corpus_tables
from memory_graph_agent.storage.episodes import _SCHEMA, EpisodeLog
from memory_graph_agent.storage.forget import forget_user
from memory_graph_agent.storage.postgres import Database
from memory_graph_agent.storage.window import StoredMessage
from tests.builders import V1_VECTOR_SCHEMA, log_turns

SAMPLED_KEYWORD_SQL = (
    "WITH terms AS ("
    "  SELECT DISTINCT lex, quote_literal(lex)::tsquery AS tq "
    "  FROM unnest(tsvector_to_array(to_tsvector('english', :words))) AS lex), "
    "sample AS MATERIALIZED ("
    "  SELECT tsv || ''::tsvector AS tsv FROM \"{table}\" WHERE user_id = :user_id "
    "  ORDER BY thread_id, message_id LIMIT 1000), "
    "corpus AS MATERIALIZED ("
    "  SELECT s.n, s.avglen, CASE WHEN s.n < 1000 THEN s.n ELSE ("
    '    SELECT count(*) FROM "{table}" WHERE user_id = :user_id) END AS total '
    "  FROM (SELECT count(*) AS n, COALESCE(avg(length(tsv)), 1) AS avglen "
    "        FROM sample) s), "
    "counts AS MATERIALIZED ("
    "  SELECT t.lex, t.tq, (SELECT count(*) FROM sample s WHERE s.tsv @@ t.tq) AS df "
    "  FROM terms t), "
    "weights AS MATERIALIZED ("
    "  SELECT w.lex, w.tq, w.df, ln(1 + (c.n - w.df + 0.5) / (w.df + 0.5)) AS idf, "
    "  sum(w.df) OVER (ORDER BY w.df, w.lex) * c.total / GREATEST(c.n, 1) AS reach "
    "  FROM counts w CROSS JOIN corpus c), "
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
"""The keyword query before the statistics were kept on write (``{table}``: the turns);
once `bench.keyword_identity`, retired with it."""

TURNS = [
    "I keep bees on my balcony in Lisbon.",
    "Bees need water in the summer, keep a shallow bowl on the balcony.",
    "My sister plays the cello in the city orchestra.",
    "The XJ-9000 drone arrived broken, the seller offers a refund.",
    "We painted the kitchen a pale shade of green last spring.",
    "The kitchen tiles came from a market in Porto.",
]
QUESTIONS = [
    "Where do I keep bees?",
    "What happened to the XJ-9000?",
    "kitchen green Porto tiles",
    "bees cello kitchen drone refund",
    "nothing matches zebra",
]


def _user() -> str:
    return f"cs-{uuid.uuid4().hex[:8]}"


async def stored(db: Database, table: str, user: str) -> tuple[dict, dict]:
    """The kept statistics of ``user``: ({lex: df}, {n, total_len} or {})."""
    corpus, terms = corpus_tables(table)
    params = {"u": user}
    df = await db.query(f'SELECT lex, df FROM "{terms}" WHERE user_id = :u', params)
    size = await db.query(f'SELECT n, total_len FROM "{corpus}" WHERE user_id = :u', params)
    return {r["lex"]: r["df"] for r in df}, (size[0] if size else {})


async def recounted(db: Database, table: str, user: str) -> tuple[dict, dict]:
    """The same statistics counted from the user's indexed turns."""
    params = {"u": user}
    df = await db.query(
        f'SELECT l.lex, count(*) AS df FROM "{table}" e '
        "CROSS JOIN unnest(tsvector_to_array(e.tsv)) AS l(lex) WHERE e.user_id = :u GROUP BY 1",
        params,
    )
    size = await db.query(
        f'SELECT count(*) AS n, sum(length(tsv)) AS total_len FROM "{table}" WHERE user_id = :u',
        params,
    )
    return {r["lex"]: r["df"] for r in df}, (size[0] if size[0]["n"] else {})


async def sampled_search(db: Database, table: str, user: str, text: str, k: int) -> list:
    """``(thread, message, score)`` of the keyword query with sampled statistics."""
    statement = EpisodeLog(db, 1).keyword_statement(user, text, k)
    assert statement is not None
    _sql, params = statement
    params = {key: v for key, v in params.items() if key != "sample"}
    rows = await db.query(SAMPLED_KEYWORD_SQL.format(table=table), params)
    return [(r["thread_id"], r["message_id"], float(r["score"])) for r in rows]


async def keyword(episodes: EpisodeLog, user: str, text: str, k: int) -> list:
    hits = await episodes.keyword_search(user, text, k)
    return [(h.thread_id, h.message_id, h.keyword_score) for h in hits]


async def test_statistics_stay_exact_through_inserts_upserts_deletes_and_forget(services):
    db, episodes, table = services.db, services.episodes, services.episodes.vector_table
    user, other = _user(), _user()
    await log_turns(services, other, "t0", *TURNS)
    others = await stored(db, table, other)
    ids = await log_turns(services, user, "t0", *TURNS[:4])
    ids += await log_turns(services, user, "t1", *TURNS[4:], day="2024-03-02")
    assert await stored(db, table, user) == await recounted(db, table, user)
    assert (await stored(db, table, user))[1]["n"] == len(TURNS)

    # an upsert of a turn with new text (ON CONFLICT DO UPDATE): its old words go
    edited = StoredMessage(
        ids[3], "ai", "A refund for the broken quadcopter.", "2024-03-01T10:03:00+00:00"
    )
    await episodes.index(user, "t0", [edited], services.embeddings)
    df, _ = await stored(db, table, user)
    assert "quadcopt" in df and "xj" not in df
    assert (df, _) == await recounted(db, table, user)

    # a delete of logged turns cascades to their index rows
    await db.query(
        "DELETE FROM episodes WHERE user_id = :u AND message_id = ANY(CAST(:ids AS text[]))",
        {"u": user, "ids": ids[:2]},
    )
    assert await stored(db, table, user) == await recounted(db, table, user)
    assert "bee" not in (await stored(db, table, user))[0]

    await forget_user(user, redis=services.redis, db=db, prefix=services.keys.prefix)
    assert await stored(db, table, user) == ({}, {})  # nothing of the user is left
    assert await stored(db, table, other) == others  # nor anyone else's touched


async def test_concurrent_writers_of_one_user_keep_exact_statistics(services):
    db, table = services.db, services.episodes.vector_table
    user = _user()
    ids = await log_turns(services, user, "t-base", *TURNS)
    edits = [
        StoredMessage(i, "human", f"{TURNS[n][::-1]} kitchen bees", "2024-03-01T10:00:00+00:00")
        for n, i in enumerate(ids)
        if n  # the first is deleted meanwhile
    ]
    await asyncio.gather(
        *(log_turns(services, user, f"t{n}", *TURNS[n:], *TURNS[:n]) for n in range(6)),
        services.episodes.index(user, "t-base", edits, services.embeddings),
        services.db.query(
            "DELETE FROM episodes WHERE user_id = :u AND thread_id = 't-base' AND message_id = :m",
            {"u": user, "m": ids[0]},
        ),
    )
    assert await stored(db, table, user) == await recounted(db, table, user)


async def test_ranking_is_the_sampled_statistics_ranking_below_the_sample(services):
    db, table = services.db, services.episodes.vector_table
    user, other = _user(), _user()
    await log_turns(services, other, "t0", *TURNS[::-1])
    await log_turns(services, user, "t0", *TURNS[:3])
    await log_turns(services, user, "t1", *TURNS[3:], day="2024-03-02")
    for question in QUESTIONS:
        expected = await sampled_search(db, table, user, question, 4)
        assert await keyword(services.episodes, user, question, 4) == expected, question


async def test_the_migration_converts_a_table_of_the_previous_schema(fresh_db):
    db, dim = fresh_db, 3
    table = f"episode_vectors_{dim}"
    await db.query("CREATE EXTENSION IF NOT EXISTS vector")
    await db.migrate("episodes", 1, *_SCHEMA)
    await db.migrate(table, 1, *(s.format(table=table, dim=dim) for s in V1_VECTOR_SCHEMA))
    users = [_user(), _user()]
    # long turns of distinct words: their tsvectors do not fit the row, they go to TOAST
    words = [f"w{n}x{uuid.uuid4().hex[:6]}" for n in range(2000)]
    turns = [
        (u, f"m{i}", " ".join(words[i * 150 : (i + 1) * 150]))
        for i in range(12)
        for u in users[: 1 + i % 2]
    ]
    for user, mid, text in turns:
        await db.query(
            "INSERT INTO episodes (user_id, thread_id, message_id, role, content, ts) "
            "VALUES (:u, 't', :m, 'human', :c, now())",
            {"u": user, "m": mid, "c": text},
        )
        await db.query(
            f'INSERT INTO "{table}" (user_id, thread_id, message_id, embedding, content, ts) '
            "VALUES (:u, 't', :m, '[1,0,0]', :c, now())",
            {"u": user, "m": mid, "c": text},
        )
    outside = f'SELECT count(*) AS n FROM "{table}" WHERE pg_column_toast_chunk_id(tsv) IS NOT NULL'
    assert (await db.query(outside))[0]["n"] == len(turns)
    questions = [" ".join(words[i * 150 + 3 : i * 150 + 6]) + " w7x" for i in range(12)]
    before = {(u, q): await sampled_search(db, table, u, q, 5) for u in users for q in questions}

    episodes = await EpisodeLog.open(db, dim)

    storage = await db.query(
        "SELECT attstorage FROM pg_attribute "
        f"WHERE attrelid = '\"{table}\"'::regclass AND attname = 'tsv'"
    )
    assert storage[0]["attstorage"] == "m"
    assert (await db.query(outside))[0]["n"] == 0  # every tsvector is in its row now
    for user in users:
        assert await stored(db, table, user) == await recounted(db, table, user)
        for q in questions:
            assert await keyword(episodes, user, q, 5) == before[user, q]
    indexes = await db.query(f"SELECT indexname FROM pg_indexes WHERE tablename = '{table}'")
    assert {f"{table}_tsv", f"{table}_hnsw"} <= {r["indexname"] for r in indexes}
    # opened again: nothing to do (no rewrite, no recount)
    assert not await db.migrate(table, 2)
