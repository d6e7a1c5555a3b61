"""How vectors are stored and indexed: ``halfvec``, 2 bytes a dimension, under HNSW.

A 384-d MiniLM vector takes 776 bytes as ``halfvec`` against 1,544 as ``vector`` (float32),
in the row and again in the HNSW index. Half precision keeps about three significant
digits, far finer than the gaps between the cosine similarities recall ranks by; the
recall benchmarks (``bench.locomo``, ``bench.longmemeval``) are unchanged by it. Every
query casts its vector to ``halfvec`` (`DISTANCE`), so the ``halfvec_cosine_ops`` index
serves the ``ORDER BY``. A table of an earlier version (``vector``) is converted in
place by its migration (`to_halfvec`).
"""

from __future__ import annotations

HNSW_M = 24
"""Neighbours per node of the HNSW graph (pgvector's default is 16).

Built from half-precision vectors with 16, a graph of 5,000 vectors crowded around one
direction (``tests/integration_tests/test_many_users.py``) left 0.5 to 0.7 % of them
unreachable from its entry point, so no scan could return them; with ``vector`` and 16,
or ``halfvec`` and 24, none. The index is 4 % larger than with 16, still 40 % smaller
than the ``vector`` one.
"""
DISTANCE = "embedding <=> CAST(:q AS halfvec)"
"""The cosine distance of a row's vector to the query's (``:q``, a vector literal)."""


def column(dim: int) -> str:
    """The type of a table's ``embedding`` column."""
    return f"halfvec({dim})"


def hnsw_index(table: str) -> str:
    """DDL of ``table``'s HNSW index (``<table>_hnsw``) on its ``embedding``, if missing."""
    return (
        f'CREATE INDEX IF NOT EXISTS "{table}_hnsw" ON "{table}" '
        f"USING hnsw (embedding halfvec_cosine_ops) WITH (m = {HNSW_M})"
    )


def to_halfvec(table: str, dim: int) -> str:
    """DDL that converts ``table``'s ``embedding`` from ``vector`` to ``halfvec`` once.

    The old HNSW index is dropped first (its operator class is of ``vector``); run
    `hnsw_index` after it. The table is rewritten, so writers wait for it. A table already
    of ``halfvec`` is left alone.
    """
    return (
        "DO $$ BEGIN IF (SELECT atttypid FROM pg_attribute "
        f"WHERE attrelid = '\"{table}\"'::regclass AND attname = 'embedding') "
        "= 'vector'::regtype THEN "
        f'DROP INDEX IF EXISTS "{table}_hnsw"; '
        f'ALTER TABLE "{table}" ALTER COLUMN embedding TYPE {column(dim)} '
        f"USING embedding::{column(dim)}; END IF; END $$"
    )
