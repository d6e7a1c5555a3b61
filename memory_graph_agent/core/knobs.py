"""How a configuration field is declared: its tier, its description and its bounds, once.

`knob` declares a user's knob (Studio's form; a client of the server may set it per run),
`operator_knob` an operator's knob (every limit, budget, batch, timeout, threshold and
mode: the deployment's environment sets it, the server refuses it from clients), and
`scheduler_knob` what the memory scheduler sets on its own runs (``memory_of``). Adding
one is one line in `graph.context.Context`; its bounds are checked by `check_bounds` and
shown in the form, and the server's auth policy, the docs' tables and the form follow the
tier without another list.
"""

from __future__ import annotations

from dataclasses import Field, field, fields
from typing import Any

USER = "user"
OPERATOR = "operator"
SCHEDULER = "scheduler"
BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "choices": "enum"}
"""The bounds a field may declare, and their JSON schema names (shown in Studio's form)."""


def knob(default: Any, description: str, **bounds: Any) -> Any:
    """A user's knob: in Studio's form, and a client of the server may set it per run.

    ``bounds`` are any of ``ge``, ``gt``, ``le`` (numbers) and ``choices`` (a tuple).
    """
    return _field(default, description, USER, bounds)


def operator_knob(default: Any, description: str, **bounds: Any) -> Any:
    """An operator's knob: read from the environment, refused from the server's clients."""
    return _field(default, description, OPERATOR, bounds)


def scheduler_knob(default: Any, description: str, **bounds: Any) -> Any:
    """A field the memory scheduler sets on the memory runs it starts.

    It stays in the form: the LangGraph server passes a run only the context keys its
    graph's schema names.
    """
    return _field(default, description, SCHEDULER, bounds)


def _field(default: Any, description: str, tier: str, bounds: dict[str, Any]) -> Any:
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise TypeError(f"unknown bounds {sorted(unknown)}; use {sorted(BOUNDS)}")
    return field(default=default, metadata={"description": description, "tier": tier, **bounds})


def tier_of(f: Field) -> str:
    """The tier of a dataclass field: a field declared without `knob` is the operator's."""
    return f.metadata.get("tier", OPERATOR)


def names_in(cls: type, tier: str) -> frozenset[str]:
    """The names of the fields of dataclass ``cls`` in ``tier``."""
    return frozenset(f.name for f in fields(cls) if tier_of(f) == tier)


def check_bounds(name: str, value: Any, meta: Any) -> None:
    """Raise ``ValueError`` naming the field if ``value`` breaks its declared bounds."""
    if "choices" in meta and value not in meta["choices"]:
        options = " or ".join(repr(c) for c in meta["choices"])
        raise ValueError(f"{name} must be {options}, got {value!r}")
    if "ge" in meta and "le" in meta and not meta["ge"] <= value <= meta["le"]:
        raise ValueError(f"{name} must be in [{meta['ge']}, {meta['le']}], got {value}")
    if "gt" in meta and "le" in meta and not meta["gt"] < value <= meta["le"]:
        raise ValueError(f"{name} must be in ({meta['gt']}, {meta['le']}], got {value}")
    if "ge" in meta and value < meta["ge"]:
        raise ValueError(f"{name} must be >= {meta['ge']}, got {value}")
    if "gt" in meta and value <= meta["gt"]:
        raise ValueError(f"{name} must be > {meta['gt']}, got {value}")


def coerce(raw: str, kind: type, name: str) -> Any:
    """Convert an environment string to the field's type with a clear error."""
    try:
        if kind is bool:
            return raw.strip().lower() in {"1", "true", "yes", "on"}
        return kind(raw)
    except ValueError as exc:
        raise ValueError(
            f"environment variable {name.upper()}={raw!r} is not a valid {kind.__name__}"
        ) from exc


def form_schema(cls: type, schema: dict[str, Any]) -> dict[str, Any]:
    """Keep the user's knobs of ``cls`` in its JSON ``schema`` (the form), with their bounds.

    The LangGraph server drops a run's context keys its graph's schema does not name, so
    the operator's knobs could not reach a server run even without the auth policy (which
    refuses them loudly); the scheduler's fields stay, for its memory runs.
    """
    properties = schema.get("properties", {})
    for f in fields(cls):
        if tier_of(f) == OPERATOR:
            properties.pop(f.name, None)
        elif f.name in properties:
            for key, json_key in BOUNDS.items():
                if key in f.metadata:
                    bound = f.metadata[key]
                    properties[f.name][json_key] = list(bound) if key == "choices" else bound
    schema["required"] = [n for n in schema.get("required", []) if n in properties]
    if not schema["required"]:
        del schema["required"]
    return schema
