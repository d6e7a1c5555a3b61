"""What the soak checks and keeps: exactly-once per conversation, recovery, growth, upkeep.

`verify_conversation` (latency's and throughput's check too) and `verify_soak` find every
message in exactly one place; `recovery` reads the turn log around each fault;
`sample_growth` counts Redis and Postgres; `Maintainer` runs ``memory-agent maintain
--all-users``'s pass on a timer (it removes what the product's pass decides).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import Counter
from typing import Any

import psycopg

from graph.context import Context
from graph.maintenance import build_maintenance_graph
from memory_graph_agent.storage.checkpoints import SaverCheckpoints

DEGRADED = {"buffered", "eviction_deferred", "unavailable"}
"""Event kinds of a turn that completed without Redis or Postgres."""


COUNTS = ("checkpoints_pruned", "checkpoints_held", "expired", "evicted", "compacted",
          "decisions_pruned", "threads_archived", "threads_held")  # fmt: skip
"""What each pass's report counts (threads for checkpoints and idle threads, else items)."""
MODES = ("retention", "idle_threads", "decision_retention")


def failure_cause(exc: BaseException) -> str:
    """Why a pass failed: the store it could not reach, a timeout, or the exception's type."""
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
    return "redis" if "redis" in modules else type(chain[0]).__name__


class Maintainer:
    """The pass of ``memory-agent maintain --all-users`` on a timer, each pass recorded."""

    def __init__(self, services: Any, saver: Any, context: Context, settings: Any,
                 every_s: float, timeout_s: float, t0: float) -> None:  # fmt: skip
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
            report, threads = state["report"], state.get("pruned", [])
            rec.update(ok=True, users=report["users"], **{k: report[k] for k in COUNTS + MODES})
            rec["pruned_by_kind"] = dict(
                Counter(e["kind"] for e in threads if e["action"] == "pruned")
            )
            rec["held_by_reason"] = dict(
                Counter(f"{e['kind']}: {e['reason']}" for e in threads if e["action"] == "held")
            )
        except Exception as exc:  # noqa: BLE001 - counted by cause and reported
            error = f"{type(exc).__name__}: {exc}"[:200]
            rec.update(ok=False, cause=failure_cause(exc), error=error)
        rec["seconds"] = round(time.perf_counter() - start, 2)
        self.passes.append(rec)
        return rec

    async def loop(self, finished: asyncio.Event, quiet: bool) -> None:
        """A pass every ``every_s`` seconds (counted from the previous one's end) until done."""
        while not finished.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), self.every_s)
                return
            rec = await self.run_pass("soak")
            if not quiet:
                pruned = f"{rec.get('checkpoints_pruned')} threads' checkpoints pruned"
                what = pruned if rec["ok"] else f"failed ({rec['cause']})"
                print(f"[soak] maintenance at {rec['at_s']:.0f} s: {what}", file=sys.stderr)

    def totals(self) -> dict[str, Any]:
        """Passes run, completed and failed by cause; what the completed ones removed."""
        done = [p for p in self.passes if p["ok"]]

        def added(key: str) -> dict[str, int]:
            return dict(sum((Counter(p[key]) for p in done), Counter()))

        return {
            "passes": len(self.passes),
            "completed": len(done),
            "failed_by_cause": dict(Counter(p["cause"] for p in self.passes if not p["ok"])),
            **{k: sum(p[k] for p in done) for k in COUNTS},
            "pruned_by_kind": added("pruned_by_kind"),
            "held_by_reason": added("held_by_reason"),
            "modes": {k: sorted({p[k] for p in done}) for k in MODES},
            "pass_seconds_max": max((p["seconds"] for p in self.passes), default=0.0),
        }


async def checkpoint_storage(database_url: str, conversations: set[str]) -> dict[str, Any]:
    """Rows per checkpoint table, their bytes and bytes on disk; checkpoints by thread kind."""
    out: dict[str, Any] = {"rows": {}, "live_bytes": 0, "disk_bytes": 0}
    by_thread = {k: Counter(threads=0, checkpoints=0, most=0) for k in ("conversation", "memory")}
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


async def verify_conversation(services: Any, user_id: str, thread_id: str) -> dict[str, int]:
    """Every message that left the window is in exactly one summary, or still pending.

    ``lost``: in neither. ``duplicated``: in two summaries, or in one and pending too.
    ``foreign``: a summary cites an id this thread never pushed or still in its window.
    """
    seen = set(await services.redis.smembers(services.keys.thread("seen", user_id, thread_id)))
    window = {m.id for m in await services.window.window(user_id, thread_id)}
    pending_list = [m.id for _, m in await services.window.pending(user_id, thread_id)]
    pending = set(pending_list)
    summaries = [s for s in await services.memories.list(user_id, kind="summary", limit=10**7)
                 if s.thread_id == thread_id]  # fmt: skip
    counts = Counter(sid for s in summaries for sid in s.source_ids)
    left = seen - window
    lost = left - pending - set(counts)
    duplicated = {m for m, c in counts.items() if c > 1} | (pending & set(counts))
    duplicated |= {m for m, c in Counter(pending_list).items() if c > 1}
    foreign = set(counts) - left
    return {
        "pushed": len(seen),
        "in_window": len(window),
        "left_window": len(left),
        "summarized": len(set(counts) & left),
        "pending": len(pending),
        "summaries": len(summaries),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "foreign": len(foreign),
    }


async def verify_soak(services: Any, convs: dict[str, str], records: list[dict]) -> dict[str, Any]:
    """Each completed turn's message logged once, every logged message in exactly one place.

    The places: a summary's ``source_ids``, the window, pending, a claimed batch or the dead
    letters (a claimed batch summarized but not acknowledged is ``summarized_unacked``).
    """
    total: Counter[str] = Counter()
    samples: list[str] = []
    failed: list[str] = []
    for user, thread in convs.items():
        found = await _places(services, user, thread)
        texts = found.pop("texts")
        for r in (r for r in records if r["user"] == user):
            n = texts[r["text"]]
            if r["ok"] and n == 0:
                total["lost"] += 1
                samples.append(f"lost: {user} turn {r['turn']} (completed, never logged)")
            if n > 1:
                total["duplicated"] += 1
                samples.append(f"duplicated: {user} turn {r['turn']} logged {n} times")
            if not r["ok"]:
                total["failed_kept" if n else "failed_not_kept"] += 1
                failed.append(f"{user} turn {r['turn']} ({r['where']}): {r['error'][:90]}; "
                              f"message {'kept' if n else 'NOT kept'}")  # fmt: skip
        for kind in ("nowhere", "twice"):
            samples += [f"{kind}: {user} message {mid}" for mid in found.pop(f"{kind}_ids")]
        total.update(found)
        seen_view = await verify_conversation(services, user, thread)
        total.update({f"seen_view_{k}": seen_view[k] for k in ("lost", "duplicated", "foreign")})
    lost, duplicated = total["lost"] + total["nowhere"], total["duplicated"] + total["twice"]
    return {
        **dict(total),
        "messages_lost": lost,
        "messages_duplicated": duplicated,
        "ok": lost == 0 and duplicated == 0 and total["foreign"] == 0,
        "samples": samples[:20],
        # every turn whose message was not kept, then the others, up to 50 in all
        "failed_turns": sorted(failed, key=lambda f: "NOT kept" not in f)[:50],
    }


async def _places(services: Any, user: str, thread: str) -> dict[str, Any]:
    logged = await services.episodes.history(user, thread)
    ids = {m.id for m in logged}
    summaries = [s for s in await services.memories.list(user, kind="summary", limit=10**7)
                 if s.thread_id == thread]  # fmt: skip
    held = {
        "window": [m.id for m in await services.window.window(user, thread)],
        "pending": [m.id for _, m in await services.window.pending(user, thread)],
        "processing": [m.id for m in await services.queue.processing(user, thread)],
        "dead": [m.id for e in await services.queue.dead_letters(user, thread) for m in e["items"]],
        "summary": [sid for s in summaries for sid in s.source_ids],
    }
    where: dict[str, list[str]] = {}
    for name, mids in held.items():
        for mid in mids:
            where.setdefault(mid, []).append(name)
    # a claimed batch whose summary is stored but not acknowledged (a worker or Redis died
    # in between): its next claim gets the same batch, so the same summary id (an upsert)
    unacked = {mid for mid, names in where.items() if sorted(names) == ["processing", "summary"]}
    places = Counter({mid: len(names) for mid, names in where.items() if mid not in unacked})
    summarized = set(held["summary"])
    return {
        "texts": Counter(m.content for m in logged if m.role == "human"),
        "logged": len(ids),
        "summaries": len(summaries),
        "summarized": len(summarized & ids),
        "in_window": len(held["window"]),
        "pending": len(held["pending"]),
        "processing": len(held["processing"]),
        "dead_lettered": len(held["dead"]),
        "nowhere": len(ids - set(places)),
        "nowhere_ids": sorted(ids - set(places))[:3],
        "twice": sum(1 for i, n in places.items() if n > 1),
        "summarized_unacked": len(unacked),
        "twice_ids": [f"{i} in {'+'.join(where[i])}" for i, n in places.items() if n > 1][:5],
        "foreign": len(summarized - ids),
    }


def recovery(faults: list[dict], records: list[dict], worker_users: set[str]) -> list[dict]:
    """Per fault: seconds to the first completed turn, to the first healthy one, turns failed."""
    out = []
    for f in faults:
        t0, back = f["at"], f.get("back_at", f["at"])
        mine = [r for r in records if f["kind"] != "worker_kill" or r["user"] in worker_users]
        after = [r for r in mine if r["start"] >= t0]
        ok = [r["end"] for r in after if r["ok"]]
        healthy = [r["end"] for r in after if r["ok"] and not r["degraded"] and r["start"] >= back]
        until = min(healthy, default=float("inf"))
        failed = [r for r in after if not r["ok"] and r["start"] <= until]
        out.append({
            **{k: v for k, v in f.items() if k not in ("at", "back_at")},
            "at_s": round(t0 - records[0]["start"], 1) if records else None,
            "first_ok_turn_s": round(min(ok) - t0, 3) if ok else None,
            "healthy_turn_s": round(until - t0, 3) if healthy else None,
            "turns_failed_until_healthy": len(failed),
            "of_which_model_faults": len([r for r in failed if "injected" in r["error"]]),
        })  # fmt: skip
    return out


def failure_causes(records: list[dict]) -> dict[str, int]:
    """Failed turns by cause (from the error text)."""
    causes: Counter[str] = Counter()
    for r in (r for r in records if not r["ok"]):
        e = r["error"]
        causes[
            "model_timeout" if "injected: model timed out" in e
            else "model_error" if "injected" in e
            else "worker_killed" if "WorkerKilled" in e
            else "in_worker" if r["where"] == "worker"
            else "turn_timeout" if e.startswith("TimeoutError")
            else "postgres" if any(w in e for w in ("psycopg", "ostgres", "Operational"))
            else "redis" if "edis" in e
            else "other"
        ] += 1  # fmt: skip
    return dict(causes)


async def sample_growth(services: Any, database_url: str, t0: float, turns: int) -> dict[str, Any]:
    """Redis keys, memory and seen-set sizes, Postgres rows per table (None when down)."""
    sample: dict[str, Any] = {"t": round(time.time() - t0, 1), "turns": turns}
    try:
        r = services.redis
        seen = [k async for k in r.scan_iter(match=f"{services.keys.prefix}:seen:*", count=1000)]
        sizes = [await r.scard(k) for k in seen]
        used = (await r.info("memory"))["used_memory"]
        sample.update(redis_keys=await r.dbsize(), redis_used_memory=used, seen_sets=len(seen),
                      seen_total=sum(sizes), seen_max=max(sizes, default=0))  # fmt: skip
    except Exception:  # noqa: BLE001 - Redis is down right now
        sample.update(redis_keys=None, redis_used_memory=None, seen_total=None)
    try:
        connect = psycopg.AsyncConnection.connect(database_url, autocommit=True, connect_timeout=3)
        async with await connect as c:
            query = "SELECT relname, n_live_tup FROM pg_stat_user_tables"
            rows = await (await c.execute(query)).fetchall()
            size = await (await c.execute("SELECT pg_database_size(current_database())")).fetchone()
        sample.update(pg_rows={n: int(c) for n, c in rows}, pg_bytes=int(size[0]))
    except Exception:  # noqa: BLE001 - Postgres is down right now
        sample.update(pg_rows=None, pg_bytes=None)
    return sample


async def exact_rows(database_url: str) -> dict[str, int]:
    """``count(*)`` of every table of the soak's database."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT relname FROM pg_stat_user_tables ORDER BY relname")
        names = [r[0] for r in await cur.fetchall()]
        return {
            n: int((await (await conn.execute(f'SELECT count(*) FROM "{n}"')).fetchone())[0])
            for n in names
        }
