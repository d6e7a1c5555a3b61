"""An event loop on a thread of its own: how sync code calls our async memory.

Redis and Postgres clients are bound to the event loop that opened them. Sync callers
(``agent.invoke``, scripts, Streamlit) get the services opened on a `LoopThread`
(`services.stores.services_session_sync`), and every call of theirs runs there, waited
for from the caller's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A private event loop, running on a daemon thread until `close`."""

    def __init__(self, name: str = "memory-loop") -> None:
        """Start the loop's thread."""
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(
        self, coroutine: Coroutine[Any, Any, T], context: contextvars.Context | None = None
    ) -> T:
        """Run ``coroutine`` on the loop, in ``context`` (a copy of the caller's by default).

        Blocks the calling thread until it is done and returns its result (or raises its
        exception); an interrupted wait cancels it. Called from the loop's own thread it
        would wait for itself forever: that raises `RuntimeError` instead.
        """
        if threading.current_thread() is self.thread or not self.loop.is_running():
            coroutine.close()
            raise RuntimeError(
                "a LoopThread cannot wait for itself"
                if self.loop.is_running()
                else "the LoopThread is closed"
            )
        context = context if context is not None else contextvars.copy_context()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def finish(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        def start() -> None:  # on the loop: the task runs in the caller's context vars
            tasks.append(self.loop.create_task(coroutine, context=context))
            tasks[0].add_done_callback(finish)

        self.loop.call_soon_threadsafe(start)
        try:
            return done.result()
        except BaseException:  # KeyboardInterrupt in the caller: stop the work too
            if not done.done():
                self.loop.call_soon_threadsafe(lambda: [t.cancel() for t in tasks])
            raise

    def cancel_rest(self) -> None:
        """Cancel every task still running on the loop and wait until they have ended."""
        self.run(_cancel_others())

    def close(self) -> None:
        """Cancel what still runs on the loop, then stop the loop and its thread."""
        if self.loop.is_running():
            self.cancel_rest()
            self.run(self.loop.shutdown_asyncgens())
            self.run(self.loop.shutdown_default_executor())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        self.loop.close()


async def _cancel_others() -> None:
    rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)
