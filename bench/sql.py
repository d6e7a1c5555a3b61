"""What SQL the recall really runs, and how PostgreSQL plans it.

`explain_recall` captures the recall query the stores' engine sends (SQLAlchemy events) and
explains it: the custom plan with its real parameters, and the generic plan a prepared
statement may switch to; `prepared_recall_plans` reads ``pg_prepared_statements``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.seeding import HNSW_INDEX


@contextlib.contextmanager
def capture_sql(engine: AsyncEngine) -> Iterator[list[tuple[str, Any]]]:
    """Capture the SQL (statement, parameters) ``engine`` sends, for EXPLAIN."""
    sync_engine = engine.sync_engine  # events are registered on the sync facade
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


def _numbered(stmt: str) -> str:
    """``%(name)s`` placeholders as ``$1, $2...`` (what ``EXPLAIN (GENERIC_PLAN)`` takes)."""
    names: list[str] = []

    def number(m: re.Match) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, stmt)


async def explain_recall(
    services: Any, user_id: str, vector: list[float], k: int
) -> dict[str, Any]:
    """EXPLAIN the exact recall query `MemoryStore.search` sends (captured from SQLAlchemy).

    Returns the custom plan (EXPLAIN ANALYZE with the real parameters and the same
    ``SET LOCAL`` HNSW options) and the generic plan a prepared statement may switch to
    (``EXPLAIN (GENERIC_PLAN)``), each with whether the HNSW index is used.
    """
    with capture_sql(services.db.engine) as captured:
        await services.memories.search(user_id, vector, k)
    sets = [s for s, _ in captured if s.strip().upper().startswith("SET LOCAL")]
    queries = [(s, p) for s, p in captured if "ORDER BY" in s and "LIMIT" in s]
    if not queries:
        return {"error": "recall query not captured", "captured": [s for s, _ in captured]}
    stmt, params = queries[-1]
    stmt = stmt.strip().rstrip(";")
    out: dict[str, Any] = {"set_local": sets, "sql": " ".join(stmt.split())[:600]}
    async with await psycopg.AsyncConnection.connect(services.database_url) as conn:

        async def explain(options: str, sql: str, params: Any = None) -> dict:
            async with conn.transaction():
                for s in sets:
                    await conn.execute(s)
                row = await (await conn.execute(f"EXPLAIN ({options}) {sql}", params)).fetchone()
                return row[0][0]

        top = await explain("ANALYZE, BUFFERS, FORMAT JSON", stmt, params)
        out["custom_plan"] = {
            **_plan_summary(top["Plan"]),
            "execution_ms": top.get("Execution Time"),
            "planning_ms": top.get("Planning Time"),
            "rows": top["Plan"].get("Actual Rows"),
        }
        try:
            generic = await explain("GENERIC_PLAN, FORMAT JSON", _numbered(stmt))
            out["generic_plan"] = _plan_summary(generic["Plan"])
        except psycopg.Error as exc:  # GENERIC_PLAN needs PostgreSQL >= 16
            out["generic_plan"] = {"error": str(exc).splitlines()[0]}
    return out


async def prepared_recall_plans(services: Any) -> dict[str, Any]:
    """Custom vs generic plan executions of the recall query, as it really ran.

    psycopg prepares a statement after 5 executions on a connection, after which
    PostgreSQL may switch to the generic plan. Reads ``pg_prepared_statements`` on
    every idle connection of the stores' pool (checked out all at once, so each is a
    different connection).
    """
    engine: AsyncEngine = services.db.engine
    n = max(1, engine.sync_engine.pool.checkedin())
    rows: list[dict[str, Any]] = []
    async with contextlib.AsyncExitStack() as stack:
        conns = [await stack.enter_async_context(engine.connect()) for _ in range(n)]
        for conn in conns:
            result = await conn.execute(
                text("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
            )
            rows += [dict(r) for r in result.mappings()]
    recall = [r for r in rows if "ORDER BY" in r["statement"] and "<=>" in r["statement"]]
    return {
        "connections_checked": n,
        "prepared_recall_statements": len(recall),
        "generic_plan_executions": sum(int(r["generic_plans"]) for r in recall),
        "custom_plan_executions": sum(int(r["custom_plans"]) for r in recall),
    }
