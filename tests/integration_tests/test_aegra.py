"""The same ``langgraph.json`` served by Aegra (the open engine), one process, over HTTP.

Runs where ``aegra-api`` is installed (Python 3.12+: `.ci/pythons` installs it beside the
README's demo on 3.13). It covers what the engine adapts at the edge
(`memory_graph_agent.auth`): str headers, flat run fields, FastAPI routes, and the
auth that cannot load refusing the whole server instead of serving ``anonymous``; and
the background memory runs, which Aegra's lack of an in-process client sends over HTTP
to the server's own URL (``MEMORY_AGENT_SERVER_URL``, `graph.background.ServerScheduler`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from memory_graph_agent.core.memory_threads import memory_thread_id
from tests.integration_tests import aegra_server

pytest.importorskip("aegra_api")
pytestmark = [pytest.mark.slow, pytest.mark.server, pytest.mark.local_model]

ALICE = f"alice-key-{uuid.uuid4().hex}"
BOB = f"bob-key-{uuid.uuid4().hex}"
PREFIX = f"aegra-{uuid.uuid4().hex[:8]}"
KNOBS = {"WINDOW_SIZE": "2", "SUMMARY_BATCH": "2", "SUMMARY_MODE": "raw"}
"""A window of two messages: a second turn evicts the first into a memory run."""


def _start(keys: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    from memory_graph_agent.local.embedded import ensure_services

    urls = ensure_services()
    env = {
        **os.environ,
        "REDIS_URL": urls.redis_url,
        "DATABASE_URL": urls.database_url,
        "MEMORY_AGENT_API_KEYS": keys,
        "MEMORY_AGENT_JWT_SECRET": uuid.uuid4().hex * 2,  # the scheduler's tokens
        "MEMORY_AGENT_SERVER_URL": f"http://127.0.0.1:{port}",
        "AEGRA_CONFIG": "langgraph.json",
        "LANGSMITH_TRACING": "false",
        "MODEL": "local:smollm2",
        **KNOBS,
        "MEMORY_KEY_PREFIX": PREFIX,
    }
    env.pop("MEMORY_AGENT_AUTH", None)
    return aegra_server.start(env, port, log)


@pytest.fixture(scope="module")
def aegra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = aegra_server.free_port()
    log = tmp_path_factory.mktemp("aegra") / "aegra.log"
    proc = _start(f"{ALICE}:alice,{BOB}:bob", port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        aegra_server.wait_healthy(proc, url, log)
        yield url
    finally:
        aegra_server.kill(proc)


def _http(url: str, key: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120, headers={"x-api-key": key} if key else {})


def _turn(text: str) -> dict:
    return {
        "assistant_id": "memory_agent",
        "input": {"messages": [{"role": "human", "content": text}]},
    }


def test_anonymous_callers_get_401_on_every_route(aegra: str) -> None:
    with _http(aegra) as anonymous, _http(aegra, ALICE) as alice:
        assert anonymous.post("/threads/search", json={}).status_code == 401
        assert anonymous.get("/memory/metrics").status_code == 401
        assert anonymous.delete("/memory/users/alice").status_code == 401
        assert alice.post("/threads/search", json={}).status_code == 200  # the same, keyed
        assert alice.get("/memory/metrics").status_code == 200


def test_a_turn_is_answered_and_kept_from_other_users(aegra: str) -> None:
    with _http(aegra, ALICE) as alice, _http(aegra, BOB) as bob:
        thread = alice.post("/threads", json={}).json()["thread_id"]
        done = alice.post(f"/threads/{thread}/runs/wait", json=_turn("Hi, I live in Porto."))
        assert done.status_code == 200, done.text
        assert done.json()["messages"][-1]["type"] == "ai"
        assert bob.get(f"/threads/{thread}").status_code == 404
        assert bob.post(f"/threads/{thread}/runs/wait", json=_turn("hi")).status_code == 404
        claim = {**_turn("hi"), "context": {"user_id": "bob"}}
        assert alice.post(f"/threads/{thread}/runs/wait", json=claim).status_code == 403


def test_a_deployment_whose_auth_cannot_load_refuses_to_start(tmp_path: Path) -> None:
    """Aegra served everyone as 'anonymous' when our auth module raised at its first request."""
    port = aegra_server.free_port()
    proc = _start("short:alice", port, tmp_path / "aegra.log")
    try:
        assert proc.wait(90) != 0
    finally:
        aegra_server.kill(proc, signal.SIGKILL)
    assert "AuthConfigError" in (tmp_path / "aegra.log").read_text()


def test_a_turns_memory_run_is_created_and_completes_on_its_memory_thread(aegra: str) -> None:
    """Over HTTP with the server's token for the turn's user; the reply did not wait."""
    from memory_graph_agent.local.embedded import ensure_services

    with _http(aegra, ALICE) as alice, _http(aegra, BOB) as bob:
        thread = alice.post("/threads", json={}).json()["thread_id"]
        first = alice.post(f"/threads/{thread}/runs/wait", json=_turn("I keep bees."))
        first_ids = [m["id"] for m in first.json()["messages"][:2]]
        second = alice.post(f"/threads/{thread}/runs/wait", json=_turn("Two plus two?"))
        events = second.json()["memory_events"]
        assert ("trim_window", "scheduled") in [(e["node"], e["kind"]) for e in events], events
        assert not any(e["node"] == "summarize" for e in events), "memory ran in the turn"
        memory_thread = memory_thread_id("alice", thread)
        deadline, runs = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            runs = alice.get(f"/threads/{memory_thread}/runs").json()
            if runs and all(r["status"] in ("success", "error") for r in runs):
                break
            time.sleep(0.5)
        assert runs and {r["status"] for r in runs} == {"success"}, runs
        memory = alice.get(f"/threads/{memory_thread}/state").json()["values"]
        assert any(e["node"] == "summarize" for e in memory["memory_events"]), memory
        assert bob.get(f"/threads/{memory_thread}").status_code == 404
    urls = ensure_services()
    assert aegra_server.summary_sources(urls.database_url, "alice", thread) == [first_ids]
    r = redis.Redis.from_url(urls.redis_url)
    try:
        assert r.llen(f"{PREFIX}:pending:alice:{thread}") == 0  # the batch was acknowledged
    finally:
        r.close()


def test_crons_run_as_their_creator_and_refuse_what_aegra_would_not_check(aegra: str) -> None:
    """Aegra fires a cron's runs without the run rules, from the payload as created: a
    cron must name its user in its context and a maintenance input that needs no rewrite.

    Its first run fires at creation, so no test waits for the next minute.
    """
    mine = {"user_id": "alice"}
    nightly = {"dry_run": True, "user_id": "alice", "all_users": False}
    with _http(aegra, ALICE) as alice:
        thread = alice.post("/threads", json={}).json()["thread_id"]
        cron = {"assistant_id": "maintenance", "schedule": "0 3 * * *"}
        refused = {
            "no user in its context": {**cron, "input": nightly},
            "another user": {**cron, "input": nightly, "context": {"user_id": "bob"}},
            "all users, not admin": {**cron, "input": {"all_users": True}, "context": mine},
            "input to rewrite": {**cron, "input": {"dry_run": True}, "context": mine},
        }
        got = {name: alice.post(f"/threads/{thread}/runs/crons", json=body).status_code
               for name, body in refused.items()}  # fmt: skip
        assert got == dict.fromkeys(refused, 403), got
        made = alice.post(
            f"/threads/{thread}/runs/crons", json={**cron, "input": nightly, "context": mine}
        )
        assert made.status_code == 200, made.text
        deadline, runs = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            runs = alice.get(f"/threads/{thread}/runs").json()
            if runs and runs[-1]["status"] in ("success", "error"):
                break
            time.sleep(0.5)
        assert [r["status"] for r in runs] == ["success"], runs
        state = alice.get(f"/threads/{thread}/state").json()["values"]
        assert state["user_id"] == "alice" and state["report"]["dry_run"] is True, state
        # with alice's threads of the tests before, retention is the engine's (test_server_token)
        assert state["retention"] == "keep_latest" or "checkpointer.ttl" in state["retention"]
        crons = alice.post("/runs/crons/search", json={}).json()
        assert len(crons) == 1
        cron_id = crons[0]["cron_id"]
        patch = alice.patch(f"/runs/crons/{cron_id}", json={"input": {"all_users": True}})
        assert patch.status_code == 403, patch.text
        assert alice.patch(f"/runs/crons/{cron_id}", json={"enabled": False}).status_code == 200
        assert alice.delete(f"/runs/crons/{cron_id}").status_code in (200, 204)
