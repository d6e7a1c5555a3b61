"""Render the figures of the README and docs/ from the committed results, never by hand.

``python -m bench.render_docs`` rewrites each region of ``README.md`` and ``docs/*.md``
marked ``<!-- bench:NAME -->`` ... ``<!-- /bench -->`` from ``bench/results/*.json`` (and the
knob tables from ``graph/context.py``: `bench.render.knobs`); with ``--check`` it changes
nothing and exits 1 if a region is stale, unknown or has no end.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from bench.render import knobs, longrun, quality, speed

ROOT = Path(__file__).resolve().parents[1]
START = re.compile(r"<!-- bench:([a-z0-9-]+) -->")
END = "<!-- /bench -->"


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
    "readme-knobs": knobs.render_readme_knobs,
    "context-knobs": knobs.render_context_knobs,
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
