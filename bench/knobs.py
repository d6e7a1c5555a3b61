"""The benchmarks' grids of settings: ``--grid 'name=v1,v2;...'`` typed as the environment.

A grid names settings by their environment names in lower case (``neighbour_weight``,
``recall_k``), as `memory_graph_agent.settings.Settings.override` takes them.
"""

from __future__ import annotations

from typing import Any

from memory_graph_agent.settings import Settings

DEFAULTS = Settings().by_name()
"""Every setting's shipped default, by name."""


def parse_grid(text: str) -> dict[str, tuple[Any, ...]]:
    """``'a=0,0.5;b=5'`` as ``{"a": (0.0, 0.5), "b": (5,)}``, typed like the setting."""
    grid: dict[str, tuple[Any, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, values = part.partition("=")
        if name not in DEFAULTS:  # a recall weight by its own name (`RecallWeights`)
            raise ValueError(f"unknown setting {name!r}")
        # typed and checked as the environment's values are
        grid[name] = tuple(
            Settings().override(**{name: v.strip()}).by_name()[name] for v in values.split(",")
        )
    return grid
