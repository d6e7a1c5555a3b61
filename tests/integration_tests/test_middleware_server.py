"""`MemoryMiddleware` served by ``langgraph dev`` with the project's auth.

The server serves a ``create_agent`` agent (`middleware_server_agent`) beside our
``memory_agent`` graph, which runs its memory. The user comes from the authenticated
identity, a run claiming another user is refused (403), and what one thread said is
recalled in another thread of the same user once its memory run has stored it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.integration_tests.dev_server import REPO_ROOT, client, running_dev_server
from tests.integration_tests.test_auth_server import status

AGENT = "my_agent"


@pytest.fixture(scope="module")
def agent_server(memory_env, server_credentials, tmp_path_factory):
    repo = json.loads((REPO_ROOT / "langgraph.json").read_text())
    config = {
        **repo,
        "dependencies": [str(REPO_ROOT)],
        "graphs": {
            AGENT: str(REPO_ROOT / "tests/integration_tests/middleware_server_agent.py") + ":agent",
            "memory_agent": str(REPO_ROOT / "graph/builder.py") + ":make_graph",
        },
        "auth": {**repo["auth"], "path": str(REPO_ROOT / repo["auth"]["path"])},
        "http": {**repo["http"], "app": str(REPO_ROOT / repo["http"]["app"])},
        "env": str(REPO_ROOT / repo["env"]),
    }
    path = Path(tmp_path_factory.mktemp("server")) / "langgraph.json"
    path.write_text(json.dumps(config))
    with running_dev_server({**memory_env, **server_credentials.env()}, path) as server:
        yield server


async def _ask(sdk, thread: str, text: str, context: dict | None = None) -> dict:
    return await sdk.runs.wait(
        thread, AGENT, input={"messages": [{"role": "user", "content": text}]}, context=context
    )


async def test_the_user_is_the_identity_and_memory_crosses_threads(
    agent_server, server_credentials, services
):
    alice = server_credentials.alice
    sdk = client(agent_server.url, key=server_credentials.keys[alice])
    old = (await sdk.threads.create())["thread_id"]
    impersonation = _ask(sdk, old, "hi", context={"user_id": server_credentials.bob})
    assert await status(impersonation) == 403  # refused before the run
    await _ask(sdk, old, "My name is Zhang San and I live in Berlin.")
    kinds = set()
    for i in range(3):
        state = await _ask(sdk, old, f"unrelated question {i}")
        kinds |= {(e["node"], e["kind"]) for e in state["memory_events"]}
    assert ("trim_window", "scheduled") in kinds  # handed to a run of the server's graph
    deadline = time.monotonic() + 60  # the memory run is a background run of memory_agent
    while not (await services.memories.count(alice)).get("summary"):
        assert time.monotonic() < deadline, agent_server.log()
        await asyncio.sleep(0.5)
    assert await services.memories.count(server_credentials.bob) == {}
    new = (await sdk.threads.create())["thread_id"]
    state = await _ask(sdk, new, "Where do I live?")
    recalled = " ".join(item["text"] for item in state["memory_recalled"])
    assert "Berlin" in recalled, agent_server.log()
    assert state["memory_profile"]["city"]["value"] == "Berlin"


async def test_a_session_end_through_the_server_forms_the_users_memory_only_for_them(
    agent_server, server_credentials, services
):
    """``{"end_session": true}`` on the served agent archives the caller's thread into a
    summary within the run, recalled from their next thread; another identity cannot end
    it, and what they tried leaves the thread as it was."""
    alice, bob = server_credentials.alice, server_credentials.bob
    sdk = client(agent_server.url, key=server_credentials.keys[alice])
    intruder = client(agent_server.url, key=server_credentials.keys[bob])
    thread = (await sdk.threads.create())["thread_id"]
    said = await _ask(sdk, thread, "My sister Mira teaches cello in Lisbon.")
    assert said["memory_events"] and not await _summaries_of(services, alice, thread)
    window = [m.content for m in await services.window.window(alice, thread)]
    assert window[0] == "My sister Mira teaches cello in Lisbon."  # in the window, not stored

    end = {"end_session": True}
    assert await status(intruder.runs.wait(thread, AGENT, input=end)) in (403, 404)
    assert [m.content for m in await services.window.window(alice, thread)] == window
    assert not await _summaries_of(services, alice, thread)

    out = await sdk.runs.wait(thread, AGENT, input=end)
    assert "__error__" not in out and out["messages"] == [], out
    assert ("recall", "session_end") in {(e["node"], e["kind"]) for e in out["memory_events"]}
    stored = await _summaries_of(services, alice, thread)  # formed within the run
    assert stored and "Lisbon" in " ".join(s.text for s in stored), agent_server.log()
    assert await services.window.window(alice, thread) == []
    assert await services.queue.backlog(alice, thread) == 0
    assert await services.memories.count(bob) == {}

    state = await _ask(sdk, (await sdk.threads.create())["thread_id"], "Where does Mira teach?")
    recalled = " ".join(item["text"] for item in state["memory_recalled"])
    assert "Lisbon" in recalled, agent_server.log()


async def _summaries_of(services, user: str, thread: str) -> list:
    summaries = await services.memories.list(user, kind="summary", limit=100)
    return [s for s in summaries if s.thread_id == thread]
