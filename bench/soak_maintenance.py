"""Retention during the soak: the maintenance pass of ``memory-agent maintain --all-users``.

`Maintainer` runs the ``maintenance`` graph the way the CLI's ``maintain`` command does
(`graph.maintenance.build_maintenance_graph` with the soak's Postgres checkpointer behind
`memory_graph_agent.storage.checkpoints.SaverCheckpoints`, input ``{"all_users": True}``)
every ``--maintain-every`` seconds, while the turns run and the faults strike, and once
more after memory is drained, before the check. No benchmark-only path: what it prunes,
expires, evicts, compacts or archives is what the product's pass decides.

What a 6-minute run exercises: ``keep_latest`` checkpoint pruning of every conversation
and memory thread (each turn writes a few checkpoints), and compaction when two memories
are near-identical. Expiry, eviction, decision retention and idle-thread archiving are
run every pass too, but their thresholds are days (``ttl_policy``, ``evict_after_days``,
``decision_retention_days``, ``idle_thread_days``): in real time nothing is old enough, and
the report says so (0 removed). A pass that meets a killed Redis or a stopped PostgreSQL
fails and is recorded with its cause; the next pass starts afresh.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from typing import Any

import psycopg

from graph.context import Context
from graph.maintenance import build_maintenance_graph
from memory_graph_agent.storage.checkpoints import SaverCheckpoints

COUNTS = (
    "checkpoints_pruned",
    "checkpoints_held",
    "expired",
    "evicted",
    "compacted",
    "decisions_pruned",
    "threads_archived",
    "threads_held",
)
"""What each pass's report counts (threads for checkpoints and idle threads, else items)."""
MODES = ("retention", "idle_threads", "decision_retention")
"""How the pass says it treated checkpoints, idle threads and decisions."""


def failure_cause(exc: BaseException) -> str:
    """Why a pass failed: the store it could not reach, a timeout, or the exception's type.

    The store is the ``service`` of a `StoreUnavailable` in the cause chain, else read from
    the driver's exception (a checkpointer's psycopg error, a raw redis-py error).
    """
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    service = next((e.service for e in chain if isinstance(getattr(e, "service", None), str)), "")
    if service:
        return service
    if isinstance(chain[0], TimeoutError):
        return "timeout"
    modules = " ".join(type(e).__module__ for e in chain)
    if "psycopg" in modules or "sqlalchemy" in modules:
        return "postgres"
    if "redis" in modules:
        return "redis"
    return type(chain[0]).__name__


class Maintainer:
    """The soak's maintenance passes: run on a timer, each recorded, none overlapping."""

    def __init__(
        self,
        services: Any,
        saver: Any,
        context: Context,
        settings: Any,
        every_s: float,
        timeout_s: float,
        t0: float,
    ) -> None:
        self.graph = build_maintenance_graph(services, SaverCheckpoints(saver), settings=settings)
        self.context, self.every_s, self.timeout_s = context, every_s, timeout_s
        self.passes: list[dict[str, Any]] = []
        self.t0 = t0  # the soak's start: ``at_s`` is on the clock of its growth samples

    async def run_pass(self, phase: str) -> dict[str, Any]:
        """One pass over every user; its counts, or why it failed (nothing raised)."""
        rec: dict[str, Any] = {"phase": phase, "at_s": round(time.time() - self.t0, 1)}
        start = time.perf_counter()
        try:
            state = await asyncio.wait_for(
                self.graph.ainvoke({"all_users": True}, context=self.context), self.timeout_s
            )
            report = state["report"]
            rec.update(ok=True, users=report["users"], **{k: report[k] for k in COUNTS})
            rec.update({k: report[k] for k in MODES})
            threads = state.get("pruned", [])  # one entry per thread with more than its latest
            rec["pruned_by_kind"] = dict(
                Counter(e["kind"] for e in threads if e["action"] == "pruned")
            )
            rec["held_by_reason"] = dict(
                Counter(f"{e['kind']}: {e['reason']}" for e in threads if e["action"] == "held")
            )
        except Exception as exc:  # noqa: BLE001 - counted by cause and reported
            rec.update(ok=False, cause=failure_cause(exc), error=f"{type(exc).__name__}: {exc}")
            rec["error"] = rec["error"][:200]
        rec["seconds"] = round(time.perf_counter() - start, 2)
        self.passes.append(rec)
        return rec

    async def loop(self, finished: asyncio.Event, quiet: bool) -> None:
        """A pass every ``every_s`` seconds (counted from the previous one's end) until done."""
        while not finished.is_set():
            try:
                await asyncio.wait_for(finished.wait(), self.every_s)
                return
            except TimeoutError:
                pass
            rec = await self.run_pass("soak")
            if not quiet:
                what = (
                    f"{rec['checkpoints_pruned']} threads' checkpoints pruned"
                    if rec["ok"]
                    else f"failed ({rec['cause']})"
                )
                print(f"[soak] maintenance at {rec['at_s']:.0f} s: {what}", file=sys.stderr)

    def totals(self) -> dict[str, Any]:
        """Passes run, completed and failed by cause; what the completed ones removed."""
        done = [p for p in self.passes if p["ok"]]
        return {
            "passes": len(self.passes),
            "completed": len(done),
            "failed_by_cause": dict(Counter(p["cause"] for p in self.passes if not p["ok"])),
            **{k: sum(p[k] for p in done) for k in COUNTS},
            "pruned_by_kind": dict(sum((Counter(p["pruned_by_kind"]) for p in done), Counter())),
            "held_by_reason": dict(sum((Counter(p["held_by_reason"]) for p in done), Counter())),
            "modes": {k: sorted({p[k] for p in done}) for k in MODES},
            "pass_seconds_max": max((p["seconds"] for p in self.passes), default=0.0),
        }


async def checkpoint_storage(database_url: str, conversations: set[str]) -> dict[str, Any]:
    """Rows per checkpoint table, their own bytes and the bytes on disk (indexes, TOAST).

    ``by_thread`` splits the checkpoints between the ``conversations`` and the other
    threads (their memory threads): ``threads``, ``checkpoints`` and the most of one thread.
    """
    out: dict[str, Any] = {"rows": {}, "live_bytes": 0, "disk_bytes": 0}
    by_thread = {
        kind: Counter(threads=0, checkpoints=0, most=0) for kind in ("conversation", "memory")
    }
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT thread_id, count(*) FROM checkpoints GROUP BY 1")
        for thread, n in await cur.fetchall():
            c = by_thread["conversation" if thread in conversations else "memory"]
            c.update(threads=1, checkpoints=int(n))
            c["most"] = max(c["most"], int(n))
        out["by_thread"] = {kind: dict(c) for kind, c in by_thread.items()}
        cur = await conn.execute(
            "SELECT relname, pg_total_relation_size(relid) FROM pg_stat_user_tables "
            "WHERE relname LIKE 'checkpoint%' AND relname <> 'checkpoint_migrations' ORDER BY 1"
        )
        for table, disk in await cur.fetchall():
            query = f'SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM "{table}" t'
            rows, live = await (await conn.execute(query)).fetchone()
            out["rows"][table] = int(rows)
            out["live_bytes"] += int(live)
            out["disk_bytes"] += int(disk)
    return out
