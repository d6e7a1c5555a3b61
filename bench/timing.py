"""Where a benchmark turn spends its time: per node and per timed call.

`NODE_TIMER` (a callback handler; `timed` binds it to a compiled graph) times each node by
the ``langgraph_node`` of its run's metadata, `instrument` wraps the embedding and pgvector
calls of the live `Services`, and `record_part` takes any other timing (the fake model's);
all report into the `TurnRecord` of the running turn (`CURRENT_TURN`, a context variable,
so concurrent turns never mix their numbers).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage

from memory_graph_agent.recall import retrieval


@dataclass
class TurnRecord:
    """What one turn spent where (seconds). Nodes that run twice in a turn are summed."""

    nodes: dict[str, float] = field(default_factory=dict)
    parts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    starts: dict[str, float] = field(default_factory=dict)
    """``perf_counter`` at each node's first start (``respond``: the model call's)."""
    sent: float = 0.0
    """``perf_counter`` when `timed_turn` sent the turn."""

    def add_node(self, name: str, seconds: float) -> None:
        """Add the duration of one node execution."""
        self.nodes[name] = self.nodes.get(name, 0.0) + seconds

    def add(self, part: str, seconds: float) -> None:
        """Add one timed call (``embed_query``, ``search``, ``model:respond``...)."""
        self.parts[part].append(seconds)

    def total(self, part: str) -> float:
        """Sum of one part's calls."""
        return sum(self.parts.get(part, ()))

    def total_prefix(self, prefix: str, exclude: Sequence[str] = ()) -> float:
        """Sum of every part whose name starts with ``prefix`` (minus ``exclude``)."""
        return sum(
            sum(v) for k, v in self.parts.items() if k.startswith(prefix) and k not in exclude
        )


CURRENT_TURN: contextvars.ContextVar[TurnRecord | None] = contextvars.ContextVar(
    "bench_turn", default=None
)
CURRENT_NODE: contextvars.ContextVar[str] = contextvars.ContextVar("bench_node", default="?")
"""The node running (set by `NodeTimer` in the node's own context: the fake model reads it)."""


def on_path(nodes: dict[str, float]) -> float:
    """Seconds of node time on a turn's path.

    The nodes that start a turn side by side (``load_profile`` and ``recall``,
    `graph.routing.TURN_START`) count by the longer.
    """
    from graph.routing import TURN_START

    start = [nodes[n] for n in TURN_START if n in nodes]
    return sum(v for n, v in nodes.items() if n not in TURN_START) + max(start, default=0.0)


def record_part(part: str, seconds: float) -> None:
    """Add one timed call to the running turn's record (no-op outside a turn)."""
    rec = CURRENT_TURN.get()
    if rec is not None:
        rec.add(part, seconds)


async def timed_turn(
    graph: Any, ctx: Any, thread: str, text: str, **options: Any
) -> tuple[TurnRecord, float, Any]:
    """One turn of ``text`` on ``thread`` under a fresh `TurnRecord`: it, its seconds, the state."""
    rec = TurnRecord()
    token = CURRENT_TURN.set(rec)
    try:
        rec.sent = time.perf_counter()
        config = {"configurable": {"thread_id": thread}}
        state = await graph.ainvoke(
            {"messages": [HumanMessage(text)]}, config, context=ctx, **options
        )
        return rec, time.perf_counter() - rec.sent, state
    finally:
        CURRENT_TURN.reset(token)


class NodeTimer(BaseCallbackHandler):
    """Times every node run of a graph into the `TurnRecord` its run started under."""

    run_inline = True  # called in the node's own context, no thread hop

    def __init__(self) -> None:
        self._running: dict[UUID, tuple[TurnRecord | None, str, float, contextvars.Token]] = {}

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kw: Any) -> None:
        """A node's run (its name is the metadata's ``langgraph_node``) starts its clock."""
        node = (kw.get("metadata") or {}).get("langgraph_node")
        if node is None or kw.get("name") != node:
            return
        rec, now = CURRENT_TURN.get(), time.perf_counter()
        if rec is not None:
            rec.starts.setdefault(node, now)
        self._running[run_id] = (rec, node, now, CURRENT_NODE.set(node))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        """Add the node's time to its record."""
        if (run := self._running.pop(run_id, None)) is not None:
            rec, node, start, token = run
            if rec is not None:
                rec.add_node(node, time.perf_counter() - start)
            with contextlib.suppress(ValueError):  # ended in another context: it ends with it
                CURRENT_NODE.reset(token)

    on_chain_error = on_chain_end


NODE_TIMER = NodeTimer()
G = TypeVar("G")


def timed(graph: G) -> G:
    """``graph`` (compiled) with its nodes timed by `NODE_TIMER` (a copy; same graph)."""
    return graph.with_config(callbacks=[NODE_TIMER])  # type: ignore[attr-defined]


def timer(func: Callable, report: Callable[[float], None], is_async: bool | None = None):  # noqa: ANN201
    """``func`` reporting each call's seconds to ``report`` (async: awaited; default: as it is)."""
    if inspect.iscoroutinefunction(func) if is_async is None else is_async:

        @functools.wraps(func)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await func(*args, **kwargs)
            finally:
                report(time.perf_counter() - start)

        return awrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            report(time.perf_counter() - start)

    return wrapper


def _timed_call(func: Callable, part: str, is_async: bool = True) -> Callable:
    return timer(func, functools.partial(record_part, part), is_async)


def _waits_timed(search: Callable) -> Callable:
    """``search_channels`` whose wait for the query vector is timed as ``embed_wait``.

    The wait is what the embedding costs the read path: what is left of it once the
    searches that do not need it (the keyword search) have run beside it.
    """

    async def waited(vector: Any) -> Any:
        return await vector

    @functools.wraps(search)
    async def wrapper(services, query, vector, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if inspect.isawaitable(vector):
            vector = _timed_call(waited, "embed_wait")(vector)
        else:
            record_part("embed_wait", 0.0)
        return await search(services, query, vector, *args, **kwargs)

    return wrapper


INSTRUMENTED = (
    ("embeddings", "aembed_query", "embed_query"),
    ("embeddings", "aembed_documents", "embed_documents"),
    ("memories", "search", "search"), ("memories", "touch", "touch"),
    ("memories", "add", "memory_add"),
    ("memories", "summaries_since_reflection", "since_reflection"),
)  # fmt: skip
"""(services attribute, method, part name) timed by `instrument`."""


@contextlib.contextmanager
def instrument(services: Any) -> Iterator[None]:
    """Time the embedding and pgvector calls of ``services`` (instance-level patches).

    Recall's searches (`retrieval.search_channels`, which awaits the query embedding inside:
    ``search`` spans ``embed_query`` too) are ``search``, like `MemoryStore.search`; what the
    read path waited for the embedding is ``embed_wait``. Restored on exit.
    """
    patched = []
    for attr, method, part in INSTRUMENTED:
        obj = getattr(services, attr)
        if method in vars(obj):  # already instrumented (nested use): keep the outer one
            continue
        # object.__setattr__: the embeddings are a pydantic model that refuses new fields
        object.__setattr__(obj, method, _timed_call(getattr(obj, method), part))
        patched.append((obj, method))
    # MiniLM's own compute (`LocalEmbeddings.encode`, run under its lock in a worker
    # thread that inherits the turn's context): without the wait for the lock. Other
    # embeddings have no such method.
    embeddings = services.embeddings
    if callable(getattr(embeddings, "encode", None)) and "encode" not in vars(embeddings):
        object.__setattr__(
            embeddings, "encode", _timed_call(embeddings.encode, "embed_compute", False)
        )
        patched.append((embeddings, "encode"))
    # recall's searches (every channel's, at once) are one round trip,
    # `search_channels`, looked up in `retrieval` at each call: timed as ``search`` too
    searches = retrieval.search_channels
    retrieval.search_channels = _timed_call(_waits_timed(searches), "search")
    try:
        yield
    finally:
        retrieval.search_channels = searches
        for obj, method in patched:
            with contextlib.suppress(AttributeError):
                object.__delattr__(obj, method)


def build_timed_graph(
    services: Any, checkpointer: Any = None, scheduler: Any = None, settings: Any = None
) -> Any:
    """`graph.builder.build_graph`'s graph, every node timed (default `Settings.from_env`)."""
    from graph.builder import build_builder
    from graph.prefetch import as_memory_graph
    from memory_graph_agent.settings import Settings

    settings = Settings.from_env() if settings is None else settings
    builder = build_builder(services, settings, scheduler)
    graph = builder.compile(checkpointer=checkpointer, name="memory_agent_timed")
    return timed(as_memory_graph(graph, services.embeddings))  # as `build_graph` does


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
    """The baseline in process, with ``checkpointer``, its node timed."""
    return timed(_respond_only(settings).compile(checkpointer=checkpointer, name="respond_only"))
