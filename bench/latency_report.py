"""Plot and table of `bench.latency`: p50/p95 per agent, memory-forming turns apart."""

from __future__ import annotations

from typing import Any

from bench.stats import fmt

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


def print_latency(data: dict[str, Any]) -> None:
    """The p50/p95 table, memory's added TTFT and its model cost per turn."""
    print(f"{'agent':<24}{'turns':<14}" + "".join(f"{LABELS[m]:>26}" for m in METRICS))
    for mode, result in data["modes"].items():
        for kind in ("memory_turns", "other_turns"):
            row = result[kind]
            if not row["n"]:
                continue
            cells = "".join(
                f"{fmt(row[m]['p50'], 0) + ' / ' + fmt(row[m]['p95'], 0) + ' ms':>26}"
                for m in METRICS
            )
            label = f"{kind.split('_')[0]} ({row['n']})"
            print(f"{mode:<24}{label:<14}{cells}")
    for mode, result in data["modes"].items():
        added = result.get("memory_adds_to_ttft_excluding_embedding")
        if added:
            print(
                f"{mode}: memory adds {fmt(added['p50'], 1)} ms p50 / {fmt(added['p95'], 1)} ms "
                f"p95 to TTFT without the query embedding (which takes "
                f"{fmt(result['query_embedding']['p50'], 1)} ms p50; with it: "
                f"{_whole(result)}); background drain {result['drain_after_last_turn_s']} s; "
                f"check {result.get('verification')}"
            )
    for conv in data["memory_cost_per_turn"].get("conversations", []):
        print(
            f"memory cost over {conv['turns']} LoCoMo turns: {conv['calls_per_turn']:.2f} "
            f"calls, {conv['input_tokens_per_turn']:.0f} input + "
            f"{conv['output_tokens_per_turn']:.0f} output tokens per turn"
        )


def _whole(result: dict) -> str:
    whole = result.get("memory_adds_to_ttft")  # absent from runs before it was reported
    return f"{fmt(whole['p50'], 1)} / {fmt(whole['p95'], 1)} ms" if whole else "not reported"
