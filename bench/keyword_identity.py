"""The keyword channel on LoCoMo: statistics kept on write against the sampled ones they replaced.

python -m bench keyword_identity [--data PATH] [--k 60]
"""

from __future__ import annotations

import argparse
import contextlib

from bench.env import isolated_services
from bench.harness import main
from bench.locomo import DEFAULT_DATA
from bench.locomo_data import load_locomo
from memory_graph_agent.storage.episodes import EpisodeLog
from memory_graph_agent.storage.postgres import Database

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
"""The keyword query before the statistics were kept on write (``{table}``: the turns)."""


async def compare(data: str, k: int) -> tuple[int, int]:
    """(questions with identical results, questions with words) over the LoCoMo file."""
    conversations, _defects = load_locomo(data)
    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(isolated_services(tag="bench_keyword"))
        db = Database.connect(env.database_url)
        stack.push_async_callback(db.aclose)
        await db.query("CREATE EXTENSION IF NOT EXISTS vector")
        log = await EpisodeLog.open(db, 3)
        for conv in conversations:
            params = {
                "u": conv.user_id,
                "t": conv.thread_id,
                "ids": [f"{conv.user_id}-{i}" for i in range(len(conv.turns))],
                "texts": [f"{t.speaker}: {t.text}".replace("\x00", "") for t in conv.turns],
            }
            rows = "unnest(CAST(:ids AS text[]), CAST(:texts AS text[])) WITH ORDINALITY"
            await db.query(
                "INSERT INTO episodes (user_id, thread_id, message_id, role, content, ts) "
                f"SELECT :u, :t, m.id, 'human', m.c, now() FROM {rows} AS m(id, c, o)",
                params,
            )
            await db.query(
                f'INSERT INTO "{log.vector_table}" '
                "(user_id, thread_id, message_id, embedding, content, ts) "
                "SELECT :u, :t, m.id, '[1,0,0]', m.c, now() + m.o * interval '1 second' "
                f"FROM {rows} AS m(id, c, o)",
                params,
            )
        same = total = 0
        old = SAMPLED_KEYWORD_SQL.format(table=log.vector_table)
        for conv in conversations:
            for question in conv.questions:
                statement = log.keyword_statement(conv.user_id, question.text, k)
                if statement is None:
                    continue
                sql, params = statement
                total += 1
                a, b = [await db.query(q, params) for q in (sql, old)]
                same += [(r["message_id"], float(r["score"])) for r in a] == [
                    (r["message_id"], float(r["score"])) for r in b
                ]
    return same, total


COMMON = ()


def flags(p: argparse.ArgumentParser) -> None:
    """The data and how many turns each question ranks."""
    p.add_argument("--data", default=DEFAULT_DATA, help="LoCoMo-format JSON file")
    p.add_argument("--k", type=int, default=60, help="turns per question")


async def run(a: argparse.Namespace) -> bool:
    """Compare and print; true when every question ranks the same both ways."""
    same, total = await compare(a.data, a.k)
    print(f"identical ranked turns and scores for {same} of {total} questions (k = {a.k})")
    return same == total


if __name__ == "__main__":
    raise SystemExit(main("keyword_identity"))
