"""What the soak measures: exactly-once per conversation, recovery per fault, memory growth.

`verify_soak` checks every conversation against what the soak sent: each message of a
completed turn is logged once (by its text) and every logged message is in exactly one
place (a summary's ``source_ids``, the window, pending, a claimed batch or the dead
letters; a claimed batch already summarized but not acknowledged is counted apart, as
``summarized_unacked``: its next claim is the same batch, an upsert of the same summary);
`bench.verify.verify_conversation` (the seen-set view) runs next to it.
`recovery` reads the turn log around each fault; `sample_growth` counts Redis keys and
memory, seen-set sizes and Postgres rows.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from typing import Any

import psycopg

from bench.verify import verify_conversation

DEGRADED = {"buffered", "eviction_deferred", "unavailable"}
"""Event kinds of a turn that completed without Redis or Postgres."""


async def verify_soak(services: Any, convs: dict[str, str], records: list[dict]) -> dict[str, Any]:
    """Lost / duplicated / foreign over all conversations, and failed turns' messages kept."""
    total: Counter[str] = Counter()
    samples: list[str] = []
    failed: list[str] = []
    for user, thread in convs.items():
        mine = [r for r in records if r["user"] == user]
        found = await _places(services, user, thread)
        texts = found.pop("texts")
        for r in mine:
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
            for mid in found.pop(f"{kind}_ids"):
                samples.append(f"{kind}: {user} message {mid}")
        total.update(found)
        seen_view = await verify_conversation(services, user, thread)
        total.update({f"seen_view_{k}": seen_view[k] for k in ("lost", "duplicated", "foreign")})
    lost = total["lost"] + total["nowhere"]
    duplicated = total["duplicated"] + total["twice"]
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
    window = [m.id for m in await services.window.window(user, thread)]
    pending = [m.id for _, m in await services.window.pending(user, thread)]
    processing = [m.id for m in await services.queue.processing(user, thread)]
    dead = [m.id for e in await services.queue.dead_letters(user, thread) for m in e["items"]]
    summaries = [
        s
        for s in await services.memories.list(user, kind="summary", limit=10**7)
        if s.thread_id == thread
    ]
    summarized = [sid for s in summaries for sid in s.source_ids]
    where: dict[str, list[str]] = {}
    for name, held in (("window", window), ("pending", pending), ("processing", processing),
                       ("dead", dead), ("summary", summarized)):  # fmt: skip
        for mid in held:
            where.setdefault(mid, []).append(name)
    # a claimed batch whose summary is stored but not acknowledged (a worker or Redis died
    # in between): its next claim gets the same batch, so the same summary id (an upsert)
    unacked = {mid for mid, names in where.items() if sorted(names) == ["processing", "summary"]}
    places = Counter({mid: len(names) for mid, names in where.items() if mid not in unacked})
    return {
        "texts": Counter(m.content for m in logged if m.role == "human"),
        "logged": len(ids),
        "summaries": len(summaries),
        "summarized": len(set(summarized) & ids),
        "in_window": len(window),
        "pending": len(pending),
        "processing": len(processing),
        "dead_lettered": len(dead),
        "nowhere": len(ids - set(places)),
        "nowhere_ids": sorted(ids - set(places))[:3],
        "twice": sum(1 for i, n in places.items() if n > 1),
        "summarized_unacked": len(unacked),
        "twice_ids": [f"{i} in {'+'.join(where[i])}" for i, n in places.items() if n > 1][:5],
        "foreign": len(set(summarized) - ids),
    }


def recovery(faults: list[dict], records: list[dict], worker_users: set[str]) -> list[dict]:
    """Per fault: seconds to the first completed turn, to the first healthy one, turns failed."""
    out = []
    for f in faults:
        t0, back = f["at"], f.get("back_at", f["at"])
        after = [
            r
            for r in records
            if r["start"] >= t0 and (f["kind"] != "worker_kill" or r["user"] in worker_users)
        ]
        ok = [r["end"] for r in after if r["ok"]]
        healthy = [r["end"] for r in after if r["ok"] and not r["degraded"] and r["start"] >= back]
        until = min(healthy, default=float("inf"))
        failed = [r for r in after if not r["ok"] and r["start"] <= until]
        injected = [r for r in failed if "injected" in r["error"]]
        out.append(
            {
                **{k: v for k, v in f.items() if k not in ("at", "back_at")},
                "at_s": round(t0 - records[0]["start"], 1) if records else None,
                "first_ok_turn_s": round(min(ok) - t0, 3) if ok else None,
                "healthy_turn_s": round(until - t0, 3) if healthy else None,
                "turns_failed_until_healthy": len(failed),
                "of_which_model_faults": len(injected),
            }
        )
    return out


def failure_causes(records: list[dict]) -> dict[str, int]:
    """Failed turns by cause (from the error text)."""
    causes: Counter[str] = Counter()
    for r in records:
        if r["ok"]:
            continue
        e = r["error"]
        cause = (
            "model_timeout" if "injected: model timed out" in e
            else "model_error" if "injected" in e
            else "worker_killed" if "WorkerKilled" in e
            else "in_worker" if r["where"] == "worker"
            else "turn_timeout" if e.startswith("TimeoutError")
            else "postgres" if any(w in e for w in ("psycopg", "ostgres", "Operational"))
            else "redis" if "edis" in e
            else "other"
        )  # fmt: skip
        causes[cause] += 1
    return dict(causes)


async def sample_growth(services: Any, database_url: str, t0: float, turns: int) -> dict[str, Any]:
    """Redis keys, memory and seen-set sizes, Postgres rows per table (None when down)."""
    sample: dict[str, Any] = {"t": round(time.time() - t0, 1), "turns": turns}
    try:
        r = services.redis
        seen = [k async for k in r.scan_iter(match=f"{services.keys.prefix}:seen:*", count=1000)]
        sizes = [await r.scard(k) for k in seen]
        sample.update(
            redis_keys=await r.dbsize(),
            redis_used_memory=(await r.info("memory"))["used_memory"],
            seen_sets=len(seen),
            seen_total=sum(sizes),
            seen_max=max(sizes, default=0),
        )
    except Exception:  # noqa: BLE001 - Redis is down right now
        sample.update(redis_keys=None, redis_used_memory=None, seen_total=None)
    try:
        async with await psycopg.AsyncConnection.connect(
            database_url, autocommit=True, connect_timeout=3
        ) as conn:
            rows = await (
                await conn.execute("SELECT relname, n_live_tup FROM pg_stat_user_tables")
            ).fetchall()
            size = await (
                await conn.execute("SELECT pg_database_size(current_database())")
            ).fetchone()
        sample.update(pg_rows={n: int(c) for n, c in rows}, pg_bytes=int(size[0]))
    except Exception:  # noqa: BLE001 - Postgres is down right now
        sample.update(pg_rows=None, pg_bytes=None)
    return sample


async def exact_rows(database_url: str) -> dict[str, int]:
    """``count(*)`` of every table of the soak's database."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        names = [
            r[0]
            for r in await (
                await conn.execute("SELECT relname FROM pg_stat_user_tables ORDER BY relname")
            ).fetchall()
        ]
        return {
            n: int((await (await conn.execute(f'SELECT count(*) FROM "{n}"')).fetchone())[0])
            for n in names
        }


def uptime() -> str:
    """``uptime``'s line (load averages of the shared machine)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def plot_soak(data: dict[str, Any], records: list[dict], plt: Any) -> Any:
    """Turns per bucket (completed / failed) with the faults; Redis and Postgres growth."""
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    t0 = min(r["start"] for r in records)
    span = max(r["end"] for r in records) - t0
    width = max(5.0, span / 60)
    buckets = int(span // width) + 1
    ok, failed = [0] * buckets, [0] * buckets
    for r in records:
        (ok if r["ok"] else failed)[int((r["end"] - t0) // width)] += 1
    xs = [i * width for i in range(buckets)]
    ax1.bar(xs, ok, width=width, align="edge", color="tab:blue", label="turns completed")
    ax1.bar(xs, failed, width=width, align="edge", bottom=ok, color="tab:red", label="turns failed")
    colors = {"redis_kill": "tab:red", "postgres_restart": "tab:purple", "worker_kill": "black"}
    for f in data["faults"]:
        for ax in (ax1, ax2, ax3):
            ax.axvline(f["at_s"], color=colors[f["kind"]], ls="--", lw=1)
        ax1.text(f["at_s"], max(ok, default=1), f["kind"], rotation=90, fontsize=7, va="top")
    ax1.set_ylabel(f"turns per {width:.0f} s")
    ax1.legend(fontsize=8, loc="lower right")
    g = [s for s in data["growth"]["samples"] if s.get("redis_keys") is not None]
    ax2.plot([s["t"] for s in g], [s["redis_keys"] for s in g], "o-", label="Redis keys")
    ax2.plot([s["t"] for s in g], [s["seen_total"] for s in g], "s-", label="seen-set members")
    ax2b = ax2.twinx()
    ax2b.plot([s["t"] for s in g], [s["redis_used_memory"] / 2**20 for s in g], "g:", label="MiB")
    ax2b.set_ylabel("Redis used memory (MiB)", color="g")
    ax2.legend(fontsize=8, loc="upper left")
    p = [s for s in data["growth"]["samples"] if s.get("pg_rows")]
    top = sorted(data["growth"]["final_rows"], key=lambda n: -data["growth"]["final_rows"][n])[:6]
    for name in top:
        ax3.plot([s["t"] for s in p], [s["pg_rows"].get(name, 0) for s in p], label=name)
    for m in data.get("maintenance_passes", []):  # on the clock of the first turn, near enough
        ax3.axvline(m["at_s"], color="tab:green" if m["ok"] else "tab:red", ls=":", lw=0.6)
    ax3.set_ylabel("Postgres rows (live); dotted: maintenance passes")
    ax3.set_xlabel("seconds since the first turn")
    ax3.legend(fontsize=7, loc="upper left")
    v, c = data["verification"], data["config"]
    m = data["machine"]
    ax1.set_title(
        f"soak: {c['users']} users x {c['turns']} turns, {data['totals']['failed']} turns failed, "
        f"{v['messages_lost']} lost / {v['messages_duplicated']} duplicated\n"
        f"{m['cpu_model']}, {m['cores']} cores (shared), load average at start "
        f"{' '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}",
        fontsize=9,
    )
    return fig
