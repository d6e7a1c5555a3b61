"""Memory's model cost per turn and per user: a wrapper around the memory nodes.

`metered` runs a node inside `memory_graph_agent.core.metrics.metering`; what its model calls
spent is added to the run's ``memory_cost`` (state) and to the user's running totals in
Redis (`memory_graph_agent.storage.costs`, shown by ``memory show``). Prometheus counts the
same calls by purpose, without user labels.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from memory_graph_agent.core import metrics
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.outages import StoreUnavailable

log = logging.getLogger(__name__)


def metered(node: Callable, services: Services) -> Callable:
    """Wrap an async node ``node(state, runtime)``: meter its memory model calls."""

    @functools.wraps(node)
    async def wrapper(state: Any, runtime: Any) -> Any:
        with metrics.metering() as spent:
            update = await node(state, runtime)
        if not spent:
            return update
        try:
            await services.costs.add(runtime.context.user_id, spent)
        except StoreUnavailable:  # the totals miss this node; the turn's own figure stays
            log.warning("memory cost of user %s not recorded (Redis down)", runtime.context.user_id)
        return {**(update or {}), "memory_cost": spent}

    return wrapper
