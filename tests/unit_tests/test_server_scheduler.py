"""The memory scheduler over HTTP, for an engine without an in-process client (Aegra).

The server's run API is faked here (what the scheduler sends is the subject); a real one
is in ``tests/integration_tests/test_aegra.py``. Aegra ignores ``after_seconds``, so the
scheduler waits in this process: requests coalesce, and a batch leased elsewhere is asked
for again when the lease ends, not at once, again and again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import langgraph_sdk
import pytest

from graph.background import ServerScheduler, memory_thread_id
from graph.context import Context
from graph.deferred import Deferred
from memory_graph_agent.auth.credentials import Verifier

SECRET = "k" * 48
URL = "http://127.0.0.1:2026"


class Runs:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.fail = False

    async def create(self, thread_id: str, assistant_id: str, **kwargs: Any) -> None:
        if self.fail:
            raise ConnectionError("server down")
        at = asyncio.get_running_loop().time()
        self.created.append({"thread_id": thread_id, "at": at, **kwargs})


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> tuple[Runs, list[dict[str, Any]]]:
    """The fake server's runs, and the arguments each client was built with."""
    runs, clients = Runs(), []

    class Client:
        def __init__(self) -> None:
            self.runs = runs

    def get_client(**kwargs: Any) -> Client:
        clients.append(kwargs)
        return Client()

    monkeypatch.setattr(langgraph_sdk, "get_client", get_client)
    monkeypatch.setenv("MEMORY_AGENT_JWT_SECRET", SECRET)
    monkeypatch.setenv("MEMORY_AGENT_SERVER_URL", URL)
    for name in ("MEMORY_AGENT_AUTH", "MEMORY_AGENT_JWT_AUDIENCE", "MEMORY_AGENT_JWT_ISSUER"):
        monkeypatch.delenv(name, raising=False)
    return runs, clients


def _ctx(user: str = "alice") -> Context:
    return Context(user_id=user, model="local:smollm2")


async def test_runs_go_to_the_servers_url_as_the_turns_user_with_no_key(server) -> None:
    runs, clients = server
    scheduler = ServerScheduler("memory_agent")
    assert scheduler.url == URL
    await scheduler(_ctx(), "t1", False, delay_s=0)
    await scheduler(_ctx("bob"), "t9", False, delay_s=0)
    await scheduler.drain()
    assert clients == [{"url": URL, "api_key": None}]  # one client; no key from the env
    verifier = Verifier.from_env({"MEMORY_AGENT_JWT_SECRET": SECRET})
    users = [verifier.identify(run["headers"]).user_id for run in runs.created]
    assert users == ["alice", "bob"]
    assert runs.created[0]["thread_id"] == memory_thread_id("alice", "t1")
    assert runs.created[0]["context"]["memory_of"] == "t1"
    assert all(run["after_seconds"] is None for run in runs.created)  # the engine ignores it


async def test_turns_within_the_delay_make_one_run_after_it(server) -> None:
    runs, _ = server
    scheduler = ServerScheduler("memory_agent")
    started = asyncio.get_running_loop().time()
    await scheduler(_ctx(), "t1", False, delay_s=0.3)
    await asyncio.sleep(0.1)
    await scheduler(_ctx(), "t1", True, delay_s=0.3)  # joins the waiting one
    await scheduler(_ctx(), "t2", False, delay_s=0.3)  # another thread: a run of its own
    assert runs.created == []  # the turn returned at once; the run waits here
    await scheduler.drain()
    assert [r["input"] for r in runs.created] == [{"compress": True}, {"compress": False}]
    assert all(r["at"] - started >= 0.29 for r in runs.created), "created before the delay"
    await scheduler(_ctx(), "t1", False, delay_s=0)  # after it: a run of its own
    await scheduler.drain()
    assert len(runs.created) == 3


async def test_a_leased_batch_is_asked_for_when_its_lease_ends_not_in_a_loop(server) -> None:
    """A memory run that finds its batch leased asks again in ``after_s``: Aegra would run
    it at once, find the batch still leased, and ask again, as fast as it can."""
    runs, _ = server
    scheduler = ServerScheduler("memory_agent")
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(5):  # the leased batch, seen by five overlapping runs
        await scheduler(_ctx(), "t1", True, after_s=0.4)
    await scheduler.drain()
    assert len(runs.created) == 1 and runs.created[0]["at"] - started >= 0.39
    # a new turn meanwhile brings the run forward, never back
    started = loop.time()
    await scheduler(_ctx(), "t1", True, after_s=5)
    await scheduler(_ctx(), "t1", False, delay_s=0.1)
    await scheduler.drain()
    assert len(runs.created) == 2 and runs.created[1]["at"] - started < 1
    assert runs.created[1]["input"] == {"compress": True}


async def test_a_server_that_cannot_sign_fails_the_request_and_a_failed_run_is_logged(
    server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runs, _ = server
    scheduler = ServerScheduler("memory_agent")
    monkeypatch.delenv("MEMORY_AGENT_JWT_SECRET")
    with pytest.raises(ValueError, match="MEMORY_AGENT_JWT_SECRET"):
        await scheduler(_ctx(), "t1", False, delay_s=0)  # the turn says: memory unavailable
    monkeypatch.setenv("MEMORY_AGENT_JWT_SECRET", SECRET)
    runs.fail = True
    await scheduler(_ctx(), "t1", False, delay_s=0)
    await scheduler.drain()
    assert "not created (ConnectionError('server down')); its messages wait" in caplog.text
    runs.fail = False  # the next request is not stuck behind the failed one
    await scheduler(_ctx(), "t1", False, delay_s=0)
    await scheduler.drain()
    assert len(runs.created) == 1


async def test_without_a_url_the_in_process_client_keeps_the_engines_delay(
    server, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, clients = server
    monkeypatch.delenv("MEMORY_AGENT_SERVER_URL")
    scheduler = ServerScheduler("memory_agent")
    await scheduler(_ctx(), "t1", False, delay_s=1.0)
    assert clients == [{}] and runs.created[0]["after_seconds"] == 1
    assert runs.created[0]["headers"] is None  # the loopback checks no credential


async def test_deferred_calls_are_one_per_key_and_none_is_kept_after_it() -> None:
    calls: list[tuple[str, bool]] = []
    deferred = Deferred()

    def call(key: str):
        async def made(compress: bool) -> None:
            calls.append((key, compress))

        return made

    deferred.request("a", 0.05, False, call("a"))
    deferred.request("a", 0.05, True, call("a-again"))
    assert deferred.waiting("a") and not deferred.waiting("b") and deferred.waiting()
    await deferred.drain()
    assert calls == [("a", True)]
    assert not deferred.waiting() and deferred._waiting == {}
