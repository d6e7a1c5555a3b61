"""``memory-agent memory graph`` on the real stores: a seeded user's PNG, and no other user's."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from memory_graph_agent.drawing.reading import read_memory_graph
from memory_graph_agent.settings import Settings
from tests.conftest import say

TURNS = (
    "Hi! My name is Zhang San and I live in Berlin.",
    "For programming I prefer Go over Java.",
    "What is a haiku?",
    "Name a river in Italy.",
)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_graph_agent.cli.main", "memory", "graph", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
async def seeded(graph_for, make_context, services):
    """Zhang San's four turns (two threads) and another user's turn about a secret."""
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    threads = [f"t{n}-{uuid.uuid4().hex[:6]}" for n in range(2)]
    for n, text in enumerate(TURNS):
        await say(graph_for(settings), ctx, threads[n // 2], text)
    settings_other = Settings().override(window_size=2, summary_batch=2)
    other = make_context(user_id=f"u-{uuid.uuid4().hex[:10]}")
    thread = f"o-{uuid.uuid4().hex[:6]}"
    for text in ("My name is Eve and my secret is plutonium.", "What is a sonnet?"):
        await say(graph_for(settings_other), other, thread, text)
    return ctx.user_id, other.user_id


async def test_the_cli_draws_the_seeded_user_and_nothing_of_another(seeded, services, tmp_path):
    user, other = seeded
    counts = await services.episodes.counts(user)
    memories = await services.memories.list(user)
    profile = await services.profile.get(user)
    turns = sum(counts.values())
    assert turns == 2 * len(TURNS) and memories and profile["name"]["value"] == "Zhang San"

    out = tmp_path / "memory.png"
    drawn = _cli("--user", user, "--out", str(out))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shown = _cli("--user", user, "--json")
    assert shown.returncode == 0, shown.stderr
    graph = json.loads(shown.stdout)
    nodes, edges = graph["nodes"], graph["edges"]
    assert graph["title"] == f"Zhang San (user {user})"
    kinds = [n["kind"] for n in nodes]
    assert kinds.count("turn") == turns
    assert kinds.count("summary") + kinds.count("reflection") == len(memories)
    assert kinds.count("fact") == len(profile)
    assert len(nodes) == turns + len(memories) + len(profile)  # nothing folded
    # every turn of a thread links to the next; every summary cites the turns of its batch
    assert sum(e["kind"] == "next" for e in edges) == turns - len(counts)
    summaries = [m for m in memories if m.kind == "summary"]
    cited = sum(e["kind"] == "source" and e["source"].startswith("memory:") for e in edges)
    assert cited >= sum(len(m.source_ids) for m in summaries)
    ids = {n["id"] for n in nodes}
    assert all(e["source"] in ids and e["target"] in ids for e in edges)
    assert f"{len(nodes)} nodes, {len(edges)} edges" in drawn.stdout
    # the other user's words, threads and memories are nowhere in the graph
    text = json.dumps(graph)
    assert "plutonium" not in text and "Eve" not in text
    for thread in await services.episodes.counts(other):
        assert thread not in text
    for m in await services.memories.list(other):
        assert m.id not in text


async def test_many_turns_are_folded_per_thread(seeded, services):
    user, _ = seeded
    graph = await read_memory_graph(services, user, max_turns=3, max_memories=1)
    assert graph.node_count("turn") == 3
    assert graph.hidden_turns == 2 * len(TURNS) - 3
    folded = [n for n in graph.nodes if n.kind == "earlier_turns"]
    assert folded and sum(int(n.label.split()[0]) for n in folded) == graph.hidden_turns
    assert graph.node_count("summary") + graph.node_count("reflection") == 1


def test_a_hostile_user_id_is_refused_before_anything_is_drawn(tmp_path):
    out = tmp_path / "x.png"
    result = _cli("--user", "a:*", "--out", str(out))
    assert result.returncode == 2 and "invalid user_id" in result.stdout
    assert not out.exists()
