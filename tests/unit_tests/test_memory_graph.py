"""The memory graph model: what storage returned -> nodes and edges (no server)."""

from __future__ import annotations

import builtins
from datetime import UTC, datetime, timedelta

import pytest

from memory_graph_agent.drawing.model import build_memory_graph, turn_id
from memory_graph_agent.drawing.render import DrawExtraMissing, draw_memory_graph, positions
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.window import StoredMessage

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def turns(thread: str, n: int, start: int = 0) -> list[tuple[str, StoredMessage]]:
    return [
        (
            thread,
            StoredMessage(
                f"{thread}-m{i}",
                "human" if i % 2 == 0 else "ai",
                f"message {i} of {thread}",
                (T0 + timedelta(minutes=i)).isoformat(),
            ),
        )
        for i in range(start, start + n)
    ]


def summary(user: str, thread: str, ids: list[str], **kw) -> Memory:
    return Memory(user, "summary", f"summary of {ids}", 0.5, ids, thread_id=thread, **kw)


def test_a_small_memory_is_drawn_whole_with_provenance_and_links() -> None:
    user = "ada"
    shown = turns("t1", 4)
    s1 = summary(user, "t1", ["t1-m0", "t1-m1"])
    s2 = summary(user, "t1", ["t1-m2", "t1-m3"])
    s1.superseded_by = s2.id
    r = Memory(user, "reflection", "Ada likes Turin", 0.8, [s1.id, s2.id])
    profile = {
        "name": {"value": "Ada Lovelace", "source_ids": ["t1-m0"]},
        "city": {"value": "Turin", "source_ids": [r.id]},
    }
    graph = build_memory_graph(
        user,
        profile=profile,
        memories=[r, s2, s1],  # newest first, as storage lists them
        turns=shown,
        turn_counts={"t1": 4},
    )
    assert graph.title == "Ada Lovelace (user ada)"
    assert (graph.hidden_turns, graph.hidden_memories) == (0, 0)
    counts = {k: graph.node_count(k) for k in ("fact", "reflection", "summary", "turn")}
    assert counts == {"fact": 2, "reflection": 1, "summary": 2, "turn": 4}
    assert not any(n.kind.startswith("earlier") for n in graph.nodes)
    edges = {(e.source, e.target, e.kind) for e in graph.edges}
    assert (f"memory:{s1.id}", turn_id("t1", "t1-m0"), "source") in edges
    assert (f"memory:{s2.id}", turn_id("t1", "t1-m3"), "source") in edges
    assert (f"memory:{r.id}", f"memory:{s1.id}", "source") in edges
    assert ("fact:name", turn_id("t1", "t1-m0"), "source") in edges
    assert ("fact:city", f"memory:{r.id}", "source") in edges
    assert (f"memory:{s1.id}", f"memory:{s2.id}", "superseded_by") in edges
    assert graph.edge_count("next") == 3  # m0 -> m1 -> m2 -> m3
    assert graph.edge_count("source") == 4 + 2 + 2
    summaries = [n.id for n in graph.nodes if n.kind == "summary"]
    assert summaries == [f"memory:{s1.id}", f"memory:{s2.id}"]  # oldest on the left


def test_hundreds_of_turns_are_folded_per_thread_and_edges_counted() -> None:
    user = "bob"
    # 300 turns in t1, 100 in t2; only the newest 10 of t1 and 20 of t2 are drawn
    shown = turns("t1", 10, start=290) + turns("t2", 20, start=80)
    old = summary(user, "t1", [f"t1-m{i}" for i in range(10)])
    recent = summary(user, "t2", ["t2-m98", "t2-m99"])
    r = Memory(user, "reflection", "insight", 0.7, [old.id, "an-unlisted-summary"])
    graph = build_memory_graph(
        user,
        profile={"city": {"value": "Oslo", "source_ids": ["a-folded-message"]}},
        memories=[r, recent, old],
        turns=shown,
        turn_counts={"t1": 300, "t2": 100},
        memory_count=60,
    )
    assert graph.title == "user bob"
    assert graph.node_count("turn") == 30
    assert (graph.hidden_turns, graph.hidden_memories) == (370, 57)
    folded = {n.id: n.label for n in graph.nodes if n.kind == "earlier_turns"}
    assert set(folded) == {"earlier_turns:t1", "earlier_turns:t2"}
    assert "290 earlier turns" in folded["earlier_turns:t1"]
    assert "80 earlier turns" in folded["earlier_turns:t2"]
    edges = {(e.source, e.target, e.kind): e.count for e in graph.edges}
    # the old summary's ten sources are all folded: one edge that counts ten
    assert edges[(f"memory:{old.id}", "earlier_turns:t1", "source")] == 10
    assert edges[(f"memory:{r.id}", "earlier_memories", "source")] == 1
    assert edges[("fact:city", "earlier_sources", "source")] == 1
    # the fold leads into the first drawn turn of its thread
    assert edges[("earlier_turns:t1", turn_id("t1", "t1-m290"), "next")] == 1
    assert graph.edge_count("next") == 9 + 19 + 2
    assert len(graph.nodes) == 30 + 2 + 3 + 1 + 2  # turns, folds, memories, fact, earlier*


def test_another_users_memory_is_refused() -> None:
    with pytest.raises(ValueError, match="another user"):
        build_memory_graph(
            "ada",
            profile={},
            memories=[summary("eve", "t1", ["x"])],
            turns=[],
            turn_counts={},
        )


def test_an_empty_memory_is_an_empty_graph() -> None:
    graph = build_memory_graph("ada", profile={}, memories=[], turns=[], turn_counts={})
    assert (graph.nodes, graph.edges, graph.title) == ([], [], "user ada")


def test_rows_put_facts_on_top_and_turns_at_the_bottom() -> None:
    graph = build_memory_graph(
        "ada",
        profile={"name": {"value": "Ada", "source_ids": []}},
        memories=[summary("ada", "t1", ["t1-m0"])],
        turns=turns("t1", 3),
        turn_counts={"t1": 3},
    )
    pos = positions(graph)
    ys = {n.kind: pos[n.id][1] for n in graph.nodes}
    assert ys["fact"] > ys["summary"] > ys["turn"]
    xs = [pos[turn_id("t1", f"t1-m{i}")][0] for i in range(3)]
    assert xs == sorted(xs)


def test_draws_a_png(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    pytest.importorskip("networkx")
    graph = build_memory_graph(
        "ada",
        profile={"name": {"value": "Ada", "source_ids": ["t1-m0"]}},
        memories=[summary("ada", "t1", ["t1-m0", "t1-m1"])],
        turns=turns("t1", 2),
        turn_counts={"t1": 2},
    )
    out = tmp_path / "memory.png"
    draw_memory_graph(graph, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_missing_draw_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    graph = build_memory_graph("ada", profile={}, memories=[], turns=[], turn_counts={})
    with pytest.raises(DrawExtraMissing, match=r"'draw' extra .*\.\[draw\]"):
        draw_memory_graph(graph)


def test_a_summary_without_a_thread_finds_its_drawn_turns_by_id() -> None:
    loose = Memory("ada", "summary", "loose", 0.5, ["t1-m1", "gone"], thread_id=None)
    graph = build_memory_graph(
        "ada", profile={}, memories=[loose], turns=turns("t1", 2), turn_counts={"t1": 2}
    )
    edges = {(e.source, e.target) for e in graph.edges if e.kind == "source"}
    assert edges == {
        (f"memory:{loose.id}", turn_id("t1", "t1-m1")),
        (f"memory:{loose.id}", "earlier_turns:?"),
    }
    assert [n.label for n in graph.nodes if n.kind == "earlier_turns"] == ["earlier turns"]
