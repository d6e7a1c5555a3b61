"""Numbers of the benchmarks: percentiles, and a number for a printed table."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def ms_stats(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """n, p50, p95, p99, mean, min, max in milliseconds (None when empty)."""
    if not seconds:
        return {
            "n": 0,
            "p50": None,
            "p95": None,
            "p99": None,
            "mean": None,
            "min": None,
            "max": None,
        }
    a = np.asarray(seconds, dtype=float) * 1000.0
    return {
        "n": int(a.size),
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "mean": round(float(a.mean()), 3),
        "min": round(float(a.min()), 3),
        "max": round(float(a.max()), 3),
    }


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for the printed table ('-' when missing)."""
    return "-" if value is None else f"{value:.{digits}f}"
