"""The in-process memory scheduler and the stream tag, without a server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.constants import TAG_NOSTREAM

from graph.background import REPORTS_KEPT, LocalScheduler, memory_run, memory_thread_id
from graph.context import Context
from memory_graph_agent.prompting.llm import NOSTREAM_TAG, tagged


class SlowGraph:
    """Records each memory run; every run waits for ``release``."""

    def __init__(self) -> None:
        self.runs: list[tuple[dict, dict]] = []
        self.release = asyncio.Event()
        self.fail = False

    async def ainvoke(self, graph_input: dict, config: dict, context: Any) -> dict:
        self.runs.append((graph_input, context.memory_of))
        await self.release.wait()
        if self.fail:
            raise RuntimeError("model down")
        return {"memory_events": [{"text": f"run {len(self.runs)}"}]}


def _released() -> tuple[SlowGraph, LocalScheduler]:
    """A graph whose runs return at once, and a scheduler bound to it."""
    graph = SlowGraph()
    graph.release.set()
    memory = LocalScheduler()
    memory.bind(graph)
    return graph, memory


def test_memory_calls_carry_langgraphs_nostream_tag():
    assert NOSTREAM_TAG == TAG_NOSTREAM
    assert TAG_NOSTREAM in tagged("summarize")["tags"]


def test_memory_runs_get_their_own_thread_per_user_and_conversation():
    config, context = memory_run(Context(user_id="alice", model="local:smollm2"), "t1")
    assert config["configurable"] == {"thread_id": memory_thread_id("alice", "t1")}
    assert context.memory_of == "t1" and context.user_id == "alice"
    assert TAG_NOSTREAM in config["tags"]
    ids = {memory_thread_id(u, t) for u in ("alice", "bob") for t in ("t1", "t2")}
    assert len(ids) == 4


async def test_one_run_per_thread_at_a_time_and_requests_coalesce():
    graph = SlowGraph()
    memory = LocalScheduler()
    memory.bind(graph)
    ctx = Context(user_id="alice", model="local:smollm2")
    await memory(ctx, "t1", False, delay_s=0)
    await asyncio.sleep(0.01)
    for compress in (False, True, False):  # while run 1 works: one waiting run takes them all
        await memory(ctx, "t1", compress, delay_s=0)
    await memory(ctx, "t2", False, delay_s=0)  # another thread runs at once
    await asyncio.sleep(0.01)
    assert [thread for _, thread in graph.runs] == ["t1", "t2"]
    assert memory.pending("alice", "t1") and memory.pending()
    graph.release.set()
    await memory.drain()
    assert graph.runs == [
        ({"compress": False}, "t1"),
        ({"compress": False}, "t2"),
        ({"compress": True}, "t1"),  # the waiting run drains, as one of the requests asked
    ]
    assert not memory.pending() and len(memory.reports()) == 3 and memory.reports() == []


async def test_requests_within_the_delay_join_one_run_that_starts_after_it():
    graph, memory = _released()
    ctx = Context(user_id="alice", model="local:smollm2")
    started = asyncio.get_running_loop().time()
    for compress in (False, True):
        await memory(ctx, "t1", compress, delay_s=0.3)
        await asyncio.sleep(0.1)
    assert graph.runs == []  # nothing before the delay
    await memory.drain()
    assert graph.runs == [({"compress": True}, "t1")]
    assert asyncio.get_running_loop().time() - started >= 0.3


async def test_a_failed_memory_run_is_counted_and_does_not_stop_the_next():
    graph = SlowGraph()
    graph.fail = True
    graph.release.set()
    memory = LocalScheduler()
    memory.bind(graph)
    ctx = Context(user_id="alice", model="local:smollm2")
    await memory(ctx, "t1", False, delay_s=0)
    await memory.drain()
    graph.fail = False
    await memory(ctx, "t1", False, delay_s=0)
    await memory.drain()
    assert memory.failures == 1 and len(memory.reports()) == 1


async def test_an_unbound_scheduler_refuses():
    with pytest.raises(RuntimeError, match="not bound"):
        await LocalScheduler()(Context(user_id="alice", model="local:smollm2"), "t1", False)


async def test_a_later_run_starts_after_its_delay_once_and_drain_does_not_wait_for_it():
    graph, memory = _released()
    ctx = Context(user_id="alice", model="local:smollm2")
    started = asyncio.get_running_loop().time()
    await memory(ctx, "t1", True, after_s=5)
    await memory(ctx, "t1", True, after_s=0.3)  # one timer per thread: the earliest
    await memory(ctx, "t1", False, after_s=0.6)
    await memory.drain()
    assert graph.runs == [] and asyncio.get_running_loop().time() - started < 0.2
    await asyncio.sleep(0.4)
    await memory.drain()  # the later run does not wait memory_delay_s again
    assert graph.runs == [({"compress": True}, "t1")]
    assert asyncio.get_running_loop().time() - started < 1.5


async def test_the_server_scheduler_enqueues_a_later_run_after_the_lease(monkeypatch):
    import langgraph_sdk

    from graph.background import ServerScheduler

    created: list[dict] = []

    class Runs:
        async def create(self, thread_id: str, assistant_id: str, **kwargs: Any) -> None:
            created.append({"thread_id": thread_id, "assistant_id": assistant_id, **kwargs})

    class Client:
        runs = Runs()

    monkeypatch.setattr(langgraph_sdk, "get_client", lambda: Client())
    monkeypatch.delenv("MEMORY_AGENT_SERVER_URL", raising=False)  # the in-process client
    ctx = Context(user_id="alice", model="local:smollm2")
    await ServerScheduler("agent")(ctx, "t1", False, delay_s=1.0)
    await ServerScheduler("agent")(ctx, "t1", True, after_s=2.3)
    assert [c["after_seconds"] for c in created] == [1, 3]  # whole seconds, never early
    assert {c["thread_id"] for c in created} == {memory_thread_id("alice", "t1")}
    assert [c["input"] for c in created] == [{"compress": False}, {"compress": True}]
    assert all(c["multitask_strategy"] == "enqueue" for c in created)


async def test_the_server_scheduler_skips_a_memory_thread_id_another_thread_holds(monkeypatch):
    """A held id (404/409 from the server) moves memory to the next id, never inline."""
    import httpx
    import langgraph_sdk
    from langgraph_sdk.errors import NotFoundError

    from graph.background import MemoryThreadTaken, ServerScheduler

    held = {memory_thread_id("alice", "t1")}
    created: list[str] = []

    class Runs:
        async def create(self, thread_id: str, assistant_id: str, **kwargs: Any) -> None:
            if thread_id in held:
                request = httpx.Request("POST", f"http://server/threads/{thread_id}/runs")
                response = httpx.Response(404, request=request)
                raise NotFoundError("Thread not found", response=response, body=None)
            created.append(thread_id)

    class Client:
        runs = Runs()

    monkeypatch.setattr(langgraph_sdk, "get_client", lambda: Client())
    monkeypatch.delenv("MEMORY_AGENT_SERVER_URL", raising=False)  # the in-process client
    ctx = Context(user_id="alice", model="local:smollm2")
    await ServerScheduler("agent")(ctx, "t1", False, delay_s=0)
    await ServerScheduler("agent")(ctx, "t1", False, delay_s=0)
    assert created == [memory_thread_id("alice", "t1", 1)] * 2  # the same alternate each time
    held |= {memory_thread_id("alice", "t1", n) for n in (1, 2)}
    with pytest.raises(MemoryThreadTaken):
        await ServerScheduler("agent")(ctx, "t1", False, delay_s=0)


async def test_finished_runs_leave_nothing_per_thread_and_reports_keep_the_newest():
    """A long-lived process (MemoryMiddleware never asks for reports) serves threads
    without end: what the scheduler keeps stays bounded."""
    graph, memory = _released()
    ctx = Context(user_id="alice", model="local:smollm2")
    threads = [f"t{n}" for n in range(REPORTS_KEPT + 20)]
    for thread in threads:
        await memory(ctx, thread, False, delay_s=0)
    assert memory.pending("alice", threads[0])
    await memory.drain()
    assert len(graph.runs) == len(threads)
    assert memory._tails == {}, "a finished thread is forgotten"
    assert not memory.pending() and not memory.pending("alice", threads[-1])
    await memory.wait("alice", threads[-1])  # nothing to wait for
    kept = memory.reports()
    assert [r["thread_id"] for r in kept] == threads[-REPORTS_KEPT:]
    assert memory.reports() == []
    await memory(ctx, threads[0], False, delay_s=0)  # a thread served again runs as before
    await memory.drain()
    assert [r["thread_id"] for r in memory.reports()] == [threads[0]]
