"""Every use the benchmarks make of the run's knobs, in one place.

The knob machinery (`memory_graph_agent.core.knobs`, `graph.context`'s fields) is read and
written only here, so that a change of how settings are declared changes this module and
no benchmark.
"""

from __future__ import annotations

from typing import Any

from graph.context import KNOB_FIELDS, Context
from memory_graph_agent.core.knobs import coerce, knob_values, with_knobs

__all__ = ["Context", "as_dict", "override", "parse_grid", "run_context", "shipped_default"]


def run_context(**knobs: Any) -> Context:
    """A run's `Context` with ``knobs`` set (the rest from the environment or defaults)."""
    return Context(**knobs)


def override(ctx: Context, **knobs: Any) -> Context:
    """``ctx`` with ``knobs`` replaced, validated as the environment would be."""
    return with_knobs(ctx, **knobs)


def as_dict(ctx: Context) -> dict[str, Any]:
    """Every knob of ``ctx`` as a plain value (recall weights by their own names)."""
    return knob_values(ctx)


def shipped_default(name: str) -> Any:
    """The shipped default of knob ``name``."""
    return KNOB_FIELDS[name].default


def parse_grid(text: str) -> dict[str, tuple[Any, ...]]:
    """``'a=0,0.5;b=5'`` as ``{"a": (0.0, 0.5), "b": (5,)}``, typed like the `Context` field."""
    grid: dict[str, tuple[Any, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, values = part.partition("=")
        if name not in KNOB_FIELDS:  # a recall weight by its own name (`RecallWeights`)
            raise ValueError(f"unknown knob {name!r}")
        kind = type(KNOB_FIELDS[name].default)  # typed as the environment types it
        grid[name] = tuple(coerce(v.strip(), kind, name) for v in values.split(","))
    return grid
