"""Open the agent for the CLI: services up, Postgres checkpointer, compiled graph."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph.state import CompiledStateGraph

from graph.builder import build_graph
from graph.context import Context
from stores.embedded import ensure_services
from stores.ids import validate_id


@asynccontextmanager
async def open_agent() -> AsyncIterator[CompiledStateGraph]:
    """Yield the memory agent compiled with a Postgres checkpointer."""
    urls = await asyncio.to_thread(ensure_services)
    async with AsyncPostgresSaver.from_conn_string(urls.database_url) as saver:
        await saver.setup()
        yield build_graph(checkpointer=saver)


async def run_turn(
    agent: CompiledStateGraph, context: Context, thread_id: str, text: str, **extra: Any
) -> dict[str, Any]:
    """Send one user message; return the final state of the turn."""
    if not text or not text.strip():
        raise ValueError("message is empty")
    message = HumanMessage(text, **extra)
    config = {"configurable": {"thread_id": validate_id(thread_id, "thread_id")}}
    return await agent.ainvoke({"messages": [message]}, config, context=context)
