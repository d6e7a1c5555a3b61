"""The configuration tables of the README and docs/configuration.md, read from the models.

The run's `graph.context.Context` and the deployment's `Settings` declare each field's
default, bounds and description once; these tables cannot drift from them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from bench.render.common import cell, table

README_KNOBS = ("user_id", "model", "memory_mode", "recall_mode", "window_size",
                "window_token_share", "reflect_after", "memory_token_budget",
                "context_window_tokens", "ttl_policy")  # fmt: skip
"""The knobs the README's table shows (every one is in docs/configuration.md)."""
FIRST_SENTENCE = re.compile(r"(?<!e\.g\.)(?<=\.)\s+(?=['A-Z])")


def context_knobs() -> list[dict[str, str]]:
    """Name, tier, variable, default, bounds and description of every configuration field.

    The run's `Context` fields (tier ``user``, ``memory_of`` the ``scheduler``'s), then every
    setting of `Settings` (tier ``operator``), named by its path (``window.size``).
    """
    from dataclasses import fields

    from graph.context import Context
    from memory_graph_agent.settings import ENV_PATHS, Settings

    hints = get_type_hints(Context)
    knobs = [
        _knob(f.name, f.name.upper(), "scheduler" if f.name == "memory_of" else "user",
              f.default, [], hints[f.name], f.metadata["description"])
        for f in fields(Context)
    ]  # fmt: skip
    for env, path in ENV_PATHS.items():
        model: Any = Settings
        for part in path[:-1]:
            model = model.model_fields[part].annotation
        info = model.model_fields[path[-1]]
        knobs.append(
            _knob(".".join(path), env, "operator", info.default, info.metadata,
                  info.annotation, info.description or "")
        )  # fmt: skip
    return knobs


def _knob(
    name: str, env: str, tier: str, value: Any, bounds: list[Any], kind: Any, description: str
) -> dict[str, str]:
    shown = "(empty)" if value == "" else f"`{value}`"
    return {"name": name, "env": env, "tier": tier, "default": shown,
            "bounds": _bounds(bounds, kind), "description": description}  # fmt: skip


def _bounds(bounds: list[Any], kind: Any) -> str:
    if get_origin(kind) is Literal:
        return " \\| ".join(f"`{c}`" for c in get_args(kind))
    found = {n: getattr(b, n) for b in bounds for n in ("ge", "gt", "le") if hasattr(b, n)}
    low = f"≥ {found['ge']}" if "ge" in found else f"> {found['gt']}" if "gt" in found else ""
    high = f"≤ {found['le']}" if "le" in found else ""
    return ", ".join(b for b in (low, high) if b)


def render_context_knobs(root: Path) -> str:
    """The run's `Context`, then the deployment's `Settings`: variable, default, bounds."""
    knobs = context_knobs()
    parts = []
    for tier, title in (
        ("user", "**The run's context** (`Context`, Studio's form; a client of the server "
                 "may set it per run):"),
        ("operator", "**The deployment's settings** (`Settings`, read once from the "
                     "environment or built in code; refused from a client of the server, 403):"),
        ("scheduler", "**Set by the memory scheduler** on the memory runs it starts (refused "
                      "from a client of the server on any other run, 403):"),
    ):  # fmt: skip
        rows = [
            [f"`{k['name']}`", f"`{k['env']}`", k["default"], k["bounds"] or "-",
             cell(k["description"])]
            for k in knobs
            if k["tier"] == tier
        ]  # fmt: skip
        head = ["field", "environment", "default", "bounds", "meaning"]
        parts.append(f"{title}\n\n{table(head, rows)}")
    return "\n\n".join(parts)


def render_readme_knobs(root: Path) -> str:
    """The README's ten knobs: where they live, their variable and the first sentence."""
    by_env = {k["env"]: k for k in context_knobs()}
    rows = []
    for name in README_KNOBS:
        k = by_env[name.upper()]
        first = FIRST_SENTENCE.split(" ".join(k["description"].split()), maxsplit=1)[0]
        where = "`Context`" if k["tier"] == "user" else "`Settings`"
        rows.append([f"`{k['name']}`", where, f"`{k['env']}`", k["default"], cell(first)])
    return table(["name", "in", "environment", "default", "what it does"], rows)
