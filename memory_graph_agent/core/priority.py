"""Memory work gives way to the read paths of turns running in the same process.

Background memory runs (`graph.background`) share the process, its event loop and the
stores with the next turns: on a small machine their store calls (embedding documents,
HNSW inserts, queue claims) slow the next turn's ``load_profile`` and ``recall``. So a
turn marks its read path (`read_path`), memory nodes mark their work (`memory_work`), and
every store call of memory work first waits until no read path of this event loop is in
flight (`give_way`, called by the stores' guard), at most ``max_wait_s`` per call so that
memory still progresses under a steady stream of turns. A call already running is not
interrupted. Turns never wait for memory work here.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

from memory_graph_agent.core.metrics import MEMORY_GAVE_WAY

_max_wait: ContextVar[float] = ContextVar("agent_memory_give_way_s", default=0.0)


class _Readers:
    """The read paths in flight on one event loop."""

    def __init__(self) -> None:
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Readers] = weakref.WeakKeyDictionary()


def _readers() -> _Readers:
    loop = asyncio.get_running_loop()
    if loop not in _loops:
        _loops[loop] = _Readers()
    return _loops[loop]


@asynccontextmanager
async def read_path() -> AsyncIterator[None]:
    """Mark a turn's read path (load_profile, recall) as in flight while inside."""
    readers = _readers()
    readers.count += 1
    readers.idle.clear()
    try:
        yield
    finally:
        readers.count -= 1
        if not readers.count:
            readers.idle.set()


def reading() -> int:
    """How many read paths are in flight on the running event loop."""
    return _readers().count


@contextmanager
def memory_work(max_wait_s: float) -> Iterator[None]:
    """Inside, store calls give way to read paths for up to ``max_wait_s`` each (0: never)."""
    token = _max_wait.set(max(0.0, max_wait_s))
    try:
        yield
    finally:
        _max_wait.reset(token)


async def give_way() -> float:
    """In memory work: wait until no read path is in flight (bounded); seconds waited."""
    max_wait = _max_wait.get()
    if not max_wait:
        return 0.0
    readers = _readers()
    if not readers.count:
        return 0.0
    started = time.perf_counter()
    try:
        async with asyncio.timeout(max_wait):
            await readers.idle.wait()
    except TimeoutError:
        pass
    waited = time.perf_counter() - started
    MEMORY_GAVE_WAY.inc(waited)
    return waited
