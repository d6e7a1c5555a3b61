"""The ``maintenance`` graph: decay and compaction of long-term memory.

Run from ``memory-agent maintain`` or as a server cron (see
docs/deployment-and-operations.md); it keeps no conversation state, so it is compiled
without a checkpointer.
"""

from __future__ import annotations

import weakref
from functools import partial

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.context import Context
from graph.maintenance_state import MaintenanceInput, MaintenanceState
from memory_graph_agent.services.stores import Services, server_services
from nodes.compact import compact
from nodes.evict import evict
from nodes.expire import expire
from nodes.report import report
from nodes.select_users import select_users

GRAPH_NAME = "maintenance"


def build_maintenance_builder(services: Services) -> StateGraph:
    """The uncompiled maintenance graph: select_users → expire → evict → compact → report."""
    builder = StateGraph(MaintenanceState, input_schema=MaintenanceInput, context_schema=Context)
    steps = [
        (n.__name__, partial(n, services=services)) for n in (select_users, expire, evict, compact)
    ]
    builder.add_sequence([*steps, report])
    builder.add_edge(START, "select_users")
    builder.add_edge("report", END)
    return builder


def build_maintenance_graph(services: Services) -> CompiledStateGraph:
    """Compile the maintenance graph (no checkpointer, by design)."""
    return build_maintenance_builder(services).compile(name=GRAPH_NAME)


_compiled: weakref.WeakKeyDictionary[Services, CompiledStateGraph] = weakref.WeakKeyDictionary()


async def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory of ``langgraph.json``, called per run: compiled once per set of services."""
    services = await server_services()
    if services not in _compiled:
        _compiled[services] = build_maintenance_graph(services)
    return _compiled[services]
