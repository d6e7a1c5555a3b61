"""Fill the peers' tables of `bench.peers` with our rows, and check the layout.

The very ids, texts, vectors and users of our ``memories_384`` table are copied inside
Postgres into each peer's own table, in the layout the peer's own write path produces:
Mem0's ``add(..., infer=False)`` payload, the LangGraph store's ``store`` +
``store_vectors`` rows of ``aput``, `PGVectorStore`'s ``aadd_texts`` row. `check_layout`
writes one memory through each peer's API and compares its row with a copied one. The
peers' HNSW indexes are dropped during the load and recreated from their own definitions.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from bench.peer_stores import (
    LANGGRAPH,
    LG_NAMESPACE,
    MEM0,
    MEM0_TABLE,
    PGVS,
    PGVS_TABLE,
    PROBE_USER,
    Peer,
)
from bench.seeding import TABLE

MEM0_FILL = f"""
INSERT INTO "{MEM0_TABLE}" (id, vector, payload)
SELECT langchain_id, embedding, jsonb_build_object(
    'user_id', user_id, 'role', 'user', 'data', content, 'hash', md5(content),
    'created_at', to_char(stored_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
    'updated_at', to_char(stored_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
    'text_lemmatized', content)
FROM "{TABLE}" ON CONFLICT (id) DO NOTHING
"""

LG_FILL = (
    f"""
INSERT INTO store (prefix, key, value, created_at, updated_at)
SELECT '{LG_NAMESPACE}.' || user_id, langchain_id::text, jsonb_build_object('text', content),
    stored_at, stored_at
FROM "{TABLE}" ON CONFLICT DO NOTHING
""",
    f"""
INSERT INTO store_vectors (prefix, key, field_name, embedding, created_at, updated_at)
SELECT '{LG_NAMESPACE}.' || user_id, langchain_id::text, 'text', embedding, stored_at, stored_at
FROM "{TABLE}" ON CONFLICT DO NOTHING
""",
)

PGVS_FILL = f"""
INSERT INTO "{PGVS_TABLE}" (langchain_id, content, embedding, user_id, langchain_metadata)
SELECT langchain_id, content, embedding, user_id, '{{}}'::json
FROM "{TABLE}" ON CONFLICT DO NOTHING
"""

FILLS = {
    MEM0: ((MEM0_TABLE,), (MEM0_FILL,)),
    LANGGRAPH: (("store", "store_vectors"), LG_FILL),
    PGVS: ((PGVS_TABLE,), (PGVS_FILL,)),
}
"""Per peer: its tables and the statements that fill them."""


async def fill(
    database_url: str, peers: list[Peer], maintenance_work_mem: str = "1GB"
) -> dict[str, Any]:
    """Copy every row of our table into the tables of ``peers`` (new rows only), timed.

    The peers' HNSW indexes are dropped first and recreated from their own definitions.
    """
    fills = [FILLS[p.name] for p in peers if p.name in FILLS]
    tables = [t for names, _ in fills for t in names]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        cur = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) "
            "AND indexdef ILIKE '%%USING hnsw%%'",
            (tables,),
        )
        indexes = await cur.fetchall()
        for name, _ in indexes:
            await conn.execute(f'DROP INDEX "{name}"')
        t0 = time.perf_counter()
        for _, statements in fills:
            for sql in statements:
                await conn.execute(sql)
        copy_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _, definition in indexes:
            await conn.execute(definition)
        index_s = time.perf_counter() - t0
        for table in tables:
            await conn.execute(f'VACUUM (ANALYZE) "{table}"')
    return {
        "copy_s": round(copy_s, 3),
        "hnsw_build_s": round(index_s, 3),
        "hnsw_indexes": [d for _, d in indexes],
    }


LAYOUT_SQL = {
    MEM0: f"SELECT payload AS row FROM \"{MEM0_TABLE}\" WHERE payload->>'user_id' = %s LIMIT 1",
    LANGGRAPH: "SELECT jsonb_build_object('value', s.value, 'field', "
    "v.field_name) AS row FROM store s JOIN store_vectors v USING (prefix, key) "
    f"WHERE s.prefix = '{LG_NAMESPACE}.' || %s LIMIT 1",
    PGVS: "SELECT jsonb_build_object('metadata', "
    "langchain_metadata, 'user_id', user_id, 'has_embedding', embedding IS NOT NULL) AS row "
    f'FROM "{PGVS_TABLE}" WHERE user_id = %s LIMIT 1',
}


CLEAN_SQL = {
    MEM0: f"DELETE FROM \"{MEM0_TABLE}\" WHERE payload->>'user_id' = %s",
    LANGGRAPH: f"DELETE FROM store WHERE prefix = '{LG_NAMESPACE}.' || %s",
    PGVS: f'DELETE FROM "{PGVS_TABLE}" WHERE user_id = %s',
}


def _shape(row: Any) -> Any:
    """The keys (recursively) and the non-text values of a row: what a layout is."""
    if isinstance(row, dict):
        return {k: _shape(v) for k, v in sorted(row.items())}
    return row if isinstance(row, bool | int) or row is None else type(row).__name__


async def check_layout(database_url: str, peers: list[Peer], user_id: str) -> dict[str, Any]:
    """Write one memory through each peer's API; compare its row with a copied one."""
    out: dict[str, Any] = {}
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for peer in peers:
            if peer.probe is None or peer.name not in LAYOUT_SQL:
                continue
            await peer.probe()
            rows = []
            for who in (PROBE_USER, user_id):
                cur = await conn.execute(LAYOUT_SQL[peer.name], (who,))
                found = await cur.fetchone()
                rows.append(_shape(found[0]) if found else None)
            api, copied = rows
            out[peer.name] = {"same": api == copied, "api_write": api, "copied": copied}
        for peer in peers:
            if peer.name in CLEAN_SQL:
                await conn.execute(CLEAN_SQL[peer.name], (PROBE_USER,))
    return out
