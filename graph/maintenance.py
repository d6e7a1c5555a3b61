"""The ``maintenance`` graph: decay and compaction of long-term memory.

select_users → expire → evict → compact → report. Run it from the CLI
(``memory-agent maintain``) or on the LangGraph server as a cron (see README). ``graph``
is compiled without a checkpointer: a maintenance run keeps no conversation state.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.context import Context
from graph.maintenance_state import MaintenanceInput, MaintenanceState
from nodes.compact import compact
from nodes.evict import evict
from nodes.expire import expire
from nodes.report import report
from nodes.select_users import select_users

GRAPH_NAME = "maintenance"


def build_maintenance_builder() -> StateGraph:
    """The uncompiled maintenance graph (a straight line of nodes)."""
    builder = StateGraph(MaintenanceState, input_schema=MaintenanceInput, context_schema=Context)
    nodes = (select_users, expire, evict, compact, report)
    for node in nodes:
        builder.add_node(node)
    builder.add_edge(START, nodes[0].__name__)
    for a, b in zip(nodes, nodes[1:], strict=False):
        builder.add_edge(a.__name__, b.__name__)
    builder.add_edge(nodes[-1].__name__, END)
    return builder


def build_maintenance_graph() -> CompiledStateGraph:
    """Compile the maintenance graph (no checkpointer, by design)."""
    return build_maintenance_builder().compile(name=GRAPH_NAME)


graph = build_maintenance_graph()
