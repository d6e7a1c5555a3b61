"""The plot of `bench.longmemeval` (its table is `bench.render.quality`'s)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.longmemeval_data import QUESTION_TYPES


def plot(report: dict[str, Any], plt: Any) -> Any:
    """Turn-level recall per question type, one bar per method."""
    results = report["results"]
    types = [t for t in QUESTION_TYPES if t in results["memory_in_budget"]["turn_recall"]]
    groups = [*types, "overall"]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(results)
    for n, (method, r) in enumerate(results.items()):
        values = [r["turn_recall"].get(g) or 0.0 for g in groups]
        ax.bar(np.arange(len(groups)) + n * width, values, width, label=method)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2, groups, rotation=15, fontsize=8)
    ax.set_ylabel("turn-level evidence recall")
    ax.set_title(
        f"LongMemEval dev: {report['data']['questions']} questions, budget "
        f"{report['config']['budget_tokens']} tokens (window included)"
    )
    ax.legend(fontsize=7, ncol=4)
    return fig
