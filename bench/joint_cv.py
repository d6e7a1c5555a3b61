"""The recall knobs' grid, cross-validated over LoCoMo and LongMemEval together.

python -m bench joint_cv [--locomo bench/results/locomo.json]
    [--longmemeval bench/results/longmemeval.json] [--out bench/results]
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import main, write_results
from bench.locomo_data import SCORED_CATEGORIES
from bench.locomo_scoring import aggregate
from memory_graph_agent.settings import Settings

GRID: dict[str, tuple[Any, ...]] = {
    "topic_weight": (0.0, 0.5),
    "summary_turn_weight": (0.0, 0.3),
    "neighbour_weight": (0.0, 0.5),
    "newest_first": (False, True),
}
"""Recall-time knobs tuned on both datasets together (`bench.joint_cv`). The LoCoMo-only
``speaker_weight``/``speaker_turns`` and the index-time ``turn_context_weight`` keep what
LoCoMo's own cross-validation chose; a ``turn_context_weight`` here re-indexes the turns."""
ROUND_TRIP_KNOBS = ("entity_weight",)
"""Knobs that, above 0, add a statement after the searches (entity edges: ~4 ms p50 at 10k)."""
MIN_GAIN_FOR_ROUND_TRIP = 0.005
"""Overall recall (categories 1-4) a point with a round trip must add to be chosen."""


def grid_points(grid: dict[str, tuple[Any, ...]] = GRID) -> list[dict[str, Any]]:
    """Every combination of the grid's values."""
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def point_key(point: dict[str, Any]) -> str:
    """A stable name of a grid point, e.g. ``speaker_weight=1.5,entity_weight=0.1``."""
    return ",".join(f"{k}={v}" for k, v in point.items())


def points_by_weight(
    fit: Any, replayed: float, grid: dict[str, tuple[Any, ...]] = GRID
) -> dict[float, dict[str, Any]]:
    """The grid's points as runs of ``fit`` (a `Run`), by the turns' index-time weight."""
    by_weight: dict[float, dict[str, Any]] = {}
    for point in grid_points(grid):
        weight = point.get("turn_context_weight", replayed)
        by_weight.setdefault(weight, {})[point_key(point)] = fit.override(**point)
    return by_weight


def default_key() -> str:
    """The grid point the shipped settings make."""
    defaults = Settings().by_name()
    return point_key({k: defaults[k] for k in GRID})


def costs_round_trip(key: str) -> bool:
    """Whether grid point ``key`` (`point_key`) sets a `ROUND_TRIP_KNOBS` knob above 0."""
    values = dict(part.split("=", 1) for part in key.split(",") if "=" in part)
    return any(float(values.get(k, 0)) > 0 for k in ROUND_TRIP_KNOBS)


def grid_mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    """Mean recall of ``rows`` at grid point ``key`` (0 without rows)."""
    return float(np.mean([r["grid"][key] for r in rows])) if rows else 0.0


def best(keys: Sequence[str], score: Callable[[str], float], default: str) -> str:
    """The best-scoring key, ties to ``default``; a round trip must win by the minimum gain."""
    scores = {k: round(score(k), 9) for k in keys}

    def top(among: Sequence[str]) -> str:
        return max(among, key=lambda k: (scores[k], k == default))

    chosen, lean = top(keys), [k for k in keys if not costs_round_trip(k)]
    if not costs_round_trip(chosen) or not lean:
        return chosen
    return chosen if scores[chosen] - scores[top(lean)] > MIN_GAIN_FOR_ROUND_TRIP else top(lean)


def cross_validate_locomo(
    records: Sequence[dict[str, Any]], keys: Sequence[str], default: str
) -> dict[str, Any]:
    """Leave one conversation out: choose on the others, score on it."""

    def overall(rows: Sequence[dict[str, Any]], key: str) -> float:
        return grid_mean([r for r in rows if r["category"] in SCORED_CATEGORIES], key)

    folds, held_out = [], []
    for conv in sorted({r["sample_id"] for r in records}):
        train = [r for r in records if r["sample_id"] != conv]
        test = [r for r in records if r["sample_id"] == conv]
        chosen = best(keys, lambda k, rows=train: overall(rows, k), default)
        folds.append(
            {
                "held_out": conv,
                "chosen": chosen,
                "train_overall_1_4": round(overall(train, chosen), 4),
                "held_out_overall_1_4": round(overall(test, chosen), 4),
            }
        )
        held_out += [
            {
                "category": r["category"],
                "recall": {"cross_validated": r["grid"][chosen]},
                "tokens": {"cross_validated": r["grid_tokens"][chosen]},
            }
            for r in test
        ]
    return {
        **aggregate(held_out, ["cross_validated"])["cross_validated"],
        "grid": {k: list(v) for k, v in GRID.items()},
        "default": default,
        "min_gain_for_round_trip": MIN_GAIN_FOR_ROUND_TRIP,
        "best_in_sample": best(keys, lambda k: overall(records, k), default),
        "in_sample_overall_1_4": {k: round(overall(records, k), 4) for k in keys},
        "folds": folds,
    }


def parse_grid(text: str) -> dict[str, tuple[Any, ...]]:
    """``--grid 'a=0,0.5;b=5'`` as ``{"a": (0.0, 0.5), "b": (5,)}``, typed like the setting."""
    defaults = Settings().by_name()
    grid: dict[str, tuple[Any, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, values = part.partition("=")
        if name not in defaults:
            raise ValueError(f"unknown setting {name!r}")
        grid[name] = tuple(
            Settings().override(**{name: v.strip()}).by_name()[name] for v in values.split(",")
        )
    return grid


def cross_validate(
    locomo: Sequence[dict[str, Any]], lme: Sequence[dict[str, Any]], default: str
) -> dict[str, Any]:
    """Hold out each fold, choose on the rest of both datasets, score what was held out."""
    keys = sorted(set.intersection(*(set(r["grid"]) for r in [*locomo, *lme])))
    if default not in keys:
        raise ValueError(f"the default point {default!r} was not probed")

    def choose(lo: Sequence[dict], lm: Sequence[dict]) -> str:
        def objective(key: str) -> float:
            parts = [grid_mean(rows, key) for rows in (lo, lm) if rows]
            return float(np.mean(parts)) if parts else 0.0

        return best(keys, objective, default)

    def both(key: str) -> dict[str, float]:
        return {
            "locomo": round(grid_mean(locomo, key), 4),
            "longmemeval": round(grid_mean(lme, key), 4),
        }

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
    rows = [
        {"fold": f"locomo:{r['sample_id']}", "grid": r["grid"]}
        for r in locomo
        if r["category"] in SCORED_CATEGORIES and "grid" in r
    ]
    lme_rows = [
        {
            "fold": f"lme:{r['question_id']}",
            "grid": {k: v["turn_recall"] for k, v in r["grid"].items()},
        }
        for r in lme
    ]
    write_results(
        a.out, "joint_cv", cross_validate(rows, lme_rows, default_key()), show=("joint-cv",)
    )


if __name__ == "__main__":
    raise SystemExit(main("joint_cv"))
