"""Open the agent for the CLI (services, Postgres checkpointer, compiled graph) and run it.

The checkpointer keys threads by ``thread_id`` only, so a CLI thread id belongs to one user.
Replies stream token by token (``stream_mode="messages"``, the ``respond`` node only);
memory forms after the reply, in this process (`graph.background.LocalScheduler`). A turn
checkpoints once, when it ends (durability ``"exit"``, which the graph picks:
`graph.durability`); a session end after every step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import AIMessageChunk, HumanMessage
from langgraph.graph.state import CompiledStateGraph

from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.services.stores import Services, open_checkpointer, services_session
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import POSTGRES_ERRORS, StoreUnavailable
from memory_graph_agent.turn.validation import (
    InvalidInputError,
    check_id,
    discard_rejected,
    validate_user_text,
)

RECURSION_LIMIT = 500
"""Graph steps a CLI run may take: draining a long backlog is two steps per batch."""
REPLY_NODE = "respond"

OnToken = Callable[[str], None]


@asynccontextmanager
async def open_agent(
    settings: Settings,
) -> AsyncIterator[tuple[CompiledStateGraph, Services, LocalScheduler]]:
    """Open the services; yield the agent (Postgres checkpointer), them, its memory scheduler.

    ``settings``: the deployment's (the CLI reads `Settings.from_env` once).

    On exit, memory work still running is finished first. The checkpointer lives in the
    memory's Postgres: while it is down a turn cannot run at all. That, and a failed open,
    raise `StoreUnavailable` (the CLI says so, keeps the message).
    """
    try:
        async with services_session() as services:
            async with open_checkpointer(services.database_url) as saver:
                memory = LocalScheduler()
                graph = build_graph(services, saver, memory, settings=settings)
                agent = memory.bind(graph)
                try:
                    yield agent, services, memory
                finally:
                    await memory.drain()
    except POSTGRES_ERRORS as exc:
        raise StoreUnavailable("postgres", exc) from exc


def check_turn(settings: Settings, thread_id: str, text: object) -> str:
    """Validate a turn before it reaches the graph (`InvalidInputError`); return the text."""
    check_id(thread_id, "thread_id")
    return validate_user_text(text, max_chars=settings.limits.max_message_chars)


async def _stream(
    agent: CompiledStateGraph,
    context: Context,
    config: dict[str, Any],
    graph_input: dict[str, Any],
    on_token: OnToken,
) -> dict[str, Any]:
    """Run the graph, passing the reply's tokens to ``on_token``; return the final state.

    Only ``respond``'s model tokens are passed: memory's own calls are tagged ``nostream``
    (never streamed) and run in other nodes.
    """
    state: dict[str, Any] = {}
    modes = ["messages", "values"]
    async for mode, payload in agent.astream(
        graph_input, config, context=context, stream_mode=modes
    ):
        if mode == "values":
            state = payload
            continue
        chunk, metadata = payload
        if metadata.get("langgraph_node") == REPLY_NODE and isinstance(chunk, AIMessageChunk):
            if text := chunk.text:
                on_token(text)
    return state


async def _invoke(
    agent: CompiledStateGraph,
    context: Context,
    thread_id: str,
    graph_input: dict[str, Any],
    on_token: OnToken | None = None,
) -> dict[str, Any]:
    """Run the graph; a rejected input is removed from the checkpoint, so the next run is clean."""
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": RECURSION_LIMIT}
    try:
        if on_token is not None:
            return await _stream(agent, context, config, graph_input, on_token)
        return await agent.ainvoke(graph_input, config, context=context)
    except InvalidInputError as exc:
        if agent.checkpointer is not None:
            await discard_rejected(agent, config, exc)
        raise
    except POSTGRES_ERRORS as exc:  # the checkpointer: the turn did not run
        raise StoreUnavailable("postgres", exc) from exc


async def run_turn(
    agent: CompiledStateGraph,
    context: Context,
    thread_id: str,
    text: str,
    on_token: OnToken | None = None,
    *,
    settings: Settings | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Send one user message; return the final state of the turn.

    With ``on_token``, the reply is streamed to it as the model produces it. A turn whose
    memory forms in the background checkpoints once, when it ends (the graph picks that:
    `graph.durability`). ``settings``: the ones ``agent`` was built with (default:
    `Settings`' defaults).
    """
    settings = Settings() if settings is None else settings
    message = HumanMessage(check_turn(settings, thread_id, text), **extra)
    return await _invoke(agent, context, thread_id, {"messages": [message]}, on_token)


async def end_session(
    agent: CompiledStateGraph,
    context: Context,
    thread_id: str,
    memory: LocalScheduler | None = None,
) -> dict[str, Any]:
    """Archive the whole thread into long-term memory; return the final state.

    The thread's background memory runs (of ``memory``) finish first. The window and
    backlog are left empty unless a service was down: then the messages wait, durably,
    and the returned ``memory_events`` say so.
    """
    check_id(thread_id, "thread_id")
    if memory is not None:
        await memory.wait(context.user_id, thread_id)
    return await _invoke(agent, context, thread_id, {"end_session": True})


def archived(state: dict[str, Any]) -> bool:
    """Whether an `end_session` run left nothing in the thread's window or backlog."""
    return not state.get("messages") and not state.get("pending_count")


async def check_thread_owner(services: Services, context: Context, thread_id: str) -> None:
    """Refuse a thread id another user owns or has memory in: they would see each other's thread.

    Checked before the run: a run the graph rejects has already put the line into the
    thread's checkpoint.
    """
    from memory_graph_agent.storage.forget import thread_users

    check_id(thread_id, "thread_id")
    owner = await services.threads.owner(thread_id)
    others = await thread_users(services.redis, services.keys.prefix, thread_id)
    if {owner, *others} - {context.user_id, None}:
        raise InvalidInputError(
            f"thread_id {thread_id!r} belongs to another user; thread ids are not "
            "namespaced by user, so pick a new thread (omit --thread)"
        )
