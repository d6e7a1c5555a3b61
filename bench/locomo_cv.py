"""Leave-one-conversation-out cross-validation of the recall knobs `bench.locomo` tunes.

Every question is recalled (within the budget, window included) once per point of
`GRID`. For each conversation, the point with the best overall recall on the *other*
conversations is chosen and scored on the held-out one; the held-out scores together are
the cross-validated figure. A knob's default counts only if it holds up there.

A point that costs the read path a round trip (`ROUND_TRIP_KNOBS` above 0) is chosen only
if it beats the best point without one by more than `MIN_GAIN_FOR_ROUND_TRIP`: recall
is weighed against the latency users pay for it, inside every fold.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.locomo_data import SCORED_CATEGORIES
from bench.locomo_scoring import aggregate
from memory_graph_agent.settings import Settings

GRID: dict[str, tuple[Any, ...]] = {
    "topic_weight": (0.0, 0.5),
    "summary_turn_weight": (0.0, 0.3),
    "neighbour_weight": (0.0, 0.5),
    "newest_first": (False, True),
}
"""The recall knobs tuned on LoCoMo and LongMemEval together (`bench.joint_cv`), and the
values tried. Every point is a recall-time setting, so both benchmarks probe it on the same
replay. The LoCoMo-only knobs (``speaker_weight`` 1.5, ``speaker_turns`` 40: no speaker is
named in an assistant conversation, so they change nothing there) and the index-time
``turn_context_weight`` (0.25) keep the values LoCoMo's own cross-validation chose; put
them back here to weigh them again (``turn_context_weight`` makes `bench.locomo` index the
turns again per value)."""

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
    """The grid's points as runs of ``fit`` (a `Run`), by the turns' index-time weight.

    ``replayed``: the ``turn_context_weight`` the replay indexed with (a point without the
    knob is asked with those vectors); each other value needs the turns indexed again.
    """
    by_weight: dict[float, dict[str, Any]] = {}
    for point in grid_points(grid):
        weight = point.get("turn_context_weight", replayed)
        by_weight.setdefault(weight, {})[point_key(point)] = fit.override(**point)
    return by_weight


def default_key() -> str:
    """The grid point the shipped `Context` defaults make."""
    defaults = Settings().by_name()
    return point_key({k: defaults[k] for k in GRID})


def costs_round_trip(key: str) -> bool:
    """Whether grid point ``key`` (`point_key`) sets a `ROUND_TRIP_KNOBS` knob above 0."""
    values = dict(part.split("=", 1) for part in key.split(",") if "=" in part)
    return any(float(values.get(k, 0)) > 0 for k in ROUND_TRIP_KNOBS)


def overall(records: Sequence[dict[str, Any]], key: str) -> float:
    """Mean recall of the scored categories' questions at grid point ``key``."""
    scored = [r["grid"][key] for r in records if r["category"] in SCORED_CATEGORIES]
    return float(np.mean(scored)) if scored else 0.0


def cross_validate(
    records: Sequence[dict[str, Any]], keys: Sequence[str], default: str
) -> dict[str, Any]:
    """Leave one conversation out: choose on the others, score on it; ties go to ``default``."""

    def best(rows: Sequence[dict[str, Any]]) -> str:
        score = {k: round(overall(rows, k), 9) for k in keys}
        top = max(keys, key=lambda k: (score[k], k == default))
        lean = [k for k in keys if not costs_round_trip(k)]
        if not costs_round_trip(top) or not lean:
            return top
        top_lean = max(lean, key=lambda k: (score[k], k == default))
        return top if score[top] - score[top_lean] > MIN_GAIN_FOR_ROUND_TRIP else top_lean

    folds, held_out = [], []
    for conv in sorted({r["sample_id"] for r in records}):
        train = [r for r in records if r["sample_id"] != conv]
        test = [r for r in records if r["sample_id"] == conv]
        chosen = best(train)
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
    result = aggregate(held_out, ["cross_validated"])["cross_validated"]
    return {
        **result,
        "grid": {k: list(v) for k, v in GRID.items()},
        "default": default,
        "min_gain_for_round_trip": MIN_GAIN_FOR_ROUND_TRIP,
        "best_in_sample": best(records),
        "in_sample_overall_1_4": {k: round(overall(records, k), 4) for k in keys},
        "folds": folds,
    }


def parse_grid(text: str) -> dict[str, tuple[Any, ...]]:
    """``--grid 'a=0,0.5;b=5'`` as ``{"a": (0.0, 0.5), "b": (5,)}``, typed like the setting.

    Settings go by their environment names in lower case (``neighbour_weight``), as
    `Settings.override` takes them.
    """
    defaults = Settings().by_name()
    grid: dict[str, tuple[Any, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, values = part.partition("=")
        if name not in defaults:  # a recall weight by its own name (`RecallWeights`)
            raise ValueError(f"unknown setting {name!r}")
        # typed and checked as the environment's values are
        grid[name] = tuple(
            Settings().override(**{name: v.strip()}).by_name()[name] for v in values.split(",")
        )
    return grid
