"""The ``maintenance`` graph: idle threads, decay and compaction, checkpoint and decision retention.

Run from ``memory-agent maintain`` or as a server cron (see
docs/deployment-and-operations.md); it keeps no conversation state, so it is compiled
without a checkpointer. The conversations' checkpoints it prunes are reached through a
`CheckpointRetention`: the CLI's Postgres checkpointer, or the server's own threads API.
"""

from __future__ import annotations

import weakref
from functools import partial

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph.context import Context
from graph.maintenance_state import MaintenanceInput, MaintenanceState
from memory_graph_agent.maintenance import CheckpointRetention
from memory_graph_agent.services.stores import Services, server_services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.server_threads import ServerCheckpoints
from nodes.archive_idle import archive_idle
from nodes.compact import compact
from nodes.evict import evict
from nodes.expire import expire
from nodes.prune_checkpoints import prune_checkpoints
from nodes.prune_decisions import prune_decisions
from nodes.report import report
from nodes.select_users import select_users

GRAPH_NAME = "maintenance"


def build_maintenance_builder(
    services: Services, settings: Settings, checkpoints: CheckpointRetention | None = None
) -> StateGraph:
    """The uncompiled maintenance graph.

    select_users → archive_idle → expire → evict → compact → prune_checkpoints →
    prune_decisions → report.
    Without ``checkpoints``, prune_checkpoints says so and prunes nothing.
    """
    builder = StateGraph(MaintenanceState, input_schema=MaintenanceInput, context_schema=Context)
    both = {"services": services, "settings": settings}
    steps = [
        ("select_users", partial(select_users, services=services)),
        ("archive_idle", partial(archive_idle, **both)),
        ("expire", partial(expire, services=services)),
        ("evict", partial(evict, **both)),
        ("compact", partial(compact, **both)),
        ("prune_checkpoints", partial(prune_checkpoints, **both, checkpoints=checkpoints)),
        ("prune_decisions", partial(prune_decisions, **both)),
    ]
    builder.add_sequence([*steps, report])
    builder.add_edge(START, "select_users")
    builder.add_edge("report", END)
    return builder


def build_maintenance_graph(
    services: Services,
    checkpoints: CheckpointRetention | None = None,
    *,
    settings: Settings | None = None,
) -> CompiledStateGraph:
    """Compile the maintenance graph (no checkpointer of its own, by design).

    ``settings``: the deployment's (default: `Settings.from_env`, read now).
    """
    settings = Settings.from_env() if settings is None else settings
    return build_maintenance_builder(services, settings, checkpoints).compile(name=GRAPH_NAME)


_compiled: weakref.WeakKeyDictionary[Services, CompiledStateGraph] = weakref.WeakKeyDictionary()


async def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory of ``langgraph.json``, called per run: compiled once per set of services."""
    services = await server_services()
    if services not in _compiled:
        _compiled[services] = build_maintenance_graph(
            services, ServerCheckpoints(), settings=Settings.from_env()
        )
    return _compiled[services]
