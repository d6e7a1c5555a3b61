"""The ``maintenance`` graph: decay and compaction of long-term memory.

select_users → expire → evict → compact → report. Run it from the CLI
(``memory-agent maintain``) or on the LangGraph server as a cron (see README). It keeps
no conversation state, so it is compiled without a checkpointer; ``make_graph`` is the
server's factory (on the server's services).
"""

from __future__ import annotations

import weakref
from functools import partial

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.context import Context
from graph.maintenance_state import MaintenanceInput, MaintenanceState
from memory_graph_agent.services import Services, server_services
from nodes.compact import compact
from nodes.evict import evict
from nodes.expire import expire
from nodes.report import report
from nodes.select_users import select_users

GRAPH_NAME = "maintenance"


def build_maintenance_builder(services: Services) -> StateGraph:
    """The uncompiled maintenance graph (a straight line of nodes)."""
    builder = StateGraph(MaintenanceState, input_schema=MaintenanceInput, context_schema=Context)
    names = []
    for node in (select_users, expire, evict, compact):
        builder.add_node(node.__name__, partial(node, services=services))
        names.append(node.__name__)
    builder.add_node(report)
    names.append("report")
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:], strict=False):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder


def build_maintenance_graph(services: Services) -> CompiledStateGraph:
    """Compile the maintenance graph (no checkpointer, by design)."""
    return build_maintenance_builder(services).compile(name=GRAPH_NAME)


_compiled: weakref.WeakKeyDictionary[Services, CompiledStateGraph] = weakref.WeakKeyDictionary()


async def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory of ``langgraph.json``: maintenance on the server's services (compiled once)."""
    services = await server_services()
    if services not in _compiled:
        _compiled[services] = build_maintenance_graph(services)
    return _compiled[services]
