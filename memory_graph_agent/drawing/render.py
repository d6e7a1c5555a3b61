"""Draw a `MemoryGraph` to a PNG with networkx and matplotlib (the ``draw`` extra).

Both are plain wheels: no system binary (graphviz's ``dot`` is absent on many machines,
ours included), and the figure is drawn on matplotlib's Agg canvas, without pyplot, so
it works in a script, a server and a notebook alike. Rows from top to bottom: facts,
reflections, summaries, turns; each row in time order, oldest on the left.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

from memory_graph_agent.core.install import install_extra
from memory_graph_agent.drawing.model import ROWS, MemoryGraph

EXTRA_HINT = install_extra("draw")
COLOURS = {
    "fact": "#f2a541",
    "reflection": "#b07cc6",
    "summary": "#5b9bd5",
    "earlier_memories": "#c9d7e8",
    "turn": "#7fbf7f",
    "earlier_turns": "#d3e8d3",
}
EDGE_STYLES = {  # colour, line style, arrow
    "source": ("#555555", "solid", "-|>"),
    "next": ("#9aa59a", "dotted", "-"),
    "superseded_by": ("#c0392b", "dashed", "-|>"),
}
ROW_NAMES = ("profile facts", "reflections", "summaries", "turns")
CHAR_INCHES = 0.05
"""About the width of one character of a 6.5-point label."""


class DrawExtraMissing(RuntimeError):
    """networkx or matplotlib is not installed: the message says which extra brings them."""


def require_draw_libraries() -> tuple[Any, Any, Any]:
    """Import networkx, matplotlib's `Figure` and its Agg canvas, or say which extra to add.

    Raises:
        DrawExtraMissing: One of them is not installed.
    """
    try:
        import networkx as nx
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise DrawExtraMissing(
            f"drawing the memory graph needs networkx and matplotlib ({exc.name} is missing): "
            f"install the 'draw' extra ({EXTRA_HINT})"
        ) from None
    return nx, Figure, FigureCanvasAgg


def positions(graph: MemoryGraph) -> dict[str, tuple[float, float]]:
    """Each node's place: its kind's row, spread evenly across the widest row."""
    rows: dict[int, list[str]] = {}
    for node in graph.nodes:
        rows.setdefault(ROWS[node.kind], []).append(node.id)
    width = max((len(ids) for ids in rows.values()), default=1)
    places = {}
    for row, ids in rows.items():
        step = width / len(ids)
        for i, node_id in enumerate(ids):
            places[node_id] = ((i + 0.5) * step, -float(row))
    return places


def draw_memory_graph(graph: MemoryGraph, out: str | Path | None = None) -> Any:
    """Draw ``graph``; write a PNG to ``out`` if given. Returns the matplotlib `Figure`.

    Raises:
        DrawExtraMissing: networkx or matplotlib is not installed.
    """
    nx, Figure, FigureCanvasAgg = require_draw_libraries()
    g = nx.DiGraph()
    for node in graph.nodes:
        g.add_node(node.id, kind=node.kind)
    for edge in graph.edges:
        g.add_edge(edge.source, edge.target, kind=edge.kind, count=edge.count)
    pos = positions(graph)
    widest = max((sum(ROWS[n.kind] == r for n in graph.nodes) for r in range(4)), default=1)
    fig = Figure(figsize=(min(48.0, max(12.0, 0.5 * widest + 3)), 11), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_axis_off()
    for kind, (colour, style, arrow) in EDGE_STYLES.items():
        edges = [(u, v) for u, v, k in g.edges(data="kind") if k == kind]
        widths = [0.6 + math.log2(g.edges[e]["count"]) for e in edges]
        nx.draw_networkx_edges(
            g, pos, edgelist=edges, ax=ax, edge_color=colour, style=style, width=widths,
            arrowstyle=arrow, arrowsize=8, node_size=160, alpha=0.7,
        )  # fmt: skip
    for kind, colour in COLOURS.items():
        nodes = [n.id for n in graph.nodes if n.kind == kind]
        nx.draw_networkx_nodes(g, pos, nodelist=nodes, ax=ax, node_color=colour, node_size=160)
    inches_per_slot = fig.get_figwidth() * 0.8 / widest
    per_row = {r: [n for n in graph.nodes if ROWS[n.kind] == r] for r in range(4)}
    for row, nodes in per_row.items():
        step = inches_per_slot * widest / max(1, len(nodes))  # inches between two nodes
        stagger = row != 3 and step < 1.6  # a crowded row: every other label goes above
        width = max(12, int(0.85 * (2 * step if stagger else step) / CHAR_INCHES))
        for i, node in enumerate(nodes):
            x, y = pos[node.id]
            above = stagger and i % 2 == 1
            label = node.label if row == 3 else textwrap.fill(" ".join(node.label.split()), width)
            ax.text(
                x, y + 0.08 if above else y - 0.08, label, fontsize=6 if row == 3 else 6.5,
                rotation=90 if row == 3 else 0, ha="center", va="bottom" if above else "top",
                bbox={"boxstyle": "round,pad=0.2", "fc": COLOURS[node.kind], "alpha": 0.35,
                      "lw": 0},
            )  # fmt: skip
    for row, name in enumerate(ROW_NAMES):
        ax.text(0, -row + 0.12, name, fontsize=9, style="italic", color="#444444", ha="left")
    ax.set_ylim(-3.9, 0.35)
    folded = (
        f"{graph.hidden_turns} earlier turns and {graph.hidden_memories} earlier memories folded"
    )
    ax.set_title(
        f"{graph.title}: {len(graph.nodes)} nodes, {len(graph.edges)} edges ({folded})",
        fontsize=9,
    )
    fig.suptitle(graph.name or graph.user_id, fontsize=18, fontweight="bold")
    if out is not None:
        fig.savefig(out, format="png", bbox_inches="tight")
    return fig
