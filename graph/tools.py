"""Declare the memory tools (behaviour: `memory_graph_agent.providers.tools`) and their node.

Each tool takes ``user_id`` from the injected `ToolRuntime`, never from the model's arguments,
so a model cannot touch another user's memory even with a guessed id. The same tools serve
the ``memory_agent`` graph (the run's `Context`) and `graph.middleware` (its own way of
finding the run's user: ``context_of``), on a `MemoryProvider`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

import memory_graph_agent.providers.tools as do
from graph.context import Context, current_thread_id
from memory_graph_agent.providers.base import MemoryProvider
from memory_graph_agent.providers.tiered import TieredProvider
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


def _latest_human_id(runtime: ToolRuntime[Any]) -> str | None:
    for message in reversed((runtime.state or {}).get("messages", [])):
        if isinstance(message, HumanMessage):
            return message.id
    return None


def _run_context(runtime: ToolRuntime[Any]) -> Context:
    return runtime.context


def memory_tools(
    services: Services | None = None,
    *,
    settings: Settings,
    provider: MemoryProvider | None = None,
    context_of: Callable[[ToolRuntime[Any]], Context] = _run_context,
) -> list[BaseTool]:
    """``search_memory``, ``remember``, ``forget`` (and ``pin``, ``unpin``) for the run's user.

    They act on ``provider`` (default: the tiered memory on ``services``); ``pin`` and
    ``unpin`` only when the provider can pin. ``context_of(runtime)`` gives the run's
    context, whose ``user_id`` is the only user the tools touch (default: the run's
    `Context`); ``settings`` are the deployment's (the search's token budget).
    """
    if provider is None:
        if services is None:
            raise ValueError("memory_tools needs services or a provider")
        provider = TieredProvider(services, settings)
    pinning = getattr(provider, "set_pinned", None)

    @tool(parse_docstring=True)
    async def search_memory(query: str, runtime: ToolRuntime[Any]) -> str:
        """Search the user's long-term memory: past conversations, summaries and reflections.

        Use it when the answer may depend on something the user said in an earlier
        conversation that is not in the profile or the current conversation.

        Args:
            query: What to look for, in a few words (e.g. "favourite programming language").
            runtime: The run (user, thread, state), injected; the model never sees it.
        """
        return await do.search(provider, settings, context_of(runtime), current_thread_id(), query)

    @tool(parse_docstring=True)
    async def remember(key: str, fact: str, importance: float, runtime: ToolRuntime[Any]) -> str:
        """Store a durable fact about the user in their profile, replacing any earlier value.

        Use it when the user tells you something lasting about themselves (name, city,
        preferences, goals) or corrects something you remembered.

        Args:
            key: Short snake_case attribute, e.g. "name", "city", "preferred_language".
            fact: The value, e.g. "Go" (at most 500 characters).
            importance: 0.9-1 identity or core goals, 0.7-0.8 useful context, 0.5-0.6 minor.
            runtime: The run (user, thread, state), injected; the model never sees it.
        """
        sources = [s for s in (runtime.tool_call_id, _latest_human_id(runtime)) if s]
        return await provider.remember(context_of(runtime), key, fact, importance, sources)

    @tool(parse_docstring=True)
    async def forget(key_or_memory_id: str, runtime: ToolRuntime[Any]) -> str:
        """Forget a profile fact (by key) or a stored memory (by the id search_memory showed).

        Use it only when the user asks you to forget something.

        Args:
            key_or_memory_id: A profile key such as "city", or a memory id.
            runtime: The run (user, thread, state), injected; the model never sees it.
        """
        return await provider.forget(context_of(runtime), key_or_memory_id)

    @tool(parse_docstring=True)
    async def pin(key_or_memory_id: str, runtime: ToolRuntime[Any]) -> str:
        """Pin a profile fact or memory so it never expires and is never evicted.

        Use it when the user asks you to always remember something.

        Args:
            key_or_memory_id: A profile key such as "name", or a memory id.
            runtime: The run (user, thread, state), injected; the model never sees it.
        """
        return await pinning(context_of(runtime), key_or_memory_id, True)

    @tool(parse_docstring=True)
    async def unpin(key_or_memory_id: str, runtime: ToolRuntime[Any]) -> str:
        """Unpin a profile fact or memory: it expires again by its importance.

        Args:
            key_or_memory_id: A profile key such as "name", or a memory id.
            runtime: The run (user, thread, state), injected; the model never sees it.
        """
        return await pinning(context_of(runtime), key_or_memory_id, False)

    basic: list[BaseTool] = [search_memory, remember, forget]
    return basic + ([pin, unpin] if pinning is not None else [])


def tools_for(ctx: Context, tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools offered this run: all with ``memory_tools``, else search_memory in tool mode."""
    if ctx.memory_tools:
        return list(tools)
    return [t for t in tools if t.name == "search_memory"] if ctx.recall_mode == "tool" else []


def build_tool_node(tools: Sequence[BaseTool]) -> ToolNode:
    """The graph node ``tools`` that runs the model's memory tool calls."""

    async def only_allowed(
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        """Refuse calls to tools not offered in this run (e.g. a hallucinated ``forget``)."""
        call = request.tool_call
        allowed = {t.name for t in tools_for(request.runtime.context, tools)}
        if call["name"] not in allowed:
            return ToolMessage(
                content=f"error: tool {call['name']!r} is not available; "
                f"use one of {sorted(allowed)}",
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
        return await execute(request)

    return ToolNode(list(tools), name="tools", awrap_tool_call=only_allowed)
