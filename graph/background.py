"""Memory after the reply: schedulers of the memory runs of ``memory_mode="background"``.

A turn's run ends after trim_window (the evicted messages are already in the thread's
durable pending list); its scheduler then starts a *memory run* of the same graph on the
thread's memory thread (`memory_thread_id`), with ``context.memory_of`` naming the
conversation thread: START → backlog → summarize → consolidate → reflect. Memory runs
of one thread run one at a time, on a thread of their own, so the next turn never waits for them. A
memory run that dies loses nothing: its batch stays leased in Redis and a later run
claims it (exactly once, by the queue's leases and deterministic summary ids).

- `LocalScheduler`: asyncio tasks in this process (CLI, notebooks, benchmarks).
- `ServerScheduler`: a background run on the server, enqueued on the memory thread
  (``multitask_strategy="enqueue"``), the way langchain-ai/memory-template schedules its
  memory graph. On the LangGraph server it goes through the in-process loopback
  (`langgraph_sdk.get_client()` without a URL): no credentials are checked, but the
  server's auth handlers still run, as the turn's user. On Aegra, which has no loopback,
  it goes over HTTP to ``MEMORY_AGENT_SERVER_URL`` with a token for the turn's user that
  the server signs, and waits out the delay itself (the class says why). Either way, the
  run's context is what a client of that user may send (`server_context`): the run's
  `Context` with ``memory_of`` (accepted on that memory thread only); the deployment's
  settings are the server's own (`Settings.from_env`, read once), in the memory run as in
  the turn.
  A memory thread id taken by another thread (possible only where auth was off or older
  rules let someone create it) is skipped for the next alternate id; memory never falls
  back to the turn's run for it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from dataclasses import replace
from functools import partial
from typing import Any

from langgraph.constants import TAG_NOSTREAM

from graph.context import CONTEXT_FIELDS, Context, MemoryScheduler
from graph.deferred import Deferred
from memory_graph_agent.core.memory_threads import ALTERNATES, memory_thread_id
from memory_graph_agent.core.server_token import server_token, server_url

log = logging.getLogger(__name__)

MEMORY_RUN_TAGS = [TAG_NOSTREAM, "memory_run"]
RECURSION_LIMIT = 500
REPORTS_KEPT = 100
"""Final states of memory runs `LocalScheduler.reports` keeps, the newest: a caller that
never asks for them (`MemoryMiddleware`) must not keep every run's state while it lives."""
"""Steps a memory run may take: draining a long backlog is two steps per batch."""


def memory_run(
    context: Context, thread_id: str, attempt: int = 0
) -> tuple[dict[str, Any], Context]:
    """Config and context of a memory run of ``thread_id``: its own thread, ``memory_of`` set.

    ``attempt``: which of the thread's memory thread ids (`memory_thread_id`) it runs on.
    """
    config = {
        "configurable": {"thread_id": memory_thread_id(context.user_id, thread_id, attempt)},
        "recursion_limit": RECURSION_LIMIT,
        "tags": MEMORY_RUN_TAGS,
        "run_name": "memory_run",
    }
    return config, replace(context, memory_of=thread_id)


def server_context(context: Context) -> dict[str, Any]:
    """The context a memory run on the server is started with: what a client may send.

    The run's `Context` with ``memory_of``; the graph has the deployment's settings, as
    for the turn (the server passes no other key to a run).
    """
    return {name: getattr(context, name) for name in sorted(CONTEXT_FIELDS)}


__all__ = [
    "LocalScheduler",
    "MemoryScheduler",
    "MemoryThreadTaken",
    "ServerScheduler",
    "memory_run",
    "memory_thread_id",
    "server_context",
]


class LocalScheduler:
    """In-process memory runs: one asyncio task chain per thread, coalesced.

    `bind` it to the compiled graph. A run starts ``settings.formation.delay_s`` after it is
    asked for; while a memory run of a thread is running or waiting to start, one more
    may wait behind it; further requests join the waiting one (it drains every full batch).
    A request for later (``after_s``: a memory run found its batch leased) sets a timer.
    `drain` waits for all runs, not timers (call it before the process exits); `reports` hands out
    the final states of finished runs, for a "what memory did" report after the reply.
    """

    def __init__(self) -> None:
        self.graph: Any = None
        self._tails: dict[str, asyncio.Task] = {}
        self._waiting: dict[str, bool] = {}
        self._reports: deque[dict[str, Any]] = deque(maxlen=REPORTS_KEPT)
        self._later: dict[str, asyncio.TimerHandle] = {}
        self.failures = 0

    def bind(self, graph: Any) -> Any:
        """Run memory on ``graph`` (the compiled graph this scheduler was built into)."""
        self.graph = graph
        return graph

    async def __call__(
        self,
        context: Context,
        thread_id: str,
        compress: bool,
        after_s: float | None = None,
        *,
        delay_s: float = 0.0,
    ) -> None:
        """Start (or join) the memory run of ``thread_id`` in ``delay_s``; return at once.

        With ``after_s`` (a batch leased by another worker): a timer requests the run
        then. `drain` does not wait for timers; the batch stays durable in Redis.
        """
        if self.graph is None:
            raise RuntimeError("LocalScheduler is not bound to a graph")
        key = memory_thread_id(context.user_id, thread_id)
        if after_s is not None:  # one timer per thread, the earliest
            loop, after_s = asyncio.get_running_loop(), max(after_s, 0.05)
            timer = self._later.get(key)
            if timer is not None and timer.when() <= loop.time() + after_s:
                return
            if timer is not None:
                timer.cancel()
            later = partial(self._request_later, key, context, thread_id, compress)
            self._later[key] = loop.call_later(after_s, later)
            return
        self._start(key, context, thread_id, compress, delay_s)

    def _start(
        self, key: str, context: Context, thread_id: str, compress: bool, delay_s: float
    ) -> None:
        if key in self._waiting:  # a run is already waiting to start: it takes this work
            self._waiting[key] = self._waiting[key] or compress
            return
        self._waiting[key] = compress
        previous = self._tails.get(key)
        self._tails[key] = asyncio.create_task(
            self._run(previous, context, thread_id, key, delay_s)
        )

    def _request_later(self, key: str, context: Context, thread_id: str, compress: bool) -> None:
        del self._later[key]
        self._start(key, context, thread_id, compress, 0.0)

    async def _run(
        self,
        previous: asyncio.Task | None,
        context: Context,
        thread_id: str,
        key: str,
        delay_s: float,
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        try:
            await asyncio.sleep(delay_s)  # requests meanwhile join this run
            compress = self._waiting.pop(key)
            config, context = memory_run(context, thread_id)
            try:
                state = await self.graph.ainvoke({"compress": compress}, config, context=context)
            except Exception:  # the batch stays leased in Redis; a later run claims it
                self.failures += 1
                log.exception("memory run of thread %s failed; its messages wait", thread_id)
                return
            self._reports.append({"thread_id": thread_id, **state})
        finally:  # a thread's last run forgets it: a process serves threads without end
            if self._tails.get(key) is asyncio.current_task():
                del self._tails[key]

    def pending(self, user_id: str | None = None, thread_id: str | None = None) -> bool:
        """Whether memory work of a thread (or any) is still running or waiting."""
        if user_id is not None and thread_id is not None:
            task = self._tails.get(memory_thread_id(user_id, thread_id))
            return task is not None and not task.done()
        return any(not task.done() for task in self._tails.values())

    async def wait(self, user_id: str, thread_id: str) -> None:
        """Wait for the memory runs of one thread (e.g. before archiving it)."""
        task = self._tails.get(memory_thread_id(user_id, thread_id))
        if task is not None:
            await asyncio.wait([task])

    async def drain(self) -> None:
        """Wait until no memory run is running or waiting."""
        while tasks := [t for t in self._tails.values() if not t.done()]:
            await asyncio.wait(tasks)

    def reports(self) -> list[dict[str, Any]]:
        """Final states of the memory runs finished since the last call."""
        reports = list(self._reports)
        self._reports.clear()
        return reports


class ServerScheduler:
    """A background run on the server, on the thread's memory thread.

    The server's run API is reached one of two ways, chosen once, at construction:

    - in process (`langgraph_sdk.get_client()` without a URL; `langgraph dev` and the
      LangGraph server): the engine delays the run (``after_seconds``), queues it behind
      the memory thread's running one (``enqueue``) and creates the thread;
    - over HTTP at ``MEMORY_AGENT_SERVER_URL`` (Aegra: no in-process client, and it
      ignores ``after_seconds``, ``if_not_exists`` and ``enqueue``), as the turn's user with
      a one-minute token the server signs (`memory_graph_agent.core.server_token`), never
      a user's key. This process waits out the delay itself (`graph.deferred`): requests
      of a memory thread meanwhile join the waiting one, and a batch leased by another
      worker is asked for again when its lease ends. Memory runs of one thread may overlap
      there; the queue's leases still summarize each batch once.
    """

    def __init__(self, assistant_id: str, url: str | None = None) -> None:
        """``url``: the server's own (default ``MEMORY_AGENT_SERVER_URL``; unset: in process)."""
        self.assistant_id = assistant_id
        self.url = url or server_url()
        self._deferred = Deferred()
        self._client: Any = None

    async def __call__(
        self,
        context: Context,
        thread_id: str,
        compress: bool,
        after_s: float | None = None,
        *,
        delay_s: float = 0.0,
    ) -> None:
        """Create the run (and the memory thread if needed), or have it created later.

        A memory thread id the server refuses (another owner's thread holds it) is
        skipped for the next alternate; all of them refused raises `MemoryThreadTaken`
        (over HTTP: logged when the run is due, the messages wait).
        """
        wait_s = delay_s if after_s is None else after_s
        if self.url is None:
            await self._create(context, thread_id, compress, math.ceil(wait_s) or None)
            return
        server_token(context.user_id)  # a server that cannot sign one fails now, not later
        key = memory_thread_id(context.user_id, thread_id)
        self._deferred.request(key, wait_s, compress, partial(self._due, context, thread_id))

    async def _due(self, context: Context, thread_id: str, compress: bool) -> None:
        try:
            await self._create(context, thread_id, compress, None)
        except Exception as exc:  # noqa: BLE001 - the batch waits, durable, for a later run
            log.warning("memory run of %s not created (%r); its messages wait", thread_id, exc)

    def _sdk(self) -> Any:
        """The in-process client, or one HTTP client of the server's URL, kept."""
        from langgraph_sdk import get_client

        if self.url is None:
            return get_client()
        if self._client is None:  # never a key from the environment: the server's token
            self._client = get_client(url=self.url, api_key=None)
        return self._client

    async def _create(
        self, context: Context, thread_id: str, compress: bool, after_seconds: int | None
    ) -> None:
        from langgraph_sdk.errors import ConflictError, NotFoundError

        client = self._sdk()
        for attempt in range(ALTERNATES):
            config, memory_context = memory_run(context, thread_id, attempt)
            token = server_token(context.user_id) if self.url is not None else None
            try:
                await client.runs.create(
                    config["configurable"]["thread_id"],
                    self.assistant_id,
                    input={"compress": compress},
                    context=server_context(memory_context),
                    config={"tags": MEMORY_RUN_TAGS, "recursion_limit": RECURSION_LIMIT},
                    # "owner": the server's auth (memory_graph_agent.auth) lets the user read it
                    metadata={
                        "owner": context.user_id,
                        "user_id": context.user_id,
                        "memory_of": thread_id,
                    },
                    multitask_strategy="enqueue",
                    if_not_exists="create",
                    after_seconds=after_seconds,
                    headers={"Authorization": f"Bearer {token}"} if token else None,
                )
            except (NotFoundError, ConflictError):
                log.warning(
                    "memory thread %s of thread %s is held by another thread; trying the next id",
                    config["configurable"]["thread_id"],
                    thread_id,
                )
                continue
            return
        raise MemoryThreadTaken(f"every memory thread id of thread {thread_id} is taken")

    async def drain(self) -> None:
        """Wait for the runs this process still has to create (over HTTP); tests use it."""
        await self._deferred.drain()


class MemoryThreadTaken(RuntimeError):
    """Every memory thread id of a conversation is held by a thread that is not its own."""
