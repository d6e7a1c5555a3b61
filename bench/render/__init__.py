"""The renderers of `bench.render_docs` (a module per group of regions); what they share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"
"""This checkout's committed results."""


def load(root: Path, name: str) -> dict[str, Any]:
    """``<name>.json`` parsed, from a run's folder ``root``, else the repository's results.

    The repository is ``root`` (`bench.render_docs`), else this checkout (a run's tables
    that read another benchmark's file it did not write, as the docs will render them).
    """
    path = root / f"{name}.json"
    if not path.exists():
        path = root / "bench" / "results" / f"{name}.json"
    if not path.exists():
        path = RESULTS / f"{name}.json"
    return json.loads(path.read_text())


def num(value: float | None, digits: int = 1) -> str:
    """``value`` with thousands separators and ``digits`` decimals; ``-`` for None."""
    return "-" if value is None else f"{value:,.{digits}f}"


def pair(stats: dict[str, Any] | None, digits: int = 1) -> str:
    """``p50 / p95`` of a percentile record."""
    if not stats or stats.get("p50") is None:
        return "-"
    return f"{num(stats['p50'], digits)} / {num(stats['p95'], digits)}"


def machine(data: dict[str, Any], *, dated: bool = True) -> str:
    """The machine a results file records, in one phrase, and when it ran if ``dated``.

    Headlines are undated: the README says what is true now, and the run's date is in the
    docs' tables and the CHANGELOG.
    """
    m = data.get("machine", {})
    text = f"a {m.get('cores', '?')}-core {m.get('cpu_model', 'unknown CPU')}"
    cpu = m.get("cpu_id")
    if cpu:
        text += f" (family {cpu['family']} model {cpu['model']}"
        text += ", AVX-512)" if cpu.get("avx512f") else ")"
    when = m.get("timestamp") or data.get("created_at")
    if when and dated:
        text += f", {when[:10]} {when[11:16]} UTC"
    load_avg = m.get("loadavg_at_start")
    if load_avg:
        text += f", load average {load_avg[0]:.1f} at start"
    end = data.get("loadavg_at_end") or (data.get("sizes") or [{}])[-1].get("loadavg_after")
    if load_avg and end:
        text += f" and {end[0]:.1f} at the end"
    return text


def table(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def cell(text: str) -> str:
    """``text`` on one line, fit for a table cell."""
    return " ".join(text.split()).replace("|", "\\|")
