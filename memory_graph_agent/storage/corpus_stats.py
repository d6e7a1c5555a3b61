"""Per-user corpus statistics of the indexed turns, kept on every write for the keyword channel.

BM25 needs, per user, the number of indexed turns, their summed length and each word's
document frequency. Reading them from the turns themselves (a sample of ``tsvector``s and
a count) was most of the keyword search at 100k turns. Two small tables hold them instead,
``<table>_corpus`` (user_id, n, total_len) and ``<table>_terms`` (user_id, lex, df), kept
exact by statement-level triggers on the turns' table: every insert, upsert, update and
delete (also a cascade from ``episodes`` or a forgotten user) adds or subtracts its rows'
counts in the same transaction. A word or user whose count falls to zero is deleted, so a
forgotten user leaves nothing behind.
"""

from __future__ import annotations


def corpus_tables(table: str) -> tuple[str, str]:
    """The names of ``table``'s per-user statistics: (corpus, terms)."""
    return f"{table}_corpus", f"{table}_terms"


_SIGNED = {
    "INSERT": "SELECT user_id, tsv, 1 AS sign FROM new_rows",
    "DELETE": "SELECT user_id, tsv, -1 AS sign FROM old_rows",
    "UPDATE": "SELECT user_id, tsv, 1 AS sign FROM new_rows "
    "UNION ALL SELECT user_id, tsv, -1 FROM old_rows",
}
"""Each statement's rows, counted +1 (new) or -1 (old), by trigger event."""


def _apply(table: str, rows: str) -> str:
    """Add the signed counts of ``rows`` (`_SIGNED`) to the statistics, in one upsert each.

    In key order, terms before corpus: concurrent writers of one user lock the same rows
    in the same order, so two statements never deadlock.
    """
    corpus, terms = corpus_tables(table)
    return (
        f'INSERT INTO "{terms}" AS s (user_id, lex, df) '
        f"SELECT r.user_id, l.lex, sum(r.sign) FROM ({rows}) r "
        "CROSS JOIN unnest(tsvector_to_array(r.tsv)) AS l(lex) GROUP BY 1, 2 "
        "HAVING sum(r.sign) <> 0 ORDER BY 1, 2 "
        "ON CONFLICT (user_id, lex) DO UPDATE SET df = s.df + EXCLUDED.df;\n"
        f'INSERT INTO "{corpus}" AS s (user_id, n, total_len) '
        f"SELECT r.user_id, sum(r.sign), sum(r.sign * length(r.tsv)) FROM ({rows}) r "
        "GROUP BY 1 ORDER BY 1 ON CONFLICT (user_id) DO UPDATE "
        "SET n = s.n + EXCLUDED.n, total_len = s.total_len + EXCLUDED.total_len;\n"
    )


def _drop_zeros(table: str) -> str:
    corpus, terms = corpus_tables(table)
    return (
        f'DELETE FROM "{terms}" s USING (SELECT DISTINCT r.user_id, l.lex FROM old_rows r '
        "CROSS JOIN unnest(tsvector_to_array(r.tsv)) AS l(lex)) o "
        "WHERE s.user_id = o.user_id AND s.lex = o.lex AND s.df <= 0;\n"
        f'DELETE FROM "{corpus}" s WHERE s.n <= 0 '
        "AND s.user_id IN (SELECT DISTINCT user_id FROM old_rows);\n"
    )


def corpus_statistics(table: str) -> list[str]:
    """DDL of ``table``'s statistics: tables, trigger function, triggers, and a full recount.

    Run again by a migration, it recounts from the turns (the triggers block writers
    to ``table`` from their creation to the commit, so nothing is missed or counted twice).
    """
    corpus, terms = corpus_tables(table)
    function = f"{table}_count_terms"
    branches = "".join(
        f"{'IF' if i == 0 else 'ELSIF'} TG_OP = '{op}' THEN\n{_apply(table, rows)}"
        for i, (op, rows) in enumerate(_SIGNED.items())
    )
    body = (
        f"BEGIN\n{branches}END IF;\n"
        f"IF TG_OP <> 'INSERT' THEN\n{_drop_zeros(table)}END IF;\nRETURN NULL;\nEND"
    )
    statements = [
        f'CREATE TABLE IF NOT EXISTS "{corpus}" (user_id TEXT PRIMARY KEY, '
        "n BIGINT NOT NULL, total_len BIGINT NOT NULL)",
        f'CREATE TABLE IF NOT EXISTS "{terms}" (user_id TEXT NOT NULL, lex TEXT NOT NULL, '
        "df BIGINT NOT NULL, PRIMARY KEY (user_id, lex))",
        f'CREATE OR REPLACE FUNCTION "{function}"() RETURNS trigger LANGUAGE plpgsql '
        f"AS $body$\n{body}\n$body$",
    ]
    transitions = {
        "INSERT": "NEW TABLE AS new_rows",
        "UPDATE": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
        "DELETE": "OLD TABLE AS old_rows",
    }
    for op, referencing in transitions.items():
        trigger = f"{table}_count_{op.lower()}"
        statements += [
            f'DROP TRIGGER IF EXISTS "{trigger}" ON "{table}"',
            f'CREATE TRIGGER "{trigger}" AFTER {op} ON "{table}" REFERENCING {referencing} '
            f'FOR EACH STATEMENT EXECUTE FUNCTION "{function}"()',
        ]
    return [
        *statements,
        f'DELETE FROM "{terms}"',
        f'DELETE FROM "{corpus}"',
        f'INSERT INTO "{terms}" (user_id, lex, df) SELECT e.user_id, l.lex, count(*) '
        f'FROM "{table}" e CROSS JOIN unnest(tsvector_to_array(e.tsv)) AS l(lex) GROUP BY 1, 2',
        f'INSERT INTO "{corpus}" (user_id, n, total_len) '
        f'SELECT user_id, count(*), sum(length(tsv)) FROM "{table}" GROUP BY 1',
    ]
