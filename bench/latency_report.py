"""The plot of `bench.latency`: p50/p95 per agent, memory-forming turns apart."""

from __future__ import annotations

from typing import Any

METRICS = ("ttft", "time_to_reply", "run_end", "next_turn_waits")
LABELS = {
    "ttft": "time to first token",
    "time_to_reply": "time to the whole reply",
    "run_end": "end of the turn's run",
    "next_turn_waits": "next turn waits",
}


def plot_latency(data: dict[str, Any], plt: Any) -> Any:
    """One panel per metric: p50 bars and p95 ticks, per agent and turn kind."""
    modes = list(data["modes"])
    groups = [(m, kind) for m in modes for kind in ("memory_turns", "other_turns")]
    groups = [(m, k) for m, k in groups if data["modes"][m][k]["n"]]
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 4.2))
    for ax, metric in zip(axes, METRICS, strict=True):
        p50 = [data["modes"][m][k][metric]["p50"] or 0 for m, k in groups]
        p95 = [data["modes"][m][k][metric]["p95"] or 0 for m, k in groups]
        xs = range(len(groups))
        baselines = ("respond_only", "agent_only")
        ax.bar(xs, p50, color=["#888" if m in baselines else "#2a7" for m, _ in groups])
        ax.scatter(xs, p95, marker="_", s=300, color="black", label="p95", zorder=3)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(
            [f"{m}\n{k.split('_')[0]}" for m, k in groups], rotation=45, ha="right", fontsize=7
        )
        ax.set_title(LABELS[metric], fontsize=9)
        ax.set_ylabel("ms (bar p50, tick p95)")
    cfg = data["config"]
    fig.suptitle(
        f"{cfg['turns']} turns, model {cfg['first_token_s'] * 1000:.0f} ms to first token, "
        f"{cfg['tokens_per_s']:.0f} tokens/s",
        fontsize=10,
    )
    return fig
