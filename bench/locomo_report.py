"""The report of `bench.locomo`: progress, configuration, provenance, table and plot.

Progress is a rich bar on a terminal and one line per 10% in logs; `run_config` records
everything that defines the numbers, `data_summary` / `git_commit` which data and code
produced them; `plot` shows evidence recall per category and method
next to the reference numbers (`REFERENCE`) and the context tokens spent.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.env import EMBEDDING
from bench.locomo_data import CATEGORIES, SCORED_CATEGORIES, Conversation
from bench.locomo_pipeline import recall_context, replay_context
from bench.locomo_scoring import BM25_B, BM25_K1, CHUNK_TURNS, METHODS, RRF_K
from bench.render.common import num

REFERENCE = {
    "window": 0.02,
    "dense": 0.71,
    "bm25": 0.71,
    "hybrid": 0.79,
    "dense_chunks5": 0.64,
    "full": 1.0,
}
"""Evidence recall over categories 1-4 measured on locomo8.json (MiniLM, 1,800 tokens)."""
REFERENCE_FULL_TOKENS = 24_000


class LineProgress:
    """A plain progress report for logs (no terminal): one line per 10% of a task."""

    def __init__(self) -> None:
        self.tasks: dict[int, dict[str, Any]] = {}

    def add_task(self, description: str, total: int) -> int:
        """Register a task; returns its id."""
        self.tasks[len(self.tasks)] = {"description": description, "total": total, "done": 0}
        return len(self.tasks) - 1

    def update(self, task: int, description: str) -> None:
        """Rename a task (the conversation being processed)."""
        self.tasks[task]["description"] = description

    def advance(self, task: int) -> None:
        """One more step; print at every 10% of the total."""
        t = self.tasks[task]
        t["done"] += 1
        step = max(1, t["total"] // 10)
        if t["done"] % step == 0 or t["done"] == t["total"]:
            print(f"[locomo] {t['description']}: {t['done']}/{t['total']}", file=sys.stderr)


@contextlib.contextmanager
def progress_bar(enabled: bool) -> Iterator[Any]:
    """A rich progress bar on a terminal, `LineProgress` otherwise, silent if disabled."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    if enabled and not console.is_terminal:
        yield LineProgress()
        return
    with Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
    ) as bar:
        yield bar


def data_summary(path: Path, conversations: Sequence[Conversation]) -> dict[str, Any]:
    """File identity and sizes."""
    questions = [q for c in conversations for q in c.questions]
    return {
        "path": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "conversations": len(conversations),
        "sessions": sum(c.sessions for c in conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "scored_questions": sum(q.scored for q in questions),
        "questions_by_category": dict(Counter(str(q.category) for q in questions)),
    }


def run_config(budget: int, recall_k: int, conversations: Sequence[Conversation]) -> dict:
    """Everything that defines the numbers."""
    sample = conversations[0] if conversations else Conversation("sample", [], [], 0)
    # flat, with the members of the recall weights' group (the shape of earlier results)
    replay_ctx = replay_context(sample, "registered:locomo-guard").by_name()
    recall_ctx = recall_context(sample, "registered:locomo-guard", budget, recall_k).by_name()
    for c in (replay_ctx, recall_ctx):
        c["user_id"] = "locomo-<sample_id>"
    return {
        "budget_tokens": budget,
        "embedding_model": EMBEDDING,
        "token_counter": "langchain_core count_tokens_approximately",
        "turn_text": "StoredMessage.render(): '[<session date ISO>[:16]] <speaker>: <text>'",
        "turn_cost": "ceil((characters + newline) / 4) of the line the prompt shows, as recall "
        "counts a memory line; recall's turns are grouped under one date line per day, "
        "which each group pays once; a baseline's line carries its own date",
        "window_cost": "count_tokens_approximately(window messages, speaker name included)",
        "budget_fill": "greedy in rank order, items that do not fit are skipped",
        "replay_context": replay_ctx,
        "recall_context": recall_ctx,
        "recall_context_in_budget": "recall_context with memory_token_budget = budget; the "
        "recall node fills what the window leaves of it (budgets.recall_budget)",
        "replay_graph": "trim_window -> summarize -> consolidate -> reflect "
        "(graph.routing), no checkpointer, one ainvoke per turn",
        "chunk_turns": CHUNK_TURNS,
        "bm25": {
            "k1": BM25_K1,
            "b": BM25_B,
            "idf": "ln(1 + (N - df + 0.5) / (df + 0.5))",
            "tokens": "lower-cased \\w+, English stopwords removed, suffixes ing/ed/es/s stripped",
        },
        "rrf_k": RRF_K,
        "methods": METHODS,
        "scored_categories": list(SCORED_CATEGORIES),
        "categories": {str(k): v for k, v in CATEGORIES.items()},
    }


def git_commit() -> str | None:
    """HEAD of the checkout (suffixed ``-dirty`` with local changes), if in git."""
    try:
        root = Path(__file__).resolve().parent.parent
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def plot(report: dict[str, Any], plt: Any) -> Any:
    """Grouped bars of evidence recall per category and method, plus context tokens."""
    results = dict(report["results"])
    if report.get("cross_validated"):
        results["memory_in_budget (cv)"] = report["cross_validated"]
    methods = list(results)
    groups = [str(c) for c in CATEGORIES] + ["overall"]
    labels = [f"{c} {n}" for c, n in CATEGORIES.items()] + ["overall 1-4"]
    fig, (ax, ax_tokens) = plt.subplots(
        1, 2, figsize=(15, 6.2), gridspec_kw={"width_ratios": [3, 1.2]}
    )
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        r = results[method]
        values = [r["by_category"][g] if g != "overall" else r["overall_1_4"] for g in groups]
        xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, [v or 0.0 for v in values], width, label=method)
    ax.set_xticks(range(len(groups)), labels)
    ax.set_ylabel("evidence recall")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"LoCoMo evidence recall @ {report['config']['budget_tokens']} tokens")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    ax.grid(axis="y", alpha=0.3)
    tokens = [results[m]["tokens_mean"] or 0 for m in methods]
    ax_tokens.barh(methods, tokens, color=[f"C{j}" for j in range(len(methods))])
    ax_tokens.set_xscale("log")
    ax_tokens.invert_yaxis()
    ax_tokens.axvline(report["config"]["budget_tokens"], color="grey", linestyle="--", lw=1)
    for y, (m, t) in enumerate(zip(methods, tokens, strict=True)):
        ax_tokens.text(t, y, f" {t:,.0f} | {num(results[m]['overall_1_4'], 2)}", va="center")
    ax_tokens.set_title("context tokens per question | recall 1-4")
    ax_tokens.set_xlim(right=max(tokens + [1]) * 8)
    return fig
