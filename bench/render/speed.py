"""The speed regions: peers, latency, throughput."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.render import load, machine, num, pair, table

READ_PATH = "ours: read path"
PEER_FIRST, PEER_LAST = ["floor"], ["ours: MemoryStore.search", READ_PATH]


def peer_order(systems: dict[str, Any]) -> list[str]:
    """The systems of a size in table order (the floor first, ours last)."""
    middle = sorted(n for n in systems if n not in PEER_FIRST + PEER_LAST + ["query embedding"])
    return [n for n in PEER_FIRST + middle + PEER_LAST if n in systems]


def render_peers_table(root: Path) -> str:
    """Per system and size: p50 / p95 with the embedding (× floor, returned), pre-embedded p50."""
    d = load(root, "peers")
    sizes = d["sizes"]
    head = ["system", *(f"{num(s['size'], 0)}: p50 / p95 ms (× floor, returned)" for s in sizes)]
    head.append("pre-embedded p50 ms, " + " / ".join(num(s["size"], 0) for s in sizes))
    rows = []
    for name in peer_order(sizes[-1]["systems"]):
        cells = [f"**{name}**" if name == READ_PATH else name]
        for s in sizes:
            w = s["systems"].get(name, {}).get("with_embedding")
            if not w:
                cells.append("-")
                continue
            ret = w.get("returned") or {}
            got = (
                f"{ret['mean']:.1f} items"
                if name == READ_PATH
                else f"{ret.get('mean', 0):.2f} / {ret.get('k', '?')}"
            )
            cells.append(f"{pair(w['latency'])} ({w.get('x_floor_p50', 0):.2f}×, {got})")
        pre = [s["systems"].get(name, {}).get("pre_embedded") for s in sizes]
        cells.append(" / ".join(num(p["latency"]["p50"], 2) if p else "-" for p in pre))
        rows.append(cells)
    c = d["config"]
    note = (
        f"\n\n{c['queries']} questions per size, k = {c['k']}, the benchmark user among "
        f"{c['other_users']} users of {num(c['per_other_user'], 0)} memories; on {machine(d)}, "
        f"PostgreSQL {d['machine'].get('postgres')} + pgvector {d['machine'].get('pgvector')}."
    )
    return table(head, rows) + note


PARTS = {
    "read_path": "read path (from `ainvoke` to the model call)",
    "read_path_excl_embedding": "read path without the embedding",
    "embed_query": "the query embedding, started with the run",
    "embed_wait": "what recall still waited for it",
    "load_profile": "load_profile, beside recall",
    "recall": "recall",
    "search": "of which the searches",
    "touch": "access stats, after the reply",
    "graph_overhead": "the graph's own overhead",
}


def render_peers_parts(root: Path) -> str:
    """The read path's parts at each size, p50 / p95 ms."""
    d = load(root, "peers")
    sizes = d["sizes"]
    rows = [
        [label, *(pair(s["systems"][READ_PATH]["breakdown"].get(key), 1) for s in sizes)]
        for key, label in PARTS.items()
    ]
    return table(["part", *(f"{num(s['size'], 0)}: p50 / p95 ms" for s in sizes)], rows)


def render_peers_headline(root: Path) -> str:
    """One sentence: the read path at the largest size against the floor and the peers."""
    d = load(root, "peers")
    s = d["sizes"][-1]
    sy = s["systems"]
    rp, ours = sy[READ_PATH]["with_embedding"], sy["ours: MemoryStore.search"]
    peers = [n for n in peer_order(sy) if n not in PEER_FIRST + PEER_LAST]
    best = min(peers, key=lambda n: sy[n]["with_embedding"]["latency"]["p50"])
    search = ours["with_embedding"]["latency"]["p50"]
    return (
        f"Read path of a turn at {num(s['size'], 0)} memories of the user (profile, recall with "
        f"its embedding, the graph's steps, up to the model call): "
        f"**{num(rp['latency']['p50'])} ms p50** ({rp['x_floor_p50']:.2f}× a bare pgvector "
        f"query with its embedding), as the server and the CLI run it; our search alone "
        f"{num(search)} ms, the fastest peer ({best}) "
        f"{num(sy[best]['with_embedding']['latency']['p50'])} ms; on {machine(d, dated=False)}."
    )


LATENCY_MODES = {
    "respond_only": "respond only (no memory)",
    "inline": "memory inline",
    "background": "**memory in the background (default)**",
    "agent_only": "`create_agent`, no middleware (no memory)",
    "middleware_background": "`create_agent` + `MemoryMiddleware` (background)",
}
LATENCY_BASELINES = ("respond_only", "agent_only")
LATENCY_METRICS = ("ttft", "time_to_reply", "run_end", "next_turn_waits")


def render_latency_table(root: Path) -> str:
    """p50 / p95 ms per agent, turns that formed memory apart from the others."""
    d = load(root, "latency")
    rows = []
    for mode, label in LATENCY_MODES.items():
        m = d["modes"].get(mode)
        if not m:
            continue
        for kind, name in (("memory_turns", "memory"), ("other_turns", "other")):
            part = m[kind]
            if not part["n"]:
                continue
            turns = f"{name}: {part['n']}" if m["memory_turns"]["n"] else str(part["n"])
            rows.append([label, turns, *(pair(part[k], 0) for k in LATENCY_METRICS)])
            label = ""
    head = ["agent", "turns", "time to first token", "whole reply", "end of the run",
            "next turn waits"]  # fmt: skip
    c = d["config"]
    note = (
        f"\n\nFake model: {c['first_token_s'] * 1000:.0f} ms to the first token, then "
        f"{c['tokens_per_s']:.0f} tokens/s ({c['reply_tokens']}-token replies); "
        f"{c['turns']} turns of one LoCoMo conversation; on {machine(d)}."
    )
    return table(head, rows) + note


def render_latency_adds(root: Path) -> str:
    """What memory adds to the time to first token, and the drain and check after the run."""
    d = load(root, "latency")
    rows = []
    for mode, label in LATENCY_MODES.items():
        m = d["modes"].get(mode)
        if not m or mode in LATENCY_BASELINES or "memory_adds_to_ttft" not in m:
            continue
        v = m.get("verification") or {}
        baseline = m.get("baseline", "respond_only")  # runs before it was recorded: respond
        against = "" if baseline == "respond_only" else f" (against {LATENCY_MODES[baseline]})"
        rows.append([
            label + against,
            pair(m["memory_adds_to_ttft"]),
            pair(m["memory_adds_to_ttft_excluding_embedding"]),
            f"{m['drain_after_last_turn_s']:.1f} s",
            f"{v.get('summarized', '-')} of {v.get('left_window', '-')}; "
            f"lost {v.get('lost', '-')}, duplicated {v.get('duplicated', '-')}",
        ])  # fmt: skip
    head = ["agent", "adds to TTFT, p50 / p95 ms", "without the embedding", "drain after last",
            "messages summarized"]  # fmt: skip
    return table(head, rows)


def render_latency_cost(root: Path) -> str:
    """Memory's own model calls and tokens per conversation turn."""
    d = load(root, "latency")["memory_cost_per_turn"]
    rows = [[num(c["turns"], 0), f"{c['calls_per_turn']:.2f}", num(c["input_tokens_per_turn"], 0),
             num(c["output_tokens_per_turn"], 0)] for c in d["conversations"]]  # fmt: skip
    head = ["conversation turns", "calls / turn", "input tokens / turn", "output tokens / turn"]
    return table(head, rows)


def render_latency_headline(root: Path) -> str:
    """One sentence: the next turn's wait and what memory adds to the first token."""
    d = load(root, "latency")
    bg, inline = d["modes"]["background"], d["modes"]["inline"]
    return (
        f"With memory in the background the next turn waits "
        f"**{pair(bg['memory_turns']['next_turn_waits'], 0)} ms** (p50 / p95) after a reply "
        f"that formed memory, against {pair(inline['memory_turns']['next_turn_waits'], 0)} ms "
        f"inline; memory adds {pair(bg['memory_adds_to_ttft_excluding_embedding'])} ms to the "
        f"time to first token without the query embedding; on {machine(d, dated=False)}."
    )


def render_throughput_table(root: Path) -> str:
    """Per engine: turns/s, reply latency, memory's TTFT cost, CPU by process, the bottleneck."""
    d = load(root, "throughput")
    c, rows = d["config"], []
    for r in d["engines"]:
        cpu, top, v = r["cpu_s"], r["busiest"], r["verification"]
        rows.append([
            r["engine"], num(r["turns_per_s"], 2), pair(r["ttft"], 0), pair(r["reply"], 0),
            pair(r["reply_first"]["memory_adds_to_ttft"]),
            " / ".join(num(cpu[g]) for g in ("servers", "postgres", "redis", "model", "client")),
            f"{top['group']} {num(top['cores'], 2)} (machine {num(top['machine_cores'], 2)}, "
            f"others {num(top['others_cores'], 2)})",
            f"{v['lost']} / {v['duplicated']}",
        ])  # fmt: skip
    head = ["engine", "turns/s", "TTFT p50 / p95 ms", "reply p50 / p95 ms",
            "memory adds to TTFT p50 / p95 ms",
            "CPU s: servers / Postgres / Redis / model / client",
            "busiest, cores", "lost / duplicated"]  # fmt: skip
    load_end = d["loadavg_at_end"][0]
    return table(head, rows) + (
        f"\n\n{c['conversations']} conversations x {c['turns']} turns at once per engine; "
        f"memory's TTFT cost from {c['reply_first_turns']} turns one at a time. On "
        f"{machine(d)}, load average {load_end:.1f} at the end; servers on Python "
        f"{d['machine']['server_python']}."
    )
