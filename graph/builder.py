"""Wire the memory nodes and tools into a `StateGraph`; bind services and settings to them.

Every node and routing function gets the deployment's `Settings` here, once, as it gets the
services (``functools.partial``); a run carries only its `Context`. ``make_graph`` is the
``langgraph.json`` factory (no checkpointer: the server injects one; the settings are
`Settings.from_env`, read once); the CLI, notebooks, benchmarks and tests call
`build_graph` with their own checkpointer and settings.
"""

from __future__ import annotations

import weakref
from functools import partial
from typing import Any, get_type_hints

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph import routing
from graph.background import ServerScheduler
from graph.context import Context, MemoryScheduler
from graph.durability import turn_durability
from graph.prefetch import as_memory_graph
from graph.state import InputState, State
from graph.tools import build_tool_node, memory_tools
from graph.wrapping import wrap_node
from memory_graph_agent.services.stores import Services, server_services
from memory_graph_agent.settings import Settings
from nodes.backlog import backlog
from nodes.consolidate import consolidate
from nodes.load_profile import load_profile
from nodes.recall import recall
from nodes.reflect import reflect
from nodes.respond import respond
from nodes.summarize import summarize
from nodes.trim_window import trim_window

GRAPH_NAME = "memory_agent"
MEMORY_NODES = (load_profile, recall, summarize, consolidate, reflect)
MODEL_CALLING = (summarize, consolidate, reflect)
"""The memory nodes that call the chat model: only they are metered (`graph.wrapping`)."""


def build_builder(
    services: Services,
    settings: Settings,
    scheduler: MemoryScheduler | None = None,
) -> StateGraph:
    """The uncompiled graph: load_profile ∥ recall → respond ⇄ tools → trim_window → memory.

    With a ``scheduler``, turns in ``memory_mode="background"`` end after trim_window and
    the scheduler starts a memory run (START → backlog → summarize → consolidate → reflect).
    """
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    tools = memory_tools(services, settings=settings)
    add_memory(
        builder,
        services,
        settings=settings,
        answer="respond",
        ends_turn=None,
        scheduler=scheduler,
    )
    respond_node = partial(respond, settings=settings, tools=tools)
    builder.add_node("respond", wrap_node(respond_node, "respond", services))
    builder.add_node("tools", build_tool_node(tools))
    builder.add_conditional_edges("respond", routing.route_after_respond)
    builder.add_edge("tools", "respond")
    return builder


def add_memory(
    builder: StateGraph,
    services: Services,
    *,
    settings: Settings,
    answer: str,
    ends_turn: str | None = "",
    scheduler: MemoryScheduler | None = None,
) -> StateGraph:
    """Add our memory to a hand-built ``builder``: the nodes of the ``memory_agent`` graph.

    A turn runs ``START → load_profile ∥ recall → answer → … → ends_turn → trim_window``,
    then (inline, or in a memory run of the same graph, from ``backlog``, when a
    ``scheduler`` takes it) ``summarize → consolidate → reflect``. Your ``answer`` node
    builds its system prompt with `graph.prompts.memory_prompt` (the fenced profile,
    memories and running summary); ``ends_turn`` (default: ``answer``) is the node whose
    turn is over, an edge from it to ``trim_window`` is added (``None``: you route to
    ``trim_window`` yourself).

    The builder's state must have the keys of `graph.state.State` (subclass it and add
    your own): ``messages``, ``end_session``, ``compress``, ``profile``,
    ``profile_changes``, ``recalled``, ``thread_summary``, ``pending_count``,
    ``memory_scheduled``, ``summary``, ``summary_stored``, ``summaries_since_reflection``,
    ``importance_since_reflection``, ``memory_events``, ``memory_decisions``,
    ``memory_cost``. Its context schema must be `graph.context.Context` (or a subclass):
    the nodes read the run's ``user_id``, ``model`` and ``recall_mode`` from it, and the
    deployment's ``settings`` (`Settings.from_env()`, or built in code) from here.
    Returns ``builder``.
    """
    missing = sorted(_keys(State) - _keys(builder.state_schema))
    if missing:
        raise TypeError(f"add_memory: the state lacks {missing}; subclass graph.state.State")
    schema = builder.context_schema
    if not (isinstance(schema, type) and issubclass(schema, Context)):
        raise TypeError("add_memory: build the graph with context_schema=Context (or a subclass)")
    for node in MEMORY_NODES:
        bound = partial(node, services=services, settings=settings)
        if node is summarize:  # a memory run that finds its batch leased asks for a later one
            bound = partial(bound, scheduler=scheduler)
        calls_model = node in MODEL_CALLING
        name = node.__name__
        builder.add_node(name, wrap_node(bound, name, services, calls_model=calls_model))
    trim = partial(trim_window, services=services, settings=settings, scheduler=scheduler)
    builder.add_node("trim_window", wrap_node(trim, "trim_window", services))
    start = partial(backlog, services=services)
    builder.add_node("backlog", wrap_node(start, "backlog", services))
    # a turn: load_profile and recall side by side, then the answer once; a memory run: backlog
    builder.add_conditional_edges(START, routing.route_start, routing.STARTS)
    paths = {"respond": answer, "trim_window": "trim_window"}
    builder.add_conditional_edges("load_profile", routing.route_turn, paths)
    builder.add_edge("recall", answer)
    if ends_turn is not None:
        builder.add_edge(ends_turn or answer, "trim_window")
    bound = partial(routing.bound, settings=settings)
    builder.add_conditional_edges("trim_window", bound(routing.route_after_trim))
    builder.add_conditional_edges("backlog", bound(routing.route_after_trim))
    builder.add_conditional_edges("summarize", routing.route_after_summarize)
    builder.add_conditional_edges("consolidate", bound(routing.route_after_consolidate))
    builder.add_conditional_edges("reflect", bound(routing.route_after_reflect))
    return builder


def _keys(schema: Any) -> set[str]:
    """The keys of a state schema: a TypedDict's own and inherited, else its type hints."""
    if hasattr(schema, "__optional_keys__"):
        return set(schema.__required_keys__) | set(schema.__optional_keys__)
    return set(get_type_hints(schema))


def build_graph(
    services: Services,
    checkpointer: BaseCheckpointSaver | None = None,
    scheduler: MemoryScheduler | None = None,
    *,
    settings: Settings | None = None,
) -> CompiledStateGraph:
    """Compile the memory agent on ``services``, optionally with a checkpointer.

    ``settings``: the deployment's (default: `Settings.from_env`, read now).

    Without a ``scheduler`` memory forms inline, in each turn's run. Each turn's run
    starts its query embedding before LangGraph loads the checkpoint (`graph.prefetch`).
    """
    settings = Settings.from_env() if settings is None else settings
    builder = build_builder(services, settings, scheduler)
    graph = builder.compile(checkpointer=checkpointer, name=GRAPH_NAME)
    return as_memory_graph(graph, services.embeddings, turn_durability(settings, scheduler))


_compiled: weakref.WeakKeyDictionary[Services, CompiledStateGraph] = weakref.WeakKeyDictionary()


async def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory of ``langgraph.json``, called per run: compiled once per set of services."""
    services = await server_services()
    if services not in _compiled:
        scheduler = ServerScheduler(GRAPH_NAME)
        _compiled[services] = build_graph(
            services, scheduler=scheduler, settings=Settings.from_env()
        )
    return _compiled[services]
