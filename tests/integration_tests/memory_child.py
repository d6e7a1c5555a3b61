"""A CLI-like process killed by `test_reply_first` while a background memory run works.

``python -m tests.integration_tests.memory_child USER THREAD``: runs turns through the
agent with in-process background memory (`graph.background.LocalScheduler`) until a
memory run is inside a model call (its batch claimed and leased), prints
``MEMORY-RUNNING`` and waits to be killed. Servers come from ``REDIS_URL``/``DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.cli.session import run_turn
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.testing import ScriptedChatModel, purpose_of
from tests.conftest import EMBEDDING

LEASE_SECONDS = 1.0


class StuckChatModel(ScriptedChatModel):
    """Answers the user; every memory call announces itself and never returns."""

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        if purpose_of(run_manager.tags if run_manager else None) != "reply":
            print("MEMORY-RUNNING", flush=True)
            await asyncio.sleep(3600)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


async def main(user: str, thread: str) -> None:
    model = register_chat_model(f"stuck-{uuid.uuid4().hex[:8]}", StuckChatModel())
    ctx = Context(
        user_id=user, model=model, window_size=2, summary_batch=2, lease_seconds=LEASE_SECONDS
    )
    async with services_session(EMBEDDING) as services:
        async with open_checkpointer(services.database_url) as saver:
            memory = LocalScheduler()
            agent = memory.bind(build_graph(services, saver, scheduler=memory))
            for i in range(4):
                await run_turn(agent, ctx, thread, f"number {i} from the killed process")
            await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
