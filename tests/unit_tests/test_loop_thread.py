"""`LoopThread`: sync callers run coroutines on a private loop, in their own context vars."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from memory_graph_agent.core.loop_thread import LoopThread

seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


async def _where() -> tuple[str, str]:
    await asyncio.sleep(0)
    return seen.get(), threading.current_thread().name


async def _fail() -> None:
    raise ValueError("boom")


def test_a_coroutine_runs_on_the_loop_thread_with_the_callers_context_vars() -> None:
    runner = LoopThread("test-loop")
    try:
        token = seen.set("caller's")
        try:
            assert runner.run(_where()) == ("caller's", "test-loop")
        finally:
            seen.reset(token)
        with pytest.raises(ValueError, match="boom"):
            runner.run(_fail())
    finally:
        runner.close()
    assert not runner.thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        runner.run(_where())


def test_waiting_from_the_loops_own_thread_is_refused_not_a_deadlock() -> None:
    runner = LoopThread()

    async def nested() -> None:
        runner.run(_where())

    try:
        with pytest.raises(RuntimeError, match="cannot wait for itself"):
            runner.run(nested())
    finally:
        runner.close()


def test_closing_cancels_what_still_runs_on_the_loop_and_waits_for_it() -> None:
    runner = LoopThread()
    started, ended = threading.Event(), []

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    runner.loop.call_soon_threadsafe(lambda: runner.loop.create_task(forever()))
    assert started.wait(5)
    runner.close()
    assert ended == ["cancelled"] and runner.loop.is_closed()
