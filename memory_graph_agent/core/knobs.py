"""How a configuration field is declared: its tier, its description and its bounds, once.

`knob` declares a user's knob (Studio's form; a client of the server may set it per run),
`operator_knob` an operator's knob (every limit, budget, batch, timeout, threshold and
mode: the deployment's environment sets it, the server refuses it from clients), and
`scheduler_knob` what the memory scheduler sets on its own runs (``memory_of``), and
`operator_group` a nested, frozen group of operator's knobs declared together (the tuned
recall weights, `memory_graph_agent.recall.weights.RecallWeights`). Adding one is one
line in `graph.context.Context` (or in its group); its bounds are checked by
`check_fields` and shown in the form, and the server's auth policy, the docs' tables and
the form follow the tier without another list.

Every knob reads the environment variable of its own name in upper case, a group's
members too (``NEIGHBOUR_WEIGHT``, not a prefixed name), so a knob's name is unique across
the groups (`knob_fields` checks it) and moving a knob into a group changes no variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, Field, field, fields, replace
from typing import Any, TypeVar

T = TypeVar("T")

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


def operator_group(group: type, description: str) -> Any:
    """A nested group of operator's knobs: a frozen dataclass of `operator_knob` fields.

    The whole group is the operator's: the server refuses it, and each of its members by
    name, from clients. A member reads its own environment variable, like a flat knob.
    """
    meta = {"description": description, "tier": OPERATOR, "group": group}
    return field(default_factory=group, metadata=meta)


def _field(default: Any, description: str, tier: str, bounds: dict[str, Any]) -> Any:
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise TypeError(f"unknown bounds {sorted(unknown)}; use {sorted(BOUNDS)}")
    return field(default=default, metadata={"description": description, "tier": tier, **bounds})


def tier_of(f: Field) -> str:
    """The tier of a dataclass field: a field declared without `knob` is the operator's."""
    return f.metadata.get("tier", OPERATOR)


def group_of(f: Field) -> type | None:
    """The dataclass of a field declared with `operator_group`, else None."""
    return f.metadata.get("group")


def names_in(cls: type, tier: str) -> frozenset[str]:
    """The names of the fields of dataclass ``cls`` in ``tier``, a group's members too."""
    names = set()
    for f in fields(cls):
        if tier_of(f) == tier:
            names.add(f.name)
        group = group_of(f)
        if group is not None:
            names |= names_in(group, tier)
    return frozenset(names)


def knob_fields(cls: type) -> dict[str, Field]:
    """Every knob of dataclass ``cls`` by name, a group's members in place of the group."""
    out: dict[str, Field] = {}
    for f in fields(cls):
        group = group_of(f)
        for name, knob_field in knob_fields(group).items() if group else [(f.name, f)]:
            if name in out:
                raise TypeError(f"knob {name!r} is declared twice in {cls.__name__}")
            out[name] = knob_field
    return out


def env_names(cls: type, name: str) -> list[str]:
    """The environment variables that set field ``name`` of ``cls``: a group's, its members'."""
    for f in fields(cls):
        group = group_of(f)
        if f.name == name and group is not None:
            return [g.name.upper() for g in fields(group)]
    return [name.upper()]


def knob_values(obj: Any) -> dict[str, Any]:
    """Every knob's value of dataclass instance ``obj`` by name, a group's members included."""
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        out.update(knob_values(value) if group_of(f) else {f.name: value})
    return out


def with_knobs(obj: T, **values: Any) -> T:
    """A copy of dataclass instance ``obj`` with knobs set by name, a group's members too.

    ``with_knobs(ctx, neighbour_weight=0.0, recall_k=3)`` sets one member of
    ``ctx.recall_weights`` and one flat knob; an unknown name raises ``TypeError``.
    """
    changes = dict(values)
    for f in fields(obj):  # type: ignore[arg-type]
        group = group_of(f)
        if group is None:
            continue
        inner = {k: changes.pop(k) for k in list(changes) if k in knob_fields(group)}
        if inner:
            changes[f.name] = with_knobs(getattr(obj, f.name), **inner)
    return replace(obj, **changes)  # type: ignore[type-var]


def from_environment(obj: Any) -> dict[str, Any]:
    """The values the environment gives the fields of ``obj`` left at their default.

    A field named ``window_size`` reads ``WINDOW_SIZE``; an empty variable counts as
    unset. A group (given as its dataclass, or as a mapping of its members) comes back as
    a copy with its own members' values from the environment (``NEIGHBOUR_WEIGHT``).
    """
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        group = group_of(f)
        if group is not None:
            if isinstance(value, Mapping):
                unknown = sorted(set(value) - {g.name for g in fields(group)})
                if unknown:
                    raise ValueError(f"{f.name} has no knob {', '.join(unknown)}")
                value = group(**value)
            elif not isinstance(value, group):
                raise ValueError(f"{f.name} must be a {group.__name__}, got {value!r}")
            inner = from_environment(value)
            if inner or value is not getattr(obj, f.name):
                out[f.name] = replace(value, **inner)
        elif f.default is not MISSING and value == f.default:
            raw = os.environ.get(f.name.upper())
            if raw is not None and raw != "":
                out[f.name] = coerce(raw, type(f.default), f.name)
    return out


def check_fields(obj: Any) -> None:
    """Raise ``ValueError`` naming the first field of ``obj`` that breaks its bounds."""
    for f in fields(obj):
        check_bounds(f.name, getattr(obj, f.name), f.metadata)


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
            if group_of(f) is not None:  # its definition goes with it
                schema.get("$defs", {}).pop(group_of(f).__name__, None)
        elif f.name in properties:
            for key, json_key in BOUNDS.items():
                if key in f.metadata:
                    bound = f.metadata[key]
                    properties[f.name][json_key] = list(bound) if key == "choices" else bound
    schema["required"] = [n for n in schema.get("required", []) if n in properties]
    if not schema["required"]:
        del schema["required"]
    if "$defs" in schema and not schema["$defs"]:
        del schema["$defs"]
    return schema
