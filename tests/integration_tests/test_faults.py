"""Fault injection on real servers: a private embedded Redis and Postgres per test,
killed and restarted by the test while a conversation runs through the graph."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import pytest

from memory_graph_agent.local import embedded
from memory_graph_agent.settings import Settings
from tests.conftest import kinds, say


@pytest.fixture
def private_servers(monkeypatch):
    """Own Redis + Postgres under a throw-away home; the env points the stores at them."""
    home = Path(tempfile.mkdtemp(prefix="ma-fault-", dir="/tmp"))
    home.chmod(0o755)  # our own directory: reachable by the unprivileged postgres user
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(home))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    urls = embedded.ensure_services()
    monkeypatch.setenv("REDIS_URL", urls.redis_url)
    monkeypatch.setenv("DATABASE_URL", urls.database_url)

    def restart() -> None:
        saved = {k: os.environ.pop(k) for k in ("REDIS_URL", "DATABASE_URL")}
        try:
            embedded.ensure_services()
        finally:
            os.environ.update(saved)

    layout = embedded._Layout(home)
    try:
        yield layout, restart
    finally:
        for k in ("REDIS_URL", "DATABASE_URL"):
            os.environ.pop(k, None)
        embedded.stop_services()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
async def private_graph_for(private_servers, checkpointer):
    """The agent on the private servers for given settings (the session's uses the shared)."""
    from graph.builder import build_graph
    from memory_graph_agent.services.stores import services_session

    async with services_session("local:all-minilm-l6-v2") as services:
        yield lambda settings=None: build_graph(
            services, checkpointer=checkpointer, settings=settings or Settings()
        )


@pytest.fixture
def agent(private_graph_for):
    """The agent on the private servers, with the default settings."""
    return private_graph_for()


async def _invariant(user: str, thread: str, expected_turns: int) -> None:
    from memory_graph_agent.services.stores import services_session

    async with services_session("local:all-minilm-l6-v2") as services:
        await _check(services, user, thread, expected_turns)


async def _check(services, user: str, thread: str, expected_turns: int) -> None:
    logged = {m.id: m for m in await services.episodes.history(user, thread)}
    humans = [m.content for m in logged.values() if m.role == "human"]
    assert len(humans) == expected_turns and len(set(humans)) == expected_turns
    window = {m.id for m in await services.window.window(user, thread)}
    backlog = {m.id for _, m in await services.window.pending(user, thread)}
    backlog |= {m.id for m in await services.queue.processing(user, thread)}
    dead = {m.id for e in await services.queue.dead_letters(user, thread) for m in e["items"]}
    summaries = await services.memories.list(user, kind="summary", limit=10_000)
    counts = Counter(sid for s in summaries for sid in s.source_ids)
    assert not counts or max(counts.values()) == 1, "a message is in two summaries"
    assert set(counts) | window | backlog | dead == set(logged), "a message is nowhere"
    assert not (set(counts) & (window | backlog | dead)), "a message is in two places"


async def test_redis_killed_mid_conversation_then_restarted(
    private_servers, private_graph_for, make_context
):
    layout, restart = private_servers
    settings = Settings().override(window_size=6, summary_batch=4)
    ctx = make_context()
    agent = private_graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    events: list[tuple[str, str]] = []
    for turn in range(60):
        if turn == 20:
            os.kill(int(layout.redis_pidfile.read_text().split()[0]), signal.SIGKILL)
        if turn == 30:
            restart()
        state = await say(agent, ctx, thread, f"turn {turn}: note {uuid.uuid4().hex[:6]}")
        assert state["messages"][-1].type == "ai"  # every turn completes
        events += kinds(state)
    assert ("trim_window", "buffered") in events
    for turn in range(60, 64):  # let the backlog drain
        await say(agent, ctx, thread, f"turn {turn}: drain")
    await _invariant(ctx.user_id, thread, 64)


async def test_postgres_stopped_mid_conversation_then_restarted(
    private_servers, private_graph_for, make_context
):
    layout, restart = private_servers
    settings = Settings().override(window_size=4, summary_batch=2, retry_backoff_s=0.01)
    ctx = make_context()
    agent = private_graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    await say(agent, ctx, thread, "My sister Anna is a marine biologist in Oslo.")
    for turn in range(5):
        await say(agent, ctx, thread, f"filler {turn}")
    embedded._stop_postgres(layout)
    events: list[tuple[str, str]] = []
    for turn in range(10):
        state = await say(agent, ctx, thread, f"while postgres is down {turn}")
        assert state["messages"][-1].type == "ai"
        events += kinds(state)
    assert ("recall", "unavailable") in events
    assert ("trim_window", "eviction_deferred") in events
    restart()
    for turn in range(8):
        state = await say(agent, ctx, thread, f"after restart {turn}")
    state = await say(agent, ctx, f"t-{uuid.uuid4().hex[:8]}", "What does my sister Anna do?")
    assert any("marine biologist" in m["text"] for m in state["recalled"]), "recall recovers"
    await _invariant(ctx.user_id, thread, 24)
