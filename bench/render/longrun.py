"""The long-run regions: storage growth per user, and the soak with its faults."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.render import load, machine, num, pair, table


def _size(n: float) -> str:
    """``n`` bytes in KiB or MiB."""
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def render_growth_table(root: Path) -> str:
    """Per user, first and last sample, retention on and off: checkpoints and everything."""
    d = load(root, "growth")
    users = d["users"]
    runs = {r["retention"]: r["samples"] for r in d["runs"]}

    def span(samples: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]) -> str:
        first, last = samples[0], samples[-1]
        return f"{_size(value(first) / users)} → {_size(value(last) / users)}"

    def log(s: dict[str, Any]) -> float:
        return s["postgres"].get("episodes", 0) + s["postgres"].get("episode_index", 0)

    measures: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
        ("checkpoint rows, live bytes", lambda s: s["postgres"]["checkpoints"]),
        ("checkpoint tables on disk, after VACUUM", lambda s: s["postgres_disk"]["checkpoints"]),
        ("Redis (window, seen-set, recap, profile, queue...)", lambda s: sum(s["redis"].values())),
        ("episodic log and its index (kept: what recall cites)", log),
        ("everything (Redis + Postgres live rows)",
         lambda s: sum(s["redis"].values()) + sum(s["postgres"].values())),
    ]  # fmt: skip
    both = ("keep_latest", "off")
    rows = [[label, *(span(runs[r], f) for r in both)] for label, f in measures]
    reads = {r["retention"]: r["read_path_ms"] for r in d["runs"]}
    rows.append([
        "read path p50 (`retrieve`, embedding included), first → last sample",
        *(f"{num(reads[r]['start']['p50'])} → {num(reads[r]['end']['p50'])} ms" for r in both),
    ])  # fmt: skip

    def parts(r: str) -> str:
        first, last = reads[r]["start"]["parts_p50"], reads[r]["end"]["parts_p50"]
        return "; ".join(f"{k} {num(first[k])} → {num(last[k])}" for k in first) + " ms"

    rows.append(["its parts p50 (the embedding, the searches, the rest)", *map(parts, both)])
    first, last, days = runs["off"][0], runs["off"][-1], d["days_per_pass"]
    turns = f"{first['turns_per_user']} → {last['turns_per_user']} turns"
    turns += f" (day {first['day']:g} → {last['day']:g})" if days else ""

    def memories(sample: dict[str, Any]) -> str:
        m = sample["memories_per_user"]
        return f"{m['active']:g} of {m['rows']:g}"

    rows.append([
        "memories, active of all rows",
        *(f"{memories(runs[r][0])} → {memories(runs[r][-1])}" for r in both),
    ])  # fmt: skip
    clock = (
        f"{days:g} simulated days before each pass (every {d['every']} turns)"
        if days
        else "no simulated time (decay removes nothing)"
    )
    head = [f"per user, {turns}", "retention on (`keep_latest`)", "retention off"]
    return table(head, rows) + f"\n\n{users} users; {clock}; on {machine(d)}."


def render_growth_channels(root: Path) -> str:
    """The read path's parts and the turn searches' plans at every sample (retention on)."""
    d = load(root, "growth")
    samples = next(r["samples"] for r in d["runs"] if r["retention"] == "keep_latest")
    searched = ("dense_turns", "keyword_turns")
    head = ["turns per user", "read path p50 ms", "embedding / searches / rest ms",
            "candidates", *(f"`{c}`: server ms, pages" for c in searched)]  # fmt: skip
    rows = []
    for s in samples:
        read, plans = s["read_path_ms"], s["channels"]
        rows.append([
            str(s["turns_per_user"]), num(read["p50"]),
            " / ".join(num(v) for v in read["parts_p50"].values()),
            num(read["candidates_p50"], 0),
            *(f"{num(plans[c]['server_ms'], 2)}, {num(plans[c]['pages'], 0)}" for c in searched),
        ])  # fmt: skip
    note = (
        f"\n\n{d['users']} users, retention on; p50 of each sample's questions, their channel"
        " queries under `EXPLAIN (ANALYZE, BUFFERS)` (pages: 8 KiB, cached or not); on"
        f" {machine(d)}."
    )
    return table(head, rows) + note


def render_soak_summary(root: Path) -> str:
    """Totals and the exactly-once check of the soak."""
    d = load(root, "soak")
    t, v, c = d["totals"], d["verification"], d["config"]
    causes = ", ".join(f"{k} {n}" for k, n in t["failed_by_cause"].items())
    rows = [
        ["turns", f"{num(t['turns'], 0)} in {num(t['workload_s'], 0)} s ({num(t['turns_per_s'])}"
         f" turns/s; completed turn p50 / p95 {pair(t['latency_completed'], 0)} ms)"],
        ["**messages lost / duplicated**", f"**{v['messages_lost']} / {v['messages_duplicated']}"
         f"** of {num(v['logged'], 0)} logged ({num(v['summarized'], 0)} in "
         f"{num(v['summaries'], 0)} summaries, {v['in_window']} in windows, {v['pending']} "
         f"pending, {v['processing']} claimed, {v['dead_lettered']} dead letters)"],
        ["turns failed", f"{t['failed']} ({causes}); every message kept: {v['failed_kept']}"],
        ["turns completed degraded", str(t["completed_degraded"])],
        ["memory runs failed", str(t["memory_run_failures"])],
        *_soak_retention_rows(d),
    ]  # fmt: skip
    note = (
        f"\n\n{c['users']} users × {c['turns']} turns, {c['concurrency']} at a time; {machine(d)}."
    )
    return table(["", ""], rows) + note


def _soak_retention_rows(d: dict[str, Any]) -> list[list[str]]:
    """The maintenance passes run during the soak, and the checkpoints they left."""
    m, cp = d["totals"].get("maintenance"), d["growth"].get("checkpoints")
    if not m:
        return [["maintenance passes", "none (`--maintain-every 0`)"]]
    failed = ", ".join(f"{k} {n}" for k, n in m["failed_by_cause"].items()) or "none"
    removed = ", ".join(
        f"{m[k]} {k.replace('_', ' ')}"
        for k in ("expired", "evicted", "compacted", "decisions_pruned", "threads_archived")
    )
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(m["pruned_by_kind"].items()))
    held = ", ".join(f"{n} {r}" for r, n in sorted(m["held_by_reason"].items())) or "none"
    rows = [[
        f"maintenance passes (every {num(d['config']['maintain_every'], 0)} s, and one at the end)",
        f"{m['passes']} ({m['completed']} completed; failed: {failed}); checkpoints of "
        f"{num(m['checkpoints_pruned'], 0)} threads pruned to their latest ({kinds}), "
        f"{num(m['checkpoints_held'], 0)} held whole ({held}); {removed}",
    ]]  # fmt: skip
    if cp:
        threads = "; ".join(
            f"{num(c['checkpoints'], 0)} checkpoints in {c['threads']} {kind} threads "
            f"(most {num(c['most'], 0)})"
            for kind, c in cp["by_thread"].items()
        )
        counts = ", ".join(f"{num(n, 0)} {t.replace('_', ' ')}" for t, n in cp["rows"].items())
        rows.append([
            "checkpoints at the end",
            f"{counts}; {num(cp['live_bytes'] / 2**20)} MiB of rows, "
            f"{num(cp['disk_bytes'] / 2**20)} MiB on disk; {threads}",
        ])  # fmt: skip
    return rows


def render_soak_recovery(root: Path) -> str:
    """Seconds from each fault to the first completed and the first healthy turn."""
    d = load(root, "soak")
    rows = [
        [f"{f['kind'].replace('_', ' ')} (at {f['at_s']:.0f} s)",
         f"{f['down_s']:.1f} s" if "down_s" in f else "–", f"{f['first_ok_turn_s']:.1f}",
         f"{f['healthy_turn_s']:.1f}", str(f["turns_failed_until_healthy"])]
        for f in d["faults"]
    ]  # fmt: skip
    head = ["fault", "down", "first completed turn (s)", "first healthy turn (s)",
            "turns failed until healthy"]  # fmt: skip
    return table(head, rows)


def render_soak_headline(root: Path) -> str:
    """One sentence: the soak's turns, faults and the exactly-once result."""
    d = load(root, "soak")
    t, v, c = d["totals"], d["verification"], d["config"]
    upkeep = (
        f", with the maintenance pass pruning checkpoints every {num(c['maintain_every'], 0)} s"
        if c.get("maintain_every")
        else ""
    )
    return (
        f"Soak: {num(t['turns'], 0)} turns of {c['users']} users with Redis `kill -9`, "
        f"PostgreSQL restarts, a worker killed during a memory run and injected model "
        f"faults{upkeep}: **{v['messages_lost']} lost / {v['messages_duplicated']} duplicated** of "
        f"{num(v['logged'], 0)} messages; on {machine(d, dated=False)}."
    )
