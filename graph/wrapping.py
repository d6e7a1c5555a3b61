"""The one wrapper every node of the memory graph runs in (`wrap_node`).

Around a node function ``node(state, runtime)`` bound to its services, in this order:

1. **The crash-loop check** (`memory_graph_agent.turn.retries`): a server run's step that
   ended its process twice is refused a third start.
2. **Metering** (nodes that call the chat model): what their model calls spent
   (`memory_graph_agent.core.metrics.metering`) is added to the run's ``memory_cost``
   (state) and to the user's running totals in Redis (`memory_graph_agent.storage.costs`,
   shown by ``memory show``). Prometheus counts the same calls by purpose, without user
   labels.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from langgraph.runtime import Runtime

from graph.context import Context, current_task
from graph.state import State
from memory_graph_agent.core import metrics
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.turn.retries import check_task_start

log = logging.getLogger(__name__)

Node = Callable[[State, Runtime[Context]], Awaitable[dict]]


def wrap_node(
    node: Node,
    name: str,
    services: Services,
    *,
    calls_model: bool = False,
) -> Node:
    """``node`` (named ``name``) as the graph runs it: crash-loop check, then metering.

    Args:
        node: The node function, its services already bound (``partial``).
        name: The node's name in the graph.
        services: Where starts are counted (``runs``) and costs totalled (``costs``).
        calls_model: Meter its chat-model calls (summarize, consolidate, reflect).
    """

    async def run(state: State, runtime: Runtime[Context]) -> dict:
        if (task := current_task()) is not None:  # a server run: count this start
            await check_task_start(services, *task)
        if not calls_model:
            return await node(state, runtime)
        with metrics.metering() as spent:
            update = await node(state, runtime)
        if not spent:
            return update
        user = runtime.context.user_id
        try:
            await services.costs.add(user, spent)
        except StoreUnavailable:  # the totals miss this node; the turn's own figure stays
            log.warning("memory cost of user %s not recorded (Redis down)", user)
        return {**(update or {}), "memory_cost": spent}

    run.__name__ = run.__qualname__ = name
    return run
