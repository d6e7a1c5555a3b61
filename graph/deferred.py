"""Calls that wait in this process before they are made: one per key, later requests join it.

Where the engine ignores a run's ``after_seconds`` (Aegra ran a run asked for 20 s later
at 0.6 s), `graph.background.ServerScheduler` waits here instead of on the server. A
request for a key starts a task that sleeps until its deadline, then makes the call; a
request for the same key meanwhile joins it (``compress`` OR-ed in) and may bring its
deadline forward, never back. Once the call is being made, a new request waits for
another one. So a thread's turns coalesce into one memory run per delay, and a batch
leased by another worker is asked for again when its lease ends, not in a hot loop.

The wait lives in this process only: if the process dies first, the call is not made,
and what it was for waits durably (a memory run's batch stays in Redis for the next
turn's memory run or the session end). A call that raises is logged, not retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Call = Callable[[bool], Awaitable[None]]
"""What is called at the deadline, with the requests' ``compress`` OR-ed together."""


@dataclass
class _Waiting:
    deadline: float
    compress: bool
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class Deferred:
    """Per key, at most one call waiting for its deadline; later requests join it."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._tasks: set[asyncio.Task] = set()

    def request(self, key: str, delay_s: float, compress: bool, call: Call) -> None:
        """Make ``call`` in ``delay_s`` seconds, or join the call of ``key`` that waits."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, delay_s)
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.compress = waiting.compress or compress
            if deadline < waiting.deadline:  # the earliest request sets the time
                waiting.deadline = deadline
                waiting.wake.set()
            return
        waiting = self._waiting[key] = _Waiting(deadline, compress)
        task = loop.create_task(self._wait_then_call(key, waiting, call))
        self._tasks.add(task)  # the loop keeps only a weak reference to its tasks
        task.add_done_callback(self._tasks.discard)

    async def _wait_then_call(self, key: str, waiting: _Waiting, call: Call) -> None:
        loop = asyncio.get_running_loop()
        try:
            while (left := waiting.deadline - loop.time()) > 0:
                waiting.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiting.wake.wait(), left)
        finally:  # from now on, a request waits for a call of its own
            del self._waiting[key]
        try:
            await call(waiting.compress)
        except Exception:
            log.exception("deferred call of %s failed; what it was for waits", key)

    def waiting(self, key: str | None = None) -> bool:
        """Whether a call (of ``key``, or any) is waiting or being made."""
        if key is not None:
            return key in self._waiting
        return bool(self._tasks)

    async def drain(self) -> None:
        """Wait until no call is waiting or being made (tests; a process about to exit)."""
        while tasks := [t for t in self._tasks if not t.done()]:
            await asyncio.wait(tasks)
