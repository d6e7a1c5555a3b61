"""The soak's worker process, killed by `bench.soak` while one of its memory runs works.

``python -m bench.soak_worker SPEC.json``: runs the turns the spec lists (per
conversation, in order; conversations concurrently) through the graph with in-process
background memory, like a CLI or a server worker would. Every memory model call prints
``MEMORY-RUNNING`` and never returns, so the first memory run of a thread holds its
claimed, leased batch until the process is killed. Prints ``START``/``OK``/``FAIL``
``<user> <turn> <unix time>`` per turn and ``DONE`` at the end, then waits to be killed.
Servers come from ``REDIS_URL``/``DATABASE_URL``/``MEMORY_KEY_PREFIX``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from bench.env import EMBEDDING
from bench.fake_model import register_faulty_model
from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings


def _say(kind: str, user: str, turn: int) -> None:
    print(f"{kind} {user} {turn} {time.time():.3f}", flush=True)


async def _conversation(agent: Any, ctx: Context, conv: dict[str, Any]) -> None:
    for i, text in enumerate(conv["texts"]):
        turn = conv["first_turn"] + i
        _say("START", ctx.user_id, turn)
        try:
            await agent.ainvoke(
                {"messages": [HumanMessage(text)]},
                {"configurable": {"thread_id": conv["thread"]}},
                context=ctx,
            )
        except Exception:  # noqa: BLE001 - the parent counts it from the line
            _say("FAIL", ctx.user_id, turn)
        else:
            _say("OK", ctx.user_id, turn)


async def main(spec_path: str) -> None:
    """Run the spec's turns, then wait to be killed."""
    spec = json.loads(Path(spec_path).read_text())
    model, _ = register_faulty_model(hang_memory=True, **spec["model"])
    async with services_session(EMBEDDING) as services:
        async with open_checkpointer(services.database_url) as saver:
            memory = LocalScheduler()
            settings = Settings.from_env().override(**spec["context"])
            graph = build_graph(services, saver, scheduler=memory, settings=settings)
            agent = memory.bind(graph)
            await asyncio.gather(
                *(
                    _conversation(agent, Context(user_id=c["user"], model=model), c)
                    for c in spec["convs"]
                )
            )
            print("DONE", flush=True)
            await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
