"""One user's memory as nodes and edges: pure data in, a `MemoryGraph` out (no server).

Nodes are the profile's facts, the reflections, the summaries and the raw turns, in four
rows from the most distilled to the rawest. Edges are provenance (a summary to the turns
it was made from, a reflection to its summaries, a fact to the turns or reflection that
grounded it) and links (a turn to the next turn of its thread, the neighbour link recall
follows; a memory to the one that superseded it).

A user with hundreds of turns stays readable: only the newest ``max_turns`` turns and
the newest ``max_memories`` summaries and reflections get a node of their own. The rest
is folded into one node per thread ("N earlier turns of thread T") and one node for the
earlier memories, and every edge that pointed into them points at the fold, counted.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # read for their fields only: the CLI imports this module to parse args
    from memory_graph_agent.storage.memories import Memory
    from memory_graph_agent.storage.window import StoredMessage

NodeKind = Literal["fact", "reflection", "summary", "turn", "earlier_turns", "earlier_memories"]
EdgeKind = Literal["source", "next", "superseded_by"]
ROWS: dict[NodeKind, int] = {
    "fact": 0,
    "reflection": 1,
    "summary": 2,
    "earlier_memories": 2,
    "turn": 3,
    "earlier_turns": 3,
}
"""The row of each kind of node, top to bottom."""
MAX_TURNS = 40
"""Turns drawn by default: the newest of any thread."""
MAX_MEMORIES = 30
"""Summaries and reflections drawn by default: the newest."""
LABEL_CHARS = {"fact": 40, "reflection": 60, "summary": 60, "turn": 36}


@dataclass(frozen=True)
class GraphNode:
    """One node: its id in the graph, its kind, a short label and the full text."""

    id: str
    kind: NodeKind
    label: str
    text: str = ""


@dataclass(frozen=True)
class GraphEdge:
    """From ``source`` to ``target``; ``count`` edges folded into one (earlier items)."""

    source: str
    target: str
    kind: EdgeKind
    count: int = 1


@dataclass
class MemoryGraph:
    """One user's memory graph, ready to draw or to assert on."""

    user_id: str
    name: str | None
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    hidden_turns: int = 0
    hidden_memories: int = 0

    @property
    def title(self) -> str:
        """The user's name (from the profile) and id, for the top of the picture."""
        return f"{self.name} (user {self.user_id})" if self.name else f"user {self.user_id}"

    def node_count(self, kind: NodeKind) -> int:
        """How many nodes of this kind are drawn."""
        return sum(n.kind == kind for n in self.nodes)

    def edge_count(self, kind: EdgeKind) -> int:
        """How many edges of this kind are drawn (a folded edge counts once)."""
        return sum(e.kind == kind for e in self.edges)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view (``memory graph --json``)."""
        return {
            "user_id": self.user_id,
            "title": self.title,
            "nodes": [vars(n) for n in self.nodes],
            "edges": [vars(e) for e in self.edges],
            "hidden_turns": self.hidden_turns,
            "hidden_memories": self.hidden_memories,
        }


def short(text: str, chars: int) -> str:
    """``text`` on one line, cut to ``chars`` with an ellipsis, wrapped for a node label."""
    flat = " ".join(text.split())
    cut = flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "…"
    return "\n".join(textwrap.wrap(cut, width=max(12, chars // 2))) or "(empty)"


def turn_id(thread_id: str, message_id: str) -> str:
    """The graph id of a logged message."""
    return f"turn:{thread_id}:{message_id}"


class _Builder:
    def __init__(self, graph: MemoryGraph) -> None:
        self.graph = graph
        self.ids: set[str] = set()
        self.edges: dict[tuple[str, str, str], int] = {}

    def node(self, node: GraphNode) -> None:
        if node.id not in self.ids:
            self.ids.add(node.id)
            self.graph.nodes.append(node)

    def edge(self, source: str, target: str, kind: EdgeKind) -> None:
        key = (source, target, kind)
        self.edges[key] = self.edges.get(key, 0) + 1

    def finish(self) -> MemoryGraph:
        for (source, target, kind), count in self.edges.items():
            self.graph.edges.append(GraphEdge(source, target, kind, count))  # type: ignore[arg-type]
        return self.graph


def build_memory_graph(
    user_id: str,
    *,
    profile: Mapping[str, Mapping[str, Any]],
    memories: Sequence[Memory],
    turns: Sequence[tuple[str, StoredMessage]],
    turn_counts: Mapping[str, int],
    memory_count: int | None = None,
) -> MemoryGraph:
    """Build the graph of one user's memory from what storage returned.

    Args:
        user_id: Whose memory this is; rows of any other user are refused.
        profile: The user's live facts, ``key -> {value, source_ids, ...}``.
        memories: The summaries and reflections to draw (the newest, any status).
        turns: The turns to draw, ``(thread_id, message)`` oldest first (the newest ones).
        turn_counts: Logged messages per thread, drawn or not: the rest is folded.
        memory_count: The user's memories in all; those not in ``memories`` are folded.

    Raises:
        ValueError: A memory of another user was passed in.
    """
    name = profile.get("name", {}).get("value") or None
    graph = MemoryGraph(user_id=user_id, name=name)
    b = _Builder(graph)
    for m in memories:
        if m.user_id != user_id:
            raise ValueError(f"memory {m.id} belongs to another user, not {user_id!r}")
    shown_memories = {m.id for m in memories}
    shown_turns = {(thread, m.id) for thread, m in turns}
    turn_threads: dict[str, list[str]] = {}
    for thread, m in turns:
        turn_threads.setdefault(m.id, []).append(thread)
    per_thread: dict[str, int] = {}
    for thread, _ in turns:
        per_thread[thread] = per_thread.get(thread, 0) + 1
    graph.hidden_turns = sum(turn_counts.values()) - len(turns)
    total_memories = len(memories) if memory_count is None else memory_count
    graph.hidden_memories = max(0, total_memories - len(memories))

    for key, fact in profile.items():
        label = short(f"{key}: {fact.get('value', '')}", LABEL_CHARS["fact"])
        b.node(GraphNode(f"fact:{key}", "fact", label, str(fact.get("value", ""))))
    for kind in ("reflection", "summary"):
        for m in reversed(memories):  # oldest first, left to right
            if m.kind == kind:
                status = "" if m.status == "active" else f" [{m.status}]"
                label = short(m.text, LABEL_CHARS[kind]) + status
                b.node(GraphNode(f"memory:{m.id}", kind, label, m.text))

    def earlier_turns(thread: str | None) -> str:
        if thread is None:  # a summary without a thread: its turns are not drawn
            b.node(GraphNode("earlier_turns:?", "earlier_turns", "earlier turns"))
            return "earlier_turns:?"
        hidden = turn_counts.get(thread, 0) - per_thread.get(thread, 0)
        node_id = f"earlier_turns:{thread}"
        label = short(f"{hidden} earlier turns of {thread}", 40)
        b.node(GraphNode(node_id, "earlier_turns", label))
        return node_id

    def earlier_memories() -> str:
        label = f"{graph.hidden_memories} earlier summaries and reflections"
        b.node(GraphNode("earlier_memories", "earlier_memories", short(label, 40)))
        return "earlier_memories"

    for thread in turn_counts:  # the folded turns sit left of the drawn ones
        if turn_counts[thread] > per_thread.get(thread, 0):
            earlier_turns(thread)
    previous: dict[str, str] = {}
    for thread, m in turns:
        node_id = turn_id(thread, m.id)
        b.node(GraphNode(node_id, "turn", short(f"{m.role}: {m.content}", 36), m.content))
        before = previous.get(thread) or (
            f"earlier_turns:{thread}" if f"earlier_turns:{thread}" in b.ids else None
        )
        if before:
            b.edge(before, node_id, "next")
        previous[thread] = node_id

    def turn_target(thread: str | None, message_id: str) -> str | None:
        if thread and (thread, message_id) in shown_turns:
            return turn_id(thread, message_id)
        threads = turn_threads.get(message_id, [])
        return turn_id(threads[0], message_id) if len(threads) == 1 and not thread else None

    for m in memories:
        here = f"memory:{m.id}"
        for source in m.source_ids:
            if m.kind == "reflection":  # a reflection cites summaries
                shown = source in shown_memories
                b.edge(here, f"memory:{source}" if shown else earlier_memories(), "source")
            else:  # a summary cites the messages of its batch
                target = turn_target(m.thread_id, source) or earlier_turns(m.thread_id)
                b.edge(here, target, "source")
        if m.superseded_by and m.superseded_by in shown_memories:
            b.edge(here, f"memory:{m.superseded_by}", "superseded_by")
    for key, fact in profile.items():
        for source in fact.get("source_ids", []):
            target = f"memory:{source}" if source in shown_memories else turn_target(None, source)
            if target is None:  # not drawn: a folded turn or memory (the id says not which)
                target = "earlier_sources"
                b.node(GraphNode(target, "earlier_memories", "earlier turns or memories"))
            b.edge(f"fact:{key}", target, "source")
    return b.finish()
