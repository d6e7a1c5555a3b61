"""The recall knobs' grid, cross-validated over LoCoMo and LongMemEval together.

python -m bench joint_cv [--locomo bench/results/locomo.json]
    [--longmemeval bench/results/longmemeval.json] [--out bench/results]
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import main, write_results
from bench.locomo_data import SCORED_CATEGORIES
from memory_graph_agent.settings import Settings

GRID: dict[str, tuple[Any, ...]] = {
    "topic_weight": (0.0, 0.5),
    "summary_turn_weight": (0.0, 0.3),
    "neighbour_weight": (0.0, 0.5),
    "newest_first": (False, True),
    "neighbour_reach": (1, 2),
}
"""Recall-time knobs, probed on one replay by both benchmarks and tuned on both together."""
REPLAY_KNOBS = ("turn_context_weight",)
"""Knobs a replay applies (the turns' stored vectors): set in the environment, not probed."""


def grid_points(grid: dict[str, tuple[Any, ...]] = GRID) -> list[dict[str, Any]]:
    """Every combination of the grid's values that recalls differently from the others.

    A reach without neighbours (``neighbour_weight`` 0) recalls what the first reach
    does, so only the first is probed there.
    """
    points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    first_reach = grid.get("neighbour_reach", (None,))[0]
    return [
        p for p in points
        if p.get("neighbour_weight") != 0 or p.get("neighbour_reach", first_reach) == first_reach
    ]  # fmt: skip


def point_key(point: dict[str, Any]) -> str:
    """A stable name of a grid point, e.g. ``topic_weight=0.0,newest_first=True``."""
    return ",".join(f"{k}={v}" for k, v in point.items())


def points(fit: Any, grid: dict[str, tuple[Any, ...]] = GRID) -> dict[str, Any]:
    """The grid's points as runs of ``fit`` (a `bench.locomo_pipeline.Run`), by key."""
    return {point_key(p): fit.override(**p) for p in grid_points(grid)}


def default_key() -> str:
    """The grid point the shipped settings make."""
    defaults = Settings().by_name()
    return point_key({k: defaults[k] for k in GRID})


def parse_grid(text: str) -> dict[str, tuple[Any, ...]]:
    """``--grid 'a=0,0.5;b=5'`` as ``{"a": (0.0, 0.5), "b": (5,)}``, typed like the setting."""
    defaults = Settings().by_name()
    grid: dict[str, tuple[Any, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, values = part.partition("=")
        if name not in defaults or name in REPLAY_KNOBS:
            raise ValueError(f"{name!r} is not a recall-time setting")
        grid[name] = tuple(
            Settings().override(**{name: v.strip()}).by_name()[name] for v in values.split(",")
        )
    return grid


def grid_mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    """Mean recall of ``rows`` at grid point ``key`` (0 without rows)."""
    return float(np.mean([r["grid"][key] for r in rows])) if rows else 0.0


def cross_validate(
    locomo: Sequence[dict[str, Any]], lme: Sequence[dict[str, Any]], default: str
) -> dict[str, Any]:
    """Hold out each fold, choose on the rest of both datasets, score what was held out.

    A fold chooses the point with the best mean of the two datasets' recall, ties to
    ``default``.
    """
    keys = sorted(set.intersection(*(set(r["grid"]) for r in [*locomo, *lme])))
    if default not in keys:
        raise ValueError(f"the default point {default!r} was not probed")

    def choose(lo: Sequence[dict], lm: Sequence[dict]) -> str:
        def objective(key: str) -> float:
            parts = [grid_mean(rows, key) for rows in (lo, lm) if rows]
            return round(float(np.mean(parts)), 9) if parts else 0.0

        return max(keys, key=lambda k: (objective(k), k == default))

    def both(key: str) -> dict[str, float]:
        return {"locomo": round(grid_mean(locomo, key), 4),
                "longmemeval": round(grid_mean(lme, key), 4)}  # fmt: skip

    held: dict[str, list[float]] = {"locomo": [], "longmemeval": []}
    chosen: dict[str, int] = {}
    for fold in sorted({r["fold"] for r in [*locomo, *lme]}):
        point = choose(
            [r for r in locomo if r["fold"] != fold], [r for r in lme if r["fold"] != fold]
        )
        chosen[point] = chosen.get(point, 0) + 1
        name = "locomo" if fold.startswith("locomo:") else "longmemeval"
        test = locomo if name == "locomo" else lme
        held[name] += [r["grid"][point] for r in test if r["fold"] == fold]
    in_sample = choose(locomo, lme)
    return {
        "default": default,
        "best_in_sample": in_sample,
        "chosen_in_folds": chosen,
        "cross_validated": {k: round(float(np.mean(v)), 4) for k, v in held.items() if v},
        "in_sample_at_best": both(in_sample),
        "in_sample_at_default": both(default),
        "points": {k: both(k) for k in keys},
    }


def flags(p: argparse.ArgumentParser) -> None:
    """Both benchmarks' JSON; ``--out`` is where ``joint_cv.json`` goes."""
    p.set_defaults(out=Path("bench/results"))
    p.add_argument("--locomo", default="bench/results/locomo.json")
    p.add_argument("--longmemeval", default="bench/results/longmemeval.json")


def run(a: argparse.Namespace) -> None:
    """Read both benchmarks' JSON, cross-validate, write and show the result."""
    locomo = json.loads(Path(a.locomo).read_text())["questions"]
    lme = json.loads(Path(a.longmemeval).read_text())["questions"]
    rows = [{"fold": f"locomo:{r['sample_id']}", "grid": r["grid"]}
            for r in locomo if r["category"] in SCORED_CATEGORIES and "grid" in r]  # fmt: skip
    lme_rows = [{"fold": f"lme:{r['question_id']}", "grid": {k: v["turn_recall"]
                 for k, v in r["grid"].items()}} for r in lme]  # fmt: skip
    result = cross_validate(rows, lme_rows, default_key())
    write_results(a.out, "joint_cv", result, show=("joint-cv",))


if __name__ == "__main__":
    raise SystemExit(main("joint_cv"))
