"""Numbers and output of the benchmarks: percentiles, CLI parsing, JSON, plots, logs."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def parse_ints(text: str) -> list[int]:
    """``"1000,10k,1e5"`` → ``[1000, 10000, 100000]``."""
    out = []
    for raw in text.split(","):
        raw = raw.strip().lower()
        if not raw:
            continue
        mult = 1
        if raw.endswith("k"):
            raw, mult = raw[:-1], 1000
        elif raw.endswith("m"):
            raw, mult = raw[:-1], 1_000_000
        out.append(int(float(raw) * mult))
    if not out or any(v < 1 for v in out):
        raise ValueError(f"expected a comma-separated list of positive integers, got {text!r}")
    return out


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for the printed table ('-' when missing)."""
    return "-" if value is None else f"{value:.{digits}f}"


def write_json(path: Path, data: Any) -> None:
    """Write indented JSON (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def write_outputs(
    out: Path, name: str, data: Any, plot: Callable[[Any, Path], None]
) -> tuple[Path, Path]:
    """``<out>/<name>.json`` and ``<out>/<name>.png`` (drawn by ``plot``); their paths."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / f"{name}.json", out / f"{name}.png"
    write_json(json_path, data)
    plot(data, png_path)
    return json_path, png_path


def bench_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """A benchmark's CLI parser: described by its module docstring's first paragraph."""
    return argparse.ArgumentParser(
        prog=prog,
        description=doc.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )


def pyplot():  # noqa: ANN201
    """matplotlib.pyplot with the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def quiet_logs() -> None:
    """Keep the benchmark output to its tables (warnings of the memory nodes still show)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "sentence_transformers", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
