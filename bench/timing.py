"""Where a benchmark turn spends its time: per node and per timed call.

`timed_node` wraps a node function (plain or bound with ``functools.partial``) and
`instrument` wraps the embedding and pgvector calls of the live `Services`; both report
into the `TurnRecord` of the running turn, held in a context variable (`CURRENT_TURN`)
so concurrent turns never mix their numbers. `record_part` is how other timed code (the
fake chat model of `bench.fake_model`) reports, under the node that runs it
(`CURRENT_NODE`).
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
from typing import Any

from memory_graph_agent.recall import retrieval


@dataclass
class TurnRecord:
    """What one turn spent where (seconds). Nodes that run twice in a turn are summed."""

    nodes: dict[str, float] = field(default_factory=dict)
    parts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

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
CURRENT_NODE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "bench_node", default=None
)


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


def node_name(fn: Callable) -> str:
    """The name of the node function inside ``functools.partial`` and ``wraps`` layers.

    A node may be bound with ``partial`` and wrapped with ``functools.wraps`` (which
    points ``__wrapped__`` at what it wraps), so both layers are unwrapped.
    """
    while True:
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif getattr(fn, "__wrapped__", None) is not None:
            fn = fn.__wrapped__
        else:
            return fn.__name__


def timed_node(fn: Callable, name: str | None = None) -> Callable:
    """Wrap an async node ``fn(state, runtime)`` (maybe a ``partial``); name it ``name``.

    ``functools.wraps`` keeps what LangGraph inspects (the signature, through
    ``__wrapped__``); ``name`` defaults to the wrapped function's name (`node_name`).
    """
    name = name or node_name(fn)

    @functools.wraps(fn)
    async def wrapper(state, runtime):  # noqa: ANN001, ANN202 - same signature as the node
        token = CURRENT_NODE.set(name)
        start = time.perf_counter()
        try:
            return await fn(state, runtime)
        finally:
            elapsed = time.perf_counter() - start
            CURRENT_NODE.reset(token)
            rec = CURRENT_TURN.get()
            if rec is not None:
                rec.add_node(name, elapsed)

    wrapper.__name__ = wrapper.__qualname__ = name
    return wrapper


def _timed_call(func: Callable, part: str) -> Callable:
    @functools.wraps(func)
    async def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        try:
            return await func(*args, **kwargs)
        finally:
            record_part(part, time.perf_counter() - start)

    return wrapper


def _timed_sync_call(func: Callable, part: str) -> Callable:
    @functools.wraps(func)
    def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            record_part(part, time.perf_counter() - start)

    return wrapper


def _waits_timed(search: Callable) -> Callable:
    """``search_channels`` whose wait for the query vector is timed as ``embed_wait``.

    The wait is what the embedding costs the read path: what is left of it once the
    searches that do not need it (the keyword search) have run beside it.
    """

    async def waited(vector: Any) -> Any:
        start = time.perf_counter()
        try:
            return await vector
        finally:
            record_part("embed_wait", time.perf_counter() - start)

    @functools.wraps(search)
    async def wrapper(services, query, vector, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if inspect.isawaitable(vector):
            vector = waited(vector)
        else:
            record_part("embed_wait", 0.0)
        return await search(services, query, vector, *args, **kwargs)

    return wrapper


INSTRUMENTED = (
    ("embeddings", "aembed_query", "embed_query"),
    ("embeddings", "aembed_documents", "embed_documents"),
    ("memories", "search", "search"),
    ("memories", "touch", "touch"),
    ("memories", "add", "memory_add"),
    ("memories", "summaries_since_reflection", "since_reflection"),
)
"""(services attribute, method, part name) timed by `instrument`."""


@contextlib.contextmanager
def instrument(services: Any) -> Iterator[None]:
    """Time the embedding and pgvector calls of ``services`` (instance-level patches).

    The query embedding of `recall` is ``embed_query``, the part of it the read path
    waited for ``embed_wait``; its searches
    (`memory_graph_agent.recall.channels.base.search_channels`, which awaits the embedding
    inside, the keyword search running beside it: so ``search`` spans ``embed_query`` too) are
    ``search``, like `MemoryStore.search` elsewhere; the summary embedding inside
    `consolidate`'s ``memory_add`` is
    ``embed_documents``. Restored on exit.
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
            embeddings, "encode", _timed_sync_call(embeddings.encode, "embed_compute")
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
