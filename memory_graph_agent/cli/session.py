"""Open the agent for the CLI: services up, Postgres checkpointer, compiled graph.

Thread ids created by the CLI (``t-<random>``, ``demo-...``) belong to one user: the
checkpointer keys threads by ``thread_id`` only, so never reuse a thread id for another
user (``forget`` deletes the checkpoints of every thread of the forgotten user).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.graph.state import CompiledStateGraph

from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.services import Services, open_checkpointer, services_session
from memory_graph_agent.validation import (
    InvalidInputError,
    check_id,
    discard_rejected,
    limits_of,
    validate_user_text,
)

RECURSION_LIMIT = 500
"""Graph steps a CLI run may take: draining a long backlog is two steps per batch."""


@asynccontextmanager
async def open_agent() -> AsyncIterator[tuple[CompiledStateGraph, Services]]:
    """Open the services; yield the memory agent (Postgres checkpointer) and them."""
    async with services_session() as services:
        async with open_checkpointer(services.database_url) as saver:
            yield build_graph(services, checkpointer=saver), services


def check_turn(context: Context, thread_id: str, text: object) -> str:
    """Validate a CLI turn before it reaches the graph; returns the text.

    Raises `InvalidInputError` (a `ValueError`) for a bad thread id or message, so a
    rejected line never enters the thread's checkpoint.
    """
    check_id(thread_id, "thread_id")
    return validate_user_text(text, max_chars=limits_of(context)[0])


async def run_turn(
    agent: CompiledStateGraph, context: Context, thread_id: str, text: str, **extra: Any
) -> dict[str, Any]:
    """Send one user message; return the final state of the turn.

    A turn the graph rejects (`InvalidInputError`) is removed from the thread's
    checkpoint before the error is re-raised, so the next turn starts clean.
    """
    text = check_turn(context, thread_id, text)
    message = HumanMessage(text, **extra)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": RECURSION_LIMIT}
    try:
        return await agent.ainvoke({"messages": [message]}, config, context=context)
    except InvalidInputError as exc:
        if agent.checkpointer is not None:
            await discard_rejected(agent, config, exc)
        raise


async def end_session(
    agent: CompiledStateGraph, context: Context, thread_id: str
) -> dict[str, Any]:
    """Archive the whole thread into long-term memory; return the final state.

    Runs the graph with ``{"end_session": true}``: no answer; the window and the pending
    backlog are summarized and stored (reflecting if due). The thread's window and
    pending list are then empty (``pending_count == 0``), unless a service was down:
    then the messages wait, durably, and the returned ``memory_events`` say so.
    """
    check_id(thread_id, "thread_id")
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": RECURSION_LIMIT}
    try:
        return await agent.ainvoke({"end_session": True}, config, context=context)
    except InvalidInputError as exc:
        if agent.checkpointer is not None:
            await discard_rejected(agent, config, exc)
        raise


def archived(state: dict[str, Any]) -> bool:
    """Whether an `end_session` run left nothing in the thread's window or backlog."""
    return not state.get("messages") and not state.get("pending_count")


async def check_thread_owner(services: Services, context: Context, thread_id: str) -> None:
    """Refuse a thread id that another user already has memory in.

    The checkpointer keys threads by id only, so a shared id would show one user's
    conversation to the other and copy it into their memory.
    """
    from memory_graph_agent.storage.forget import thread_users

    check_id(thread_id, "thread_id")
    others = await thread_users(services.redis, services.keys.prefix, thread_id)
    others -= {context.user_id}
    if others:
        raise InvalidInputError(
            f"thread_id {thread_id!r} belongs to another user; thread ids are not "
            "namespaced by user, so pick a new thread (omit --thread)"
        )


async def forget(user_id: str) -> dict[str, Any]:
    """Delete everything stored about ``user_id`` (`storage.forget.forget_user`)."""
    from memory_graph_agent.storage.forget import forget_user

    check_id(user_id, "user_id")
    async with services_session() as services:
        return await forget_user(
            user_id, redis=services.redis, db=services.db, prefix=services.keys.prefix
        )
