"""Render the figures of the README and docs/ from the committed results, never by hand.

``python -m bench.render_docs`` rewrites each region of ``README.md`` and ``docs/*.md``
marked ``<!-- bench:NAME -->`` ... ``<!-- /bench -->`` from ``bench/results/*.json`` (and the
knob tables from the `Context` and `Settings` fields' descriptions); with ``--check`` it changes
nothing and exits 1 if a region is stale, unknown or has no end.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from bench.render import cell, longrun, quality, speed, table

ROOT = Path(__file__).resolve().parents[1]
START = re.compile(r"<!-- bench:([a-z0-9-]+) -->")
END = "<!-- /bench -->"
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


def render_readme_headlines(root: Path) -> str:
    """The README's headline figures, one line each."""
    parts = (
        quality.render_locomo_headline,
        quality.render_longmemeval_headline,
        speed.render_peers_headline,
        speed.render_latency_headline,
        longrun.render_soak_headline,
    )
    return "\n".join(f"- {part(root)}" for part in parts)


RENDERERS: dict[str, Callable[[Path], str]] = {
    "readme-headlines": render_readme_headlines,
    "readme-knobs": render_readme_knobs,
    "context-knobs": render_context_knobs,
    "locomo-table": quality.render_locomo_table,
    "longmemeval-table": quality.render_longmemeval_table,
    "in-session-table": quality.render_in_session_table,
    "joint-cv": quality.render_joint_cv,
    "peers-headline": speed.render_peers_headline,
    "peers-table": speed.render_peers_table,
    "peers-parts": speed.render_peers_parts,
    "latency-headline": speed.render_latency_headline,
    "latency-table": speed.render_latency_table,
    "latency-adds": speed.render_latency_adds,
    "latency-cost": speed.render_latency_cost,
    "throughput-table": speed.render_throughput_table,
    "growth-table": longrun.render_growth_table,
    "growth-channels": longrun.render_growth_channels,
    "soak-headline": longrun.render_soak_headline,
    "soak-summary": longrun.render_soak_summary,
    "soak-recovery": longrun.render_soak_recovery,
}
"""Region name -> the function that renders its body."""


def regions(text: str) -> list[tuple[str, int, int]]:
    """``(name, body start, body end)`` of each marked region of ``text``.

    Raises:
        ValueError: a start marker without an end before the next start, or a stray end.
    """
    found, pos = [], 0
    for match in START.finditer(text):
        if match.start() < pos:
            raise ValueError(f"region {match.group(1)!r} starts inside the previous one")
        end = text.find(END, match.end())
        nxt = START.search(text, match.end())
        if end < 0 or (nxt and nxt.start() < end):
            raise ValueError(f"region {match.group(1)!r} has no {END}")
        found.append((match.group(1), match.end(), end))
        pos = end + len(END)
    if text.count(END) != len(found):
        raise ValueError(f"{END} without a start marker")
    return found


def render_text(text: str, root: Path) -> str:
    """``text`` with every marked region's body rendered afresh.

    Raises:
        ValueError: a region is unknown or unterminated.
    """
    out, last = [], 0
    for name, start, end in regions(text):
        if name not in RENDERERS:
            raise ValueError(f"unknown region {name!r} (known: {', '.join(RENDERERS)})")
        out += [text[last:start], "\n", RENDERERS[name](root).rstrip("\n"), "\n"]
        last = end
    return "".join(out) + text[last:]


def documents(root: Path) -> list[Path]:
    """The files that may hold regions: the README and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the regions, or with ``--check`` report the stale ones; 0 when all is current."""
    parser = argparse.ArgumentParser(prog="python -m bench.render_docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a region is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: here)")
    args = parser.parse_args(argv)
    stale = []
    for path in (p for p in documents(args.root) if p.exists()):
        text = path.read_text()
        try:
            new = render_text(text, args.root)
        except ValueError as exc:
            print(f"{path.relative_to(args.root)}: {exc}", file=sys.stderr)
            return 1
        if new != text:
            stale.append(path.relative_to(args.root))
            if not args.check:
                path.write_text(new)
    for path in stale:
        print(
            f"{'stale' if args.check else 'rewritten'}: {path}",
            file=sys.stderr if args.check else sys.stdout,
        )
    if args.check and stale:
        print("run `python -m bench.render_docs` and commit the result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
