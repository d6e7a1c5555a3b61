"""Numbers and output of `bench.overhead`: per-turn metrics, tables and the plot.

`full_turn_metrics` derives, from one turn's `TurnRecord`, the memory work with and
without the embeddings and the fake model's calls; `summarize_full` /
`summarize_baseline` turn a size's turns into percentiles; `plot_overhead` shows them next
to the peers' search-only numbers.
"""

from __future__ import annotations

from typing import Any

from bench.harness import ms_stats
from bench.timing import TurnRecord, on_path

PEERS_SEARCH_P50_MS = {
    "LangGraph AsyncPostgresStore": 4.03,
    "Mem0": 57.67,
    "langchain-postgres PGVectorStore": 2.52,
}
"""Peers' search-only p50, pre-embedded, the user's 10k memories among 9k of others: measured
by `bench.peers` on the reference machine (``bench/results/peers.json``, 2026-11-23)."""
MEMORY_NODES = ("load_profile", "recall", "trim_window", "summarize", "consolidate", "reflect")
ALL_NODES = (
    "load_profile",
    "recall",
    "respond",
    "trim_window",
    "summarize",
    "consolidate",
    "reflect",
)
HOT_PATH = ("load_profile", "recall")
"""Side by side: the hot path takes the longer of the two."""
POST_RESPONSE = ("trim_window", "summarize", "consolidate", "reflect")


# ---------------------------------------------------------------------- turn metrics


def full_turn_metrics(rec: TurnRecord, turn_s: float) -> dict[str, float]:
    """Derived per-turn numbers (seconds) of one full-graph turn."""
    nodes = rec.nodes
    # on the turn's path: load_profile and recall side by side count by the longer
    memory = on_path({n: nodes[n] for n in MEMORY_NODES if n in nodes})
    embed_q = rec.total("embed_query")
    waited = rec.total("embed_wait")  # what of embed_q the path waited for
    embed_d = rec.total("embed_documents")
    model_mem = rec.total_prefix("model:", exclude=("model:respond",))
    hot = max(nodes.get(n, 0.0) for n in HOT_PATH)  # side by side
    return {
        "turn": turn_s,
        "memory": memory,
        "memory_excl_embedding": memory - waited - embed_d,
        "memory_excl_embedding_and_model": memory - waited - embed_d - model_mem,
        "hot_path": hot,
        "hot_path_excl_embedding": hot - waited,
        "post_response": sum(nodes.get(n, 0.0) for n in POST_RESPONSE),
        "graph_overhead": turn_s - on_path(nodes),
        "recall_excl_embedding": nodes.get("recall", 0.0) - waited,
        "embed_query": embed_q,
        "embed_wait": waited,
        "embed_documents": embed_d,
        "model_in_memory_nodes": model_mem,
    }


def summarize_full(records: list[tuple[TurnRecord, float]]) -> dict[str, Any]:
    """p50/p95/... of the full graph per derived metric, per node and per timed call."""
    per_turn = [full_turn_metrics(r, t) for r, t in records]
    n = len(records)
    out: dict[str, Any] = {k: ms_stats([m[k] for m in per_turn]) for k in per_turn[0]}
    nodes = {}
    for name in ALL_NODES:
        vals = [r.nodes[name] for r, _ in records if name in r.nodes]
        nodes[name] = {
            **ms_stats(vals),
            "ran_in_turns": len(vals),
            "mean_per_turn": round(1000 * sum(vals) / n, 3),
        }
    out["nodes"] = nodes
    parts: dict[str, list[float]] = {}
    for r, _ in records:
        for k, v in r.parts.items():
            parts.setdefault(k, []).extend(v)
    out["calls"] = {
        k: {**ms_stats(v), "mean_per_turn": round(1000 * sum(v) / n, 3)}
        for k, v in sorted(parts.items())
    }
    return out


def summarize_baseline(records: list[tuple[TurnRecord, float]]) -> dict[str, Any]:
    """p50/p95/... of the respond-only graph."""
    return {
        "turn": ms_stats([t for _, t in records]),
        "respond": ms_stats([r.nodes.get("respond", 0.0) for r, _ in records]),
        "graph_overhead": ms_stats([t - sum(r.nodes.values()) for r, t in records]),
    }


def plot_overhead(data: dict[str, Any], plt: Any) -> Any:
    """Four panels: per-node time, turn latency, search growth, memory work vs peers."""
    rs = data["sizes"]
    sizes = [r["size"] for r in rs]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))

    ax = axes[0][0]
    labels = [f"{s:,}" for s in sizes] + ["respond only"]
    bottom = [0.0] * len(labels)
    parts = [
        ("load_profile", None),
        ("recall: embedding", "embed_query"),
        ("recall: rest", "recall_rest"),
        ("respond", None),
        ("trim_window", None),
        ("summarize", None),
        ("consolidate", None),
        ("reflect", None),
        ("graph/checkpoint", "graph_overhead"),
    ]
    for label, key in parts:
        vals = []
        for r in rs:
            f = r["full"]
            if key == "embed_query":
                vals.append(f["embed_query"]["mean"] or 0)
            elif key == "recall_rest":
                vals.append(f["recall_excl_embedding"]["mean"] or 0)
            elif key == "graph_overhead":
                vals.append(f["graph_overhead"]["mean"] or 0)
            else:
                vals.append(f["nodes"][label]["mean_per_turn"])
        b = rs[-1]["baseline"]
        vals.append(
            b["respond"]["mean"] or 0
            if label == "respond"
            else (b["graph_overhead"]["mean"] or 0 if key == "graph_overhead" else 0)
        )
        ax.bar(labels, vals, bottom=bottom, label=label)
        bottom = [x + y for x, y in zip(bottom, vals, strict=True)]
    ax.set_ylabel("mean ms per turn (amortized)")
    ax.set_title("Where a turn's time goes (memories of the benchmark user)")
    ax.legend(fontsize=7)

    ax = axes[0][1]
    for key, label, style in (
        ("full", "full memory graph", "o-"),
        ("baseline", "respond only", "s--"),
    ):
        ax.plot(sizes, [r[key]["turn"]["p50"] for r in rs], style, label=f"{label} p50")
        ax.plot(sizes, [r[key]["turn"]["p95"] for r in rs], style, alpha=0.5, label=f"{label} p95")
    ax.plot(sizes, [r["full"]["embed_query"]["p50"] for r in rs], "^:", label="query embedding p50")
    ax.set_xscale("log")
    ax.set_xlabel("stored memories of the benchmark user")
    ax.set_ylabel("ms")
    ax.set_title("Per-turn latency")
    ax.legend(fontsize=7)

    ax = axes[1][0]
    s50 = [r["search_only_pre_embedded"]["p50"] for r in rs]
    s95 = [r["search_only_pre_embedded"]["p95"] for r in rs]
    g50 = [r["full"]["calls"].get("search", {}).get("p50") for r in rs]
    g95 = [r["full"]["calls"].get("search", {}).get("p95") for r in rs]
    ax.plot(sizes, s50, "o-", label="search only (pre-embedded) p50")
    ax.plot(sizes, s95, "o--", label="search only p95")
    ax.plot(sizes, g50, "s-", label="in-graph recall search p50")
    ax.plot(sizes, g95, "s--", label="in-graph recall search p95")
    for (name, v), c in zip(PEERS_SEARCH_P50_MS.items(), ("grey", "silver", "black"), strict=True):
        ax.axhline(v, color=c, ls=":", lw=1, label=f"{name} search p50 ({v} ms)")
    ax.set_xscale("log")
    ax.set_xlabel("stored memories of the benchmark user")
    ax.set_ylabel("ms")
    ax.set_title("Recall search vs size")
    ax.legend(fontsize=7)

    ax = axes[1][1]
    for key, label in (
        ("memory_excl_embedding", "memory work excl. embedding"),
        ("memory_excl_embedding_and_model", "... and excl. fake model"),
        ("hot_path_excl_embedding", "hot path (profile+recall) excl. emb."),
    ):
        ax.plot(sizes, [r["full"][key]["p50"] for r in rs], "o-", label=f"{label} p50")
        ax.plot(sizes, [r["full"][key]["p95"] for r in rs], "o--", alpha=0.5, label=f"{label} p95")
    for (name, v), c in zip(PEERS_SEARCH_P50_MS.items(), ("grey", "silver", "black"), strict=True):
        ax.axhline(v, color=c, ls=":", lw=1, label=f"{name} search p50")
    ax.set_xscale("log")
    ax.set_xlabel("stored memories of the benchmark user")
    ax.set_ylabel("ms per turn")
    ax.set_title("Our memory work per turn (no embedding) vs peers' search alone")
    ax.legend(fontsize=7)

    m = data["machine"]
    fig.suptitle(
        f"memory graph overhead: {m['cpu_model']}, {m['cores']} cores, "
        f"Python {m['python']}, pgvector {m['pgvector']}",
        fontsize=10,
    )
    return fig
