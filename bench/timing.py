"""Where a benchmark turn spends its time: per node and per timed call.

`NODE_TIMER` (bound to a compiled graph by `timed`) times each node, `instrument` times the
query embedding and the searches of the live `Services`; both report into the `TurnRecord`
of the running turn (`CURRENT_TURN`, a context variable: concurrent turns never mix).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage

from memory_graph_agent.recall import retrieval


@dataclass
class TurnRecord:
    """What one turn spent where (seconds); a node that runs twice is summed."""

    nodes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    parts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    starts: dict[str, float] = field(default_factory=dict)
    """``perf_counter`` at each node's first start."""
    sent: float = 0.0

    def total(self, part: str) -> float:
        """Sum of one part's calls."""
        return sum(self.parts.get(part, ()))


CURRENT_TURN: contextvars.ContextVar[TurnRecord | None] = contextvars.ContextVar(
    "bench_turn", default=None
)


def record_part(part: str, seconds: float) -> None:
    """Add one timed call to the running turn's record (no-op outside a turn)."""
    if (rec := CURRENT_TURN.get()) is not None:
        rec.parts[part].append(seconds)


def timer(func: Callable, part: str) -> Callable:
    """``func`` (a coroutine function) with each call's seconds recorded as ``part``."""

    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await func(*args, **kwargs)
        finally:
            record_part(part, time.perf_counter() - start)

    return wrapper


@contextlib.contextmanager
def recording() -> Iterator[TurnRecord]:
    """A fresh `TurnRecord` that the timed calls inside report into (`CURRENT_TURN`)."""
    rec = TurnRecord()
    token = CURRENT_TURN.set(rec)
    try:
        yield rec
    finally:
        CURRENT_TURN.reset(token)


async def timed_turn(
    graph: Any, ctx: Any, thread: str, text: str, **options: Any
) -> tuple[TurnRecord, float, Any]:
    """One turn of ``text`` under a fresh `TurnRecord`: it, the turn's seconds, the state."""
    with recording() as rec:
        rec.sent = time.perf_counter()
        config = {"configurable": {"thread_id": thread}}
        state = await graph.ainvoke(
            {"messages": [HumanMessage(text)]}, config, context=ctx, **options
        )
        return rec, time.perf_counter() - rec.sent, state


class NodeTimer(BaseCallbackHandler):
    """Times every node run of a graph into the `TurnRecord` its run started under."""

    run_inline = True  # called in the node's own context, no thread hop

    def __init__(self) -> None:
        self._running: dict[UUID, tuple[TurnRecord | None, str, float]] = {}

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kw: Any) -> None:
        """A node's run (named by the metadata's ``langgraph_node``) starts its clock."""
        node = (kw.get("metadata") or {}).get("langgraph_node")
        if node is None or kw.get("name") != node:
            return
        rec, now = CURRENT_TURN.get(), time.perf_counter()
        if rec is not None:
            rec.starts.setdefault(node, now)
        self._running[run_id] = (rec, node, now)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        """Add the node's time to its record."""
        if (run := self._running.pop(run_id, None)) is not None:
            rec, node, start = run
            if rec is not None:
                rec.nodes[node] += time.perf_counter() - start

    on_chain_error = on_chain_end


NODE_TIMER = NodeTimer()


def timed(graph: Any) -> Any:
    """``graph`` (compiled) with its nodes timed by `NODE_TIMER`."""
    return graph.with_config(callbacks=[NODE_TIMER])


def _waits_timed(search: Callable) -> Callable:
    """``search_channels`` whose wait for the query vector is recorded as ``embed_wait``."""

    async def waited(vector: Any) -> Any:
        return await vector

    @functools.wraps(search)
    async def wrapper(services, query, vector, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if inspect.isawaitable(vector):
            vector = timer(waited, "embed_wait")(vector)
        else:
            record_part("embed_wait", 0.0)
        return await search(services, query, vector, *args, **kwargs)

    return wrapper


@contextlib.contextmanager
def instrument(services: Any) -> Iterator[None]:
    """Time ``services``' query embedding (``embed_query``), searches and touches.

    Recall's searches (`retrieval.search_channels`, one round trip for every channel) are
    ``search``, like `MemoryStore.search`; what they waited for the query vector is
    ``embed_wait``. Instance-level patches, restored on exit.
    """
    patched = []
    for obj, method in ((services.embeddings, "aembed_query"), (services.memories, "search"),
                        (services.memories, "touch")):  # fmt: skip
        if method not in vars(obj):  # already instrumented (nested use): keep the outer one
            part = "embed_query" if method == "aembed_query" else method
            # object.__setattr__: the embeddings are a pydantic model that refuses new fields
            object.__setattr__(obj, method, timer(getattr(obj, method), part))
            patched.append((obj, method))
    searches = retrieval.search_channels
    retrieval.search_channels = timer(_waits_timed(searches), "search")
    try:
        yield
    finally:
        retrieval.search_channels = searches
        for obj, method in patched:
            with contextlib.suppress(AttributeError):
                object.__delattr__(obj, method)


def _respond_only(settings: Any = None) -> Any:
    """Memory bypassed: the project's `respond` node alone (no memory tools)."""
    from langgraph.graph import END, START, StateGraph

    from graph.context import Context
    from graph.state import InputState, State
    from memory_graph_agent.settings import Settings
    from nodes.respond import respond

    settings = Settings.from_env() if settings is None else settings
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    builder.add_node("respond", functools.partial(respond, settings=settings))
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder


def respond_only(config: Any = None) -> Any:
    """The baseline as a server's graph (``bench.throughput``'s ``langgraph.json``)."""
    return _respond_only().compile(name="respond_only")


def build_baseline_graph(checkpointer: Any = None, settings: Any = None) -> Any:
    """The baseline in process, with ``checkpointer``."""
    return _respond_only(settings).compile(checkpointer=checkpointer, name="respond_only")
