"""A CLI-like process killed while a background memory run works, or mid-reply.

``python -m tests.integration_tests.memory_child USER THREAD [middleware]``: runs turns
through the agent (or, with ``middleware``, a ``create_agent`` agent with
`MemoryMiddleware`) with in-process background memory (`graph.background.LocalScheduler`) until a
memory run is inside a model call (its batch claimed and leased), prints
``MEMORY-RUNNING`` and waits to be killed. With ``turn DURABILITY`` (``graph``: the
graph's choice): one turn, then `CRASH_TEXT` (id `crash_id`), whose reply prints
``TURN-RUNNING`` and never returns. Servers come from ``REDIS_URL``/``DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent import MemoryMiddleware
from memory_graph_agent.cli.session import run_turn
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, purpose_of
from tests.conftest import EMBEDDING

LEASE_SECONDS = 1.0
REPO_ROOT = Path(__file__).resolve().parents[2]


async def kill_inside_a_memory_run(services: Any, user: str, thread: str, via: str) -> list[str]:
    """Run this module as a child until its memory run has a batch leased, then SIGKILL it.

    Returns the ids of the batch the dead process held (its lease then expires).
    """
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration_tests.memory_child",
        user,
        thread,
        via,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        line = await asyncio.wait_for(child.stdout.readline(), 180)
        assert line.strip() == b"MEMORY-RUNNING", line
        held = [m.id for m in await services.queue.processing(user, thread)]
        assert held  # a batch is claimed ...
    finally:
        child.kill()  # ... when the process dies, SIGKILL: no cleanup runs
        await child.wait()
    await asyncio.sleep(LEASE_SECONDS + 0.5)  # the dead worker's lease expires
    return held


CRASH_TEXT = "CRASH: what do I keep in my garden?"


def crash_id(thread: str) -> str:
    """The id of the message whose reply the killed process never finishes."""
    return f"crash-{thread}"


class StuckReplyModel(ScriptedChatModel):
    """Answers the user, except `CRASH_TEXT`: it announces itself and never returns."""

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        if purpose_of(run_manager.tags if run_manager else None) == "reply":
            if messages[-1].content == CRASH_TEXT:
                print("TURN-RUNNING", flush=True)
                await asyncio.sleep(3600)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


async def kill_mid_reply(user: str, thread: str, durability: str) -> None:
    """Run this module as a child until `CRASH_TEXT`'s reply is under way, then SIGKILL it."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.integration_tests.memory_child",
        user, thread, "turn", durability,
        cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        line = await asyncio.wait_for(child.stdout.readline(), 180)
        assert line.strip() == b"TURN-RUNNING", line
    finally:
        child.kill()
        await child.wait()


async def crash_mid_reply(user: str, thread: str, durability: str) -> None:
    """The child's side of `kill_mid_reply`."""
    model = register_chat_model(f"stuck-{uuid.uuid4().hex[:8]}", StuckReplyModel())
    ctx = Context(user_id=user, model=model)
    config = {"configurable": {"thread_id": thread}}
    async with services_session(EMBEDDING) as services:
        async with open_checkpointer(services.database_url) as saver:
            memory = LocalScheduler()
            agent = memory.bind(build_graph(services, saver, scheduler=memory))
            await run_turn(agent, ctx, thread, "I keep bees in my garden.")
            crash = {"messages": [HumanMessage(CRASH_TEXT, id=crash_id(thread))]}
            chosen = None if durability == "graph" else durability
            await agent.ainvoke(crash, config, context=ctx, durability=chosen)


class StuckChatModel(ScriptedChatModel):
    """Answers the user; every memory call announces itself and never returns."""

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        if purpose_of(run_manager.tags if run_manager else None) != "reply":
            print("MEMORY-RUNNING", flush=True)
            await asyncio.sleep(3600)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


async def main(user: str, thread: str, via: str = "graph", durability: str = "") -> None:
    if via == "turn":
        await crash_mid_reply(user, thread, durability)
        return
    stuck = StuckChatModel()
    model = register_chat_model(f"stuck-{uuid.uuid4().hex[:8]}", stuck)
    settings = Settings().override(window_size=2, summary_batch=2, lease_seconds=LEASE_SECONDS)
    ctx = Context(user_id=user, model=model)
    async with services_session(EMBEDDING) as services:
        async with open_checkpointer(services.database_url) as saver:
            if via == "middleware":
                middleware = MemoryMiddleware(services, model=model, settings=settings)
                agent = create_agent(stuck, middleware=[middleware], checkpointer=saver)
                config = {"configurable": {"thread_id": thread}}
                for i in range(4):
                    text = f"number {i} from the killed process"
                    await agent.ainvoke({"messages": [("user", text)]}, config, context=ctx)
            else:
                memory = LocalScheduler()
                agent = memory.bind(
                    build_graph(services, saver, scheduler=memory, settings=settings)
                )
                for i in range(4):
                    await run_turn(
                        agent, ctx, thread, f"number {i} from the killed process", settings=settings
                    )
            await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
