"""The knob tables of the README and docs/configuration.md, from `graph/context.py` by `ast`.

Nothing of the project is imported: the declarations are read as source.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from bench.render.common import cell, table

README_KNOBS = (
    "user_id",
    "model",
    "memory_mode",
    "recall_mode",
    "window_size",
    "window_token_share",
    "reflect_after",
    "memory_token_budget",
    "context_window_tokens",
    "ttl_policy",
)
"""The knobs the README's table shows (every knob is in docs/configuration.md)."""
FIRST_SENTENCE = re.compile(r"(?<!e\.g\.)(?<=\.)\s+(?=['A-Z])")


TIERS = {"knob": "user", "operator_knob": "operator", "scheduler_knob": "scheduler"}
"""How `graph/context.py` declares a field of each tier (`memory_graph_agent.core.knobs`)."""


def context_knobs(root: Path) -> list[dict[str, str]]:
    """Name, tier, default, bounds and description of every ``Context`` field, from the source.

    A field is ``knob(default, description, **bounds)`` (the user's),
    ``operator_knob(...)`` (the operator's) or ``scheduler_knob(...)``; a group,
    ``operator_group(Group, description)``, stands for the fields of ``Group`` (read where
    `graph/context.py` imports it from), shown as ``group.field`` and each read from its own
    variable.
    """
    path = root / "graph" / "context.py"
    return _class_knobs(root, ast.parse(path.read_text()), "Context")


def _class_knobs(root: Path, tree: ast.Module, name: str, prefix: str = "") -> list[dict[str, str]]:
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    knobs = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        field = node.target.id  # type: ignore[attr-defined]
        if call.func.id == "operator_group":  # type: ignore[attr-defined]
            group = call.args[0].id  # type: ignore[attr-defined]
            knobs += _class_knobs(root, _module_of(root, tree, group), group, f"{field}.")
            continue
        tier = TIERS[call.func.id]  # type: ignore[attr-defined]
        value = ast.literal_eval(call.args[0])
        description = ast.literal_eval(call.args[1])
        bounds = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
        shown = "(empty)" if value == "" else f"`{value}`"
        knobs.append(
            {"name": prefix + field, "env": field.upper(), "tier": tier, "default": shown,
             "bounds": _bounds(bounds), "description": description}
        )  # fmt: skip
    return knobs


def _module_of(root: Path, tree: ast.Module, name: str) -> ast.Module:
    """The parsed module ``tree`` imports class ``name`` from (or ``tree`` itself)."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            path = root / Path(*str(node.module).split(".")).with_suffix(".py")
            return ast.parse(path.read_text())
    return tree


def _bounds(bounds: dict[str, Any]) -> str:
    if "choices" in bounds:
        return " \\| ".join(f"`{c}`" for c in bounds["choices"])
    low = f"≥ {bounds['ge']}" if "ge" in bounds else f"> {bounds['gt']}" if "gt" in bounds else ""
    high = f"≤ {bounds['le']}" if "le" in bounds else ""
    return ", ".join(b for b in (low, high) if b)


def render_context_knobs(root: Path) -> str:
    """Every ``Context`` field, the user's then the operator's: env variable, default, bounds."""
    knobs = context_knobs(root)
    parts = []
    for tier, title in (
        ("user", "**The user's knobs** (Studio's form; a client of the server may set them):"),
        ("operator", "**The operator's knobs** (the deployment's environment; refused from "
                     "a client of the server, 403):"),
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
    """The README's ten knobs, their tier and the first sentence of their description."""
    by_name = {k["name"]: k for k in context_knobs(root)}
    rows = []
    for name in README_KNOBS:
        k = by_name[name]
        first = FIRST_SENTENCE.split(" ".join(k["description"].split()), maxsplit=1)[0]
        rows.append([f"`{name}`", k["tier"], k["default"], cell(first)])
    return table(["knob (env: upper case)", "tier", "default", "what it does"], rows)
