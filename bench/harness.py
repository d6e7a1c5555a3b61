"""The one runner and the one writer of the benchmarks.

``python -m bench <scenario> [flags]`` parses the common flags the scenario names in
``COMMON`` (default ``("out",)``) and those its ``flags(parser)`` adds, then calls its
``run(args)`` (a coroutine is run to its end): exit 1 if it returns False, the int it
returns, else 0. Results go through `write_results`: ``<out>/<name>.json`` and its plot.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SCENARIOS = ("locomo", "longmemeval", "joint_cv", "latency", "throughput",
             "peers", "growth", "soak", "in_session")  # fmt: skip
"""Every benchmark, by module name in `bench`."""


def parse_ints(text: str) -> list[int]:
    """``"1000,10k,1e5"`` → ``[1000, 10000, 100000]``."""
    out = [int(float(v.strip().lower().replace("k", "e3"))) for v in text.split(",") if v.strip()]
    if not out or any(v < 1 for v in out):
        raise ValueError(f"expected a comma-separated list of positive integers, got {text!r}")
    return out


COMMON_FLAGS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "out": (("--out", {"type": Path, "default": Path("bench/out"), "help": "output folder"}),),
    "seed": (("--seed", {"type": int, "default": 7, "help": "random seed"}),),
    "database": (("--database-url", {"default": None, "help": "use this database as is "
                                     "(default: a fresh one, dropped afterwards)"}),),
    "redis": (
        ("--redis-url", {"default": None, "help": "use this Redis (default: the embedded)"}),
        ("--key-prefix", {"default": None, "help": "Redis key prefix (default: a fresh one)"}),
    ),
    "quiet": (("--quiet", {"action": "store_true", "help": "no progress on stderr"}),),
    "seeded": (
        ("--sizes", {"type": parse_ints, "default": "1000,10000,100000",
                     "help": "stored memories of the benchmark user, comma-separated "
                     "(1k, 1e5 ok)"}),
        ("--other-users", {"type": int, "default": 9, "help": "users beside the benchmark's"}),
        ("--per-other-user", {"type": int, "default": 1000, "help": "memories of each of them"}),
        ("--pool", {"type": int, "default": 2048, "help": "texts embedded for the vectors"}),
    ),
}  # fmt: skip
"""The flags several scenarios share, by group: written once."""


def parser(scenario: str) -> argparse.ArgumentParser:
    """The command line of ``bench.<scenario>``: the common flags it names, then its own."""
    module = importlib.import_module(f"bench.{scenario}")
    p = argparse.ArgumentParser(
        prog=f"python -m bench {scenario}",
        description=(module.__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    for group in getattr(module, "COMMON", ("out",)):
        for flag, options in COMMON_FLAGS[group]:
            p.add_argument(flag, **options)
    if hasattr(module, "flags"):
        module.flags(p)
    return p


def args(scenario: str, argv: list[str] | None = None, **values: Any) -> argparse.Namespace:
    """``scenario``'s flags parsed from ``argv``, then ``values`` set by name (tests)."""
    a = parser(scenario).parse_args(argv or [])
    vars(a).update(values)
    return a


def main(scenario: str, argv: list[str] | None = None) -> int:
    """Parse ``argv`` for ``scenario``, run it; exit 1 if it returns False, or its int."""
    a = parser(scenario).parse_args(argv)
    quiet_logs()
    result = importlib.import_module(f"bench.{scenario}").run(a)
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    return 1 if result is False else 0


def write_results(
    out: Path | str,
    name: str,
    data: Any,
    figure: Callable[[Any, Any], Any] | None = None,
    dpi: int = 110,
    show: tuple[str, ...] = (),
) -> tuple[Path, Path | None]:
    """``<out>/<name>.json``, and ``<out>/<name>.png`` drawn by ``figure(data, plt)``.

    ``show`` names the docs' regions (`bench.render_docs`) to print, rendered from ``out``
    as the docs will be once the JSON is committed.
    """
    json_path, png_path = Path(out) / f"{name}.json", Path(out) / f"{name}.png"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    if show:
        print("\n\n".join(_shown(region, Path(out)) for region in show))
    if figure is None:
        return json_path, None
    import matplotlib

    matplotlib.use("Agg", force=True)  # no display needed
    import matplotlib.pyplot as plt

    fig = figure(data, plt)
    fig.tight_layout()
    fig.savefig(png_path, dpi=dpi)
    plt.close(fig)
    return json_path, png_path


def _shown(region: str, out: Path) -> str:
    """A docs region rendered from ``out``, or why a partial run (some modes) cannot."""
    from bench.render_docs import RENDERERS

    try:
        return RENDERERS[region](out)
    except (KeyError, IndexError) as exc:
        return f"{region}: not in this run ({exc!r} missing); the JSON is written"


def ms_stats(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """n, p50, p95, p99, mean, min, max in milliseconds (None when empty)."""
    if not seconds:
        return {"n": 0, **dict.fromkeys(("p50", "p95", "p99", "mean", "min", "max"))}
    a = np.asarray(seconds, dtype=float) * 1000.0
    p50, p95, p99 = (round(float(np.percentile(a, q)), 3) for q in (50, 95, 99))
    return {"n": int(a.size), "p50": p50, "p95": p95, "p99": p99,
            "mean": round(float(a.mean()), 3), "min": round(float(a.min()), 3),
            "max": round(float(a.max()), 3)}  # fmt: skip


def say(quiet: bool, *args: Any) -> None:
    """Progress on stderr, unless ``quiet``."""
    if not quiet:
        print(*args, file=sys.stderr, flush=True)


def quiet_logs() -> None:
    """Keep the benchmark output to its tables (warnings of the memory nodes still show)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "sentence_transformers", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
