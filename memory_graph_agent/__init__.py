"""memory-graph-agent: long-term memory for LangGraph and LangChain agents.

This front door is the public API, loaded lazily (``import memory_graph_agent`` loads no
LangGraph): `MemoryMiddleware` for ``create_agent``, `add_memory` and `MemoryState` for a
hand-built ``StateGraph``, `memory_prompt` (the fenced memory blocks), `Context` (a
run's choices), `Settings` (the deployment's, with `RecallWeights`), and the `MemoryProvider`
interface with our ``tiered`` and ``flat`` providers.

Its sub-packages are the memory domain, laid out by flow, with no LangGraph wiring
(that is ``graph/`` and ``nodes/``); storage adapters are in `memory_graph_agent.storage`,
the embedded servers and the local model in `memory_graph_agent.local`. `memory_graph_agent.testing`
is the fake chat model for your tests.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Context",
    "MemoryMiddleware",
    "MemoryProvider",
    "MemoryState",
    "MissingUserError",
    "ProfileView",
    "RecallWeights",
    "Settings",
    "TieredProvider",
    "add_memory",
    "memory_prompt",
]


def __getattr__(name: str) -> Any:
    """Load a name of `__all__` on first use."""
    if name == "MemoryMiddleware":
        from graph import middleware as module
    elif name == "MissingUserError":
        from graph import middleware_runs as module
    elif name == "add_memory":
        from graph import builder as module
    elif name == "MemoryState":
        from graph.state import State

        return State
    elif name == "Context":
        from graph import context as module
    elif name == "memory_prompt":
        from graph import prompts as module
    elif name in ("Settings", "RecallWeights"):
        from memory_graph_agent import settings as module
    elif name in ("MemoryProvider", "ProfileView"):
        from memory_graph_agent.providers import base as module
    elif name == "TieredProvider":
        from memory_graph_agent.providers import tiered as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(__all__)
