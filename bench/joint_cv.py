"""One configuration for LoCoMo and LongMemEval: cross-validation over both datasets together.

Both benchmarks probe every question at every point of the same grid (`bench.locomo_cv.GRID`)
and keep the per-question results (``grid``) in their JSON. A fold holds out one LoCoMo
conversation or one LongMemEval question; the point chosen on the rest is the one with
the best mean of the two datasets' overall recall (LoCoMo categories 1-4, LongMemEval
turn-level recall), ties going to the shipped default, and it is scored on what was held
out. The held-out scores of each dataset together are its cross-validated figure. A point
that helps one dataset and hurts the other loses on the mean, so it is not chosen.

    .venv/bin/python -m bench.joint_cv [--locomo bench/results/locomo.json]
        [--longmemeval bench/results/longmemeval.json] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import main, write_results
from bench.locomo_cv import default_key
from bench.locomo_data import SCORED_CATEGORIES


def _locomo_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """LoCoMo's scored questions: fold (conversation), recall per grid point."""
    return [
        {"fold": f"locomo:{r['sample_id']}", "grid": r["grid"]}
        for r in report["questions"]
        if r["category"] in SCORED_CATEGORIES and "grid" in r
    ]


def _lme_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """LongMemEval's questions: fold (the question), turn recall per grid point."""
    return [
        {
            "fold": f"lme:{r['question_id']}",
            "type": r["question_type"],
            "grid": {k: v["turn_recall"] for k, v in r["grid"].items()},
        }
        for r in report["questions"]
    ]


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    return float(np.mean([r["grid"][key] for r in rows])) if rows else 0.0


def objective(locomo: Sequence[dict], lme: Sequence[dict], key: str) -> float:
    """The mean of the two datasets' overall recall at grid point ``key``."""
    parts = [_mean(rows, key) for rows in (locomo, lme) if rows]
    return float(np.mean(parts)) if parts else 0.0


def cross_validate(
    locomo: Sequence[dict[str, Any]], lme: Sequence[dict[str, Any]], default: str
) -> dict[str, Any]:
    """Hold out each fold, choose on the rest of both datasets, score what was held out."""
    keys = sorted(set.intersection(*(set(r["grid"]) for r in [*locomo, *lme])))
    if default not in keys:
        raise ValueError(f"the default point {default!r} was not probed")

    def best(lo: Sequence[dict], lm: Sequence[dict]) -> str:
        score = {k: round(objective(lo, lm, k), 9) for k in keys}
        return max(keys, key=lambda k: (score[k], k == default))

    held: dict[str, list[float]] = {"locomo": [], "longmemeval": []}
    chosen: dict[str, int] = {}
    for fold in sorted({r["fold"] for r in [*locomo, *lme]}):
        lo = [r for r in locomo if r["fold"] != fold]
        lm = [r for r in lme if r["fold"] != fold]
        point = best(lo, lm)
        chosen[point] = chosen.get(point, 0) + 1
        name = "locomo" if fold.startswith("locomo:") else "longmemeval"
        test = [r for r in (locomo if name == "locomo" else lme) if r["fold"] == fold]
        held[name] += [r["grid"][point] for r in test]
    in_sample = best(locomo, lme)
    return {
        "default": default,
        "best_in_sample": in_sample,
        "chosen_in_folds": chosen,
        "cross_validated": {k: round(float(np.mean(v)), 4) for k, v in held.items() if v},
        "in_sample_at_best": {
            "locomo": round(_mean(locomo, in_sample), 4),
            "longmemeval": round(_mean(lme, in_sample), 4),
        },
        "in_sample_at_default": {
            "locomo": round(_mean(locomo, default), 4),
            "longmemeval": round(_mean(lme, default), 4),
        },
        "points": {
            k: {
                "locomo": round(_mean(locomo, k), 4),
                "longmemeval": round(_mean(lme, k), 4),
            }
            for k in keys
        },
    }


def flags(p: argparse.ArgumentParser) -> None:
    """Both benchmarks' JSON; ``--out`` is where ``joint_cv.json`` goes."""
    p.set_defaults(out=Path("bench/results"))
    p.add_argument("--locomo", default="bench/results/locomo.json")
    p.add_argument("--longmemeval", default="bench/results/longmemeval.json")


def run(a: argparse.Namespace) -> None:
    """Read both benchmarks' JSON, cross-validate, print and write the result."""
    locomo = _locomo_rows(json.loads(Path(a.locomo).read_text()))
    lme = _lme_rows(json.loads(Path(a.longmemeval).read_text()))
    result = cross_validate(locomo, lme, default_key())
    write_results(a.out, "joint_cv", result, show=("joint-cv",))


if __name__ == "__main__":
    raise SystemExit(main("joint_cv"))
