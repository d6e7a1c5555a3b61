"""Numbers and output of `bench.peers`: per-system percentiles, tables and the plot.

`summarize_size` turns one size's samples into p50/p95, the ratio of p50 to the floor's
(the floor with its embedding for calls that embed, the floor's kNN for pre-embedded
ones and for the embedding alone) and the results returned out of k; `plot_peers` draws
them (the tables are `bench.render.speed`'s).
"""

from __future__ import annotations

from typing import Any

from bench.harness import ms_stats
from bench.render.speed import READ_PATH, READ_PATH_EXIT, peer_order
from graph.durability import TURN_DURABILITY

FLOOR = "floor"
READ_PATHS = {READ_PATH: None, READ_PATH_EXIT: TURN_DURABILITY}
"""Our read paths by the durability of their turn: LangGraph's default (``ainvoke``, the
server's runs) and the CLI's (`graph.durability.turn_durability`: ``"exit"``)."""
WITH, PRE = "with_embedding", "pre_embedded"
BREAKDOWN = (
    "read_path",
    "read_path_excl_embedding",
    "embed_query",
    "embed_wait",
    "load_profile",
    "recall",
    "search",
    "touch",
    "graph_overhead",
    "turn",
)


def _returned(counts: list[int], k: int) -> dict[str, float]:
    return {
        "mean": round(sum(counts) / len(counts), 2),
        "min": min(counts),
        "max": max(counts),
        "k": k,
        "share_full_k": round(sum(c >= k for c in counts) / len(counts), 3),
    }


def summarize_size(
    size: int,
    k: int,
    samples: dict[tuple[str, str], list[tuple[float, int]]],
    read_paths: dict[str, list[dict[str, float]]],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """One size: per system and mode, latency stats, × floor and returned out of k.

    ``read_paths``: the turns of each of our read paths (`READ_PATHS`), by name.
    """
    systems: dict[str, dict[str, Any]] = {}
    for (name, mode), values in samples.items():
        entry = {"latency": ms_stats([s for s, _ in values])}
        if name != "query embedding":
            entry["returned"] = _returned([n for _, n in values], k)
        systems.setdefault(name, {})[mode] = entry
    for name, read_path in read_paths.items():
        systems[name] = _read_path_entry(read_path, k)
    floors = {
        WITH: systems[FLOOR][WITH]["latency"]["p50"],
        PRE: systems[FLOOR][PRE]["latency"]["p50"],
    }
    for entry in systems.values():
        for mode, floor in floors.items():
            if mode in entry and floor:
                entry[mode]["x_floor_p50"] = round(entry[mode]["latency"]["p50"] / floor, 2)
    return {"size": size, **extra, "systems": systems}


def _read_path_entry(read_path: list[dict[str, float]], k: int) -> dict[str, Any]:
    return {
        WITH: {
            "latency": ms_stats([r["read_path"] for r in read_path]),
            "returned": _returned([int(r["returned"]) for r in read_path], k),
            "returned_is": "items recall put in the prompt: memories and raw turns up to the "
            "memory token budget, not top-k",
            "recalled_raw_turns_mean": round(
                sum(r["recalled_turns"] for r in read_path) / len(read_path), 2
            ),
        },
        "breakdown": {key: ms_stats([r[key] for r in read_path]) for key in BREAKDOWN},
    }


def plot_peers(data: dict[str, Any], plt: Any) -> Any:
    """Two panels: p50 (bars) with p95 whiskers per size, with embedding and pre-embedded."""
    rs = data["sizes"]
    names = peer_order(rs[-1]["systems"])
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    width = 0.8 / max(1, len(names))
    for ax, mode, title in (
        (axes[0], WITH, "with the query embedding (read path: up to the model call)"),
        (axes[1], PRE, "pre-embedded (search alone)"),
    ):
        for j, name in enumerate(names):
            xs, p50, err = [], [], []
            for i, r in enumerate(rs):
                e = r["systems"].get(name, {}).get(mode)
                if not e:
                    continue
                xs.append(i + (j - (len(names) - 1) / 2) * width)
                p50.append(e["latency"]["p50"])
                err.append(e["latency"]["p95"] - e["latency"]["p50"])
            if xs:
                ax.bar(xs, p50, width, yerr=[[0] * len(err), err], capsize=2, label=name)
        ax.set_xticks(range(len(rs)), [f"{r['size']:,}" for r in rs])
        c = data["config"]
        ax.set_xlabel(
            f"memories of the benchmark user (plus {c['other_users'] * c['per_other_user']:,} "
            "of other users)"
        )
        ax.set_yscale("log")  # Mem0 grows to hundreds of ms, the others stay at a few
        ax.set_ylabel("ms, log scale (bar p50, whisker p95)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    m = data["machine"]
    fig.suptitle(
        f"peers on one Postgres {m['postgres']} + pgvector {m['pgvector']}: {m['cpu_model']}, "
        f"{m['cores']} cores, load {m['loadavg_at_start'][0]:.1f} at start",
        fontsize=10,
    )
    return fig
