"""`MemoryMiddleware`: our memory for any LangChain ``create_agent`` agent.

The same domain functions as the ``memory_agent`` graph, at the agent's hooks:

* ``abefore_agent`` (once per turn, before the first model call): admission
  (`turn.admission.start_turn`: the input's rules and the thread's owner, nothing written
  for a turn it refuses), the running summary, the provider's profile and its recall
  within what the window on screen leaves of its token budget (`prompting.screen`, as
  the ``recall`` node).
* ``awrap_model_call`` (each model call): the fenced memory blocks of our ``respond``
  node (`graph.prompts.memory_prompt`) appended to the agent's own system prompt.
* ``aafter_agent`` (once, after the turn's last model and tool calls): the turn ends in
  `turn.closing.finish_turn`, on a turn boundary, and due memory work goes to the same
  schedulers as our graph's (`graph.background`): a memory run of the ``memory_agent``
  graph, in this process (`LocalScheduler`) or on the LangGraph server (`ServerScheduler`).

A run with the input ``{"end_session": True}`` (and no new message) archives the thread,
as our graph's ``end_session`` and the CLI's ``/new`` do: nothing is recalled and the model
is not called (``abefore_agent`` jumps to the end); the thread's memory runs of this process
finish first, then the whole window moves to pending and is summarized within the run, and
the thread's messages leave the agent's state.

Each hook has its sync twin (``before_agent``, ``wrap_model_call``, ``after_agent``), for
``agent.invoke`` and ``agent.stream``: the memory work runs on the services' own loop
thread (`services_session_sync`, `Services.run`) and the sync run waits for it; the model
is called in the run's thread. ``drain_sync`` waits for the memory runs there.

The user is the run's: ``context.user_id`` (an object or a dict), or the authenticated
identity of a LangGraph server run. Without one the turn is refused with `MissingUserError`;
nothing is ever written under a default user. The run's ``recall_mode`` and ``memory_tools``
(`graph.context.Context`), when its context has them, mean what they mean in our graph:
``flat`` recalls the hottest memories (our provider's), ``tool`` leaves recall to the
model's ``search_memory`` (a middleware built with ``tools=True``), ``memory_tools=False``
hides the memory tools from the model. A choice the middleware cannot honour is refused
by name, before anything is read or written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Annotated, Any, NotRequired, TypeVar

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain.agents.middleware.types import OmitFromInput
from langchain.tools import ToolRuntime
from langchain_core.messages import SystemMessage
from langgraph.runtime import Runtime

from graph.background import LocalScheduler, ServerScheduler, memory_run
from graph.builder import GRAPH_NAME, build_graph
from graph.context import Context, MemoryScheduler, current_thread_id
from graph.middleware_runs import run_choices, user_of
from graph.middleware_tools import DeferredProvider, middleware_tools
from graph.prompts import memory_prompt
from memory_graph_agent.core.records import MemoryEvent, ProfileChange, RecalledItem, event
from memory_graph_agent.core.turns import ends_session
from memory_graph_agent.prompting.rendering import latest_human_text
from memory_graph_agent.prompting.screen import Screen
from memory_graph_agent.providers.base import MemoryProvider, ProfileView
from memory_graph_agent.providers.tiered import PROVIDERS, TieredProvider, provider_named
from memory_graph_agent.recall.retrieval import window_ids
from memory_graph_agent.services.stores import Services, server_services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.turn.admission import start_turn
from memory_graph_agent.turn.closing import finish_turn
from memory_graph_agent.turn.validation import InvalidInputError

HOW_TO_RUN_SYNC = (
    "MemoryMiddleware's sync hooks (agent.invoke, agent.stream) need services opened for "
    "sync code: services_session_sync(), on a loop thread of their own. These services live "
    "in an event loop (services_session) that a sync call would block: in async code, call "
    "agent.ainvoke or agent.astream."
)
T = TypeVar("T")


class MemoryAgentState(AgentState):
    """The agent's state plus what memory put in this turn's prompt (read in Studio).

    ``end_session``: ``True`` as input archives the thread instead of answering.
    """

    end_session: NotRequired[bool]
    memory_profile: NotRequired[Annotated[dict[str, dict[str, Any]], OmitFromInput]]
    memory_changes: NotRequired[Annotated[list[ProfileChange], OmitFromInput]]
    memory_recalled: NotRequired[Annotated[list[RecalledItem], OmitFromInput]]
    memory_summary: NotRequired[Annotated[str, OmitFromInput]]
    memory_events: NotRequired[Annotated[list[MemoryEvent], OmitFromInput]]


class MemoryMiddleware(AgentMiddleware[MemoryAgentState, Any]):
    """Long-term memory for a ``create_agent`` agent: profile, recall, window, memory runs.

    Example:
        ```python
        async with services_session() as services:
            memory = MemoryMiddleware(services, model="openai:gpt-4o-mini")
            agent = create_agent(model, tools, middleware=[memory], checkpointer=saver)
            await agent.ainvoke(
                {"messages": [("user", "hi")]},
                {"configurable": {"thread_id": "t1"}},
                context={"user_id": "ada"},
            )
            # archive the thread into memory (no reply): its window ends empty
            await agent.ainvoke({"end_session": True}, config, context={"user_id": "ada"})
            await memory.drain()  # before closing the services
        ```

        Sync code (``agent.invoke``, ``agent.stream``) opens the services with
        ``services_session_sync()`` instead and ends with ``memory.drain_sync()``.

    Args:
        services: Our stores (`services_session`). ``None``: a LangGraph server's, opened
            on first use, with memory runs on its ``memory_agent`` graph.
        provider: ``"tiered"`` (default, ours) or your own `MemoryProvider`.
        tools: Offer ``search_memory``, ``remember``, ``forget`` (and ``pin``/``unpin``
            when the provider can pin) to the model, for the run's user only.
        scheduler: Where memory runs: default `LocalScheduler` with services, else
            `ServerScheduler`; ``formation.mode="inline"`` forms memory within the turn.
        settings: The deployment's `Settings` (window, recall, formation...); default
            `Settings.from_env`, read once, here.
        model: The chat model memory summarizes and extracts facts with
            (``provider:model``; empty: as `graph.context.Context` picks it).
    """

    state_schema = MemoryAgentState

    def __init__(
        self,
        services: Services | None = None,
        *,
        provider: str | MemoryProvider = "tiered",
        tools: bool = False,
        scheduler: MemoryScheduler | None = None,
        settings: Settings | None = None,
        model: str = "",
    ) -> None:
        """Check the provider now; open nothing."""
        super().__init__()
        self.settings = Settings.from_env() if settings is None else settings
        self.model = Context(user_id="model-check", model=model).model
        if isinstance(provider, str) and provider not in PROVIDERS:
            raise ValueError(f"unknown memory provider {provider!r}: one of {sorted(PROVIDERS)}")
        if not isinstance(provider, str | MemoryProvider):
            raise TypeError(f"provider must be a name or a MemoryProvider, got {provider!r}")
        self.services = services
        self._provider_spec = provider
        self._provider: MemoryProvider | None = None if isinstance(provider, str) else provider
        self._memory_graph: Any = None
        if scheduler is None and services is not None:  # memory runs in this process
            scheduler = LocalScheduler()
            scheduler.bind(build_graph(services, scheduler=scheduler, settings=self.settings))
        self.scheduler = scheduler or ServerScheduler(GRAPH_NAME)
        deferred = DeferredProvider(provider, self.open)
        self.tools = (
            middleware_tools(deferred, self.settings, self.context, self._wait) if tools else []
        )

    def context(self, runtime: Runtime[Any] | ToolRuntime[Any]) -> Context:
        """The run's `Context`: its user (`user_of`), its choices, the middleware's model."""
        user = user_of(runtime)
        try:
            return Context(user_id=user, model=self.model, **run_choices(runtime))
        except ValueError as exc:  # a recall_mode that is none of ours
            raise InvalidInputError(f"{exc}; nothing was written") from exc

    async def open(self) -> tuple[Services, MemoryProvider]:
        """The services and the provider (a server's: opened on first use)."""
        services = self.services or await server_services()
        if self._provider is None:
            self._provider = provider_named(str(self._provider_spec), services, self.settings)
        return services, self._provider

    async def drain(self) -> None:
        """Wait for this process's memory runs (call it before closing the services)."""
        if isinstance(self.scheduler, LocalScheduler):
            await self.scheduler.drain()

    def drain_sync(self) -> None:
        """`drain` for sync code, whose services are `services_session_sync`'s."""
        if isinstance(self.scheduler, LocalScheduler):
            self._wait(self.scheduler.drain())

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run an async hook on the services' loop thread and wait for it (a sync run)."""
        if self.services is None or self.services.loop_thread is None:
            coroutine.close()
            raise RuntimeError(HOW_TO_RUN_SYNC)
        return self.services.run(coroutine)

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """`abefore_agent` for ``agent.invoke`` and ``agent.stream``."""
        return self._wait(self.abefore_agent(state, runtime))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """`awrap_model_call` for sync runs: the model is called in the run's thread."""
        return handler(self._with_memory(request))

    def after_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """`aafter_agent` for ``agent.invoke`` and ``agent.stream``."""
        return self._wait(self.aafter_agent(state, runtime))

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Admit the turn while the profile and recall are read (all side by side).

        A session end is admitted alone, and the run jumps to ``aafter_agent``. What the
        admission removes from the state (a thread archived while idle, another user's
        rejected turn) is off screen for recall already (`prompting.screen`).
        """
        ctx = self.context(runtime)
        thread = current_thread_id()
        services, provider = await self.open()
        messages = state.get("messages") or []
        if ends_session(messages, bool(state.get("end_session"))):
            return await self._start_session_end(services, ctx, thread, messages)
        self._check_mode(ctx, provider)
        # side by side, as load_profile ∥ recall: reads only, dropped if admission refuses
        reads = asyncio.gather(
            _or_empty(provider.profile(ctx), ProfileView()),
            _or_empty(self._recall(services, provider, ctx, thread, messages), []),
        )
        try:
            turn = await start_turn(
                services, self.settings, ctx, thread, messages, False, read_profile=False
            )
        except BaseException:
            reads.cancel()
            raise
        profile, recalled = await reads
        text = f"memory: {len(profile.facts)} facts, {len(recalled)} memories recalled"
        if ctx.recall_mode != "auto":
            text += f" ({ctx.recall_mode})"
        update: dict[str, Any] = {
            "memory_profile": profile.facts,
            "memory_changes": profile.changes,
            "memory_recalled": recalled,
            "memory_events": turn.events + [event("recall", "middleware", text)],
        }
        if turn.thread_summary is not None:  # Redis down: the last turn's stays
            update["memory_summary"] = turn.thread_summary
        if turn.repairs:  # another user's rejected turn, left in this thread's checkpoint
            update["messages"] = turn.repairs
        return update

    def _check_mode(self, ctx: Context, provider: MemoryProvider) -> None:
        """Refuse, by name, a run choice this middleware cannot honour."""
        if ctx.recall_mode == "tool" and not (self.tools and ctx.memory_tools):
            raise InvalidInputError(
                "recall_mode='tool' leaves recall to the model's search_memory tool: build "
                "MemoryMiddleware(..., tools=True) and keep memory_tools on, or use "
                "recall_mode='auto'; nothing was written"
            )
        if ctx.recall_mode == "flat" and not isinstance(provider, TieredProvider):
            raise InvalidInputError(
                f"recall_mode='flat' recalls our memory's hottest items; the provider "
                f"{type(provider).__name__} recalls its own way: use recall_mode='auto'; "
                "nothing was written"
            )

    async def _recall(
        self,
        services: Services,
        provider: MemoryProvider,
        ctx: Context,
        thread: str,
        messages: list[Any],
    ) -> list[RecalledItem]:
        """The provider's recall per ``recall_mode``, within what the screen leaves."""
        if ctx.recall_mode == "tool":  # the model searches
            return []
        screen = Screen(self.settings.window.memory_token_budget, messages)
        query = latest_human_text(messages)
        if isinstance(provider, TieredProvider):  # the window is read beside the search
            flat = ctx.recall_mode == "flat"
            budget = screen.of(None).budget
            return await provider.recall(ctx, thread, query, budget, screen, flat=flat)
        on = screen.of(await window_ids(services, ctx.user_id, thread))
        return await provider.recall(ctx, thread, query, on.budget)

    async def _start_session_end(
        self, services: Services, ctx: Context, thread: str, messages: list[Any]
    ) -> dict[str, Any]:
        """Admit a session end once the thread's memory runs here are done; skip the model."""
        if isinstance(self.scheduler, LocalScheduler):
            await self.scheduler.wait(ctx.user_id, thread)
        turn = await start_turn(
            services, self.settings, ctx, thread, messages, True, read_profile=False
        )
        text = "memory: session end, the thread is archived and not answered"
        update: dict[str, Any] = {
            "jump_to": "end",
            "memory_recalled": [],
            "memory_events": turn.events + [event("recall", "session_end", text)],
        }
        if turn.repairs:
            update["messages"] = turn.repairs
        return update

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Call the model with the memory blocks after the agent's own system prompt."""
        return await handler(self._with_memory(request))

    def _with_memory(self, request: ModelRequest) -> ModelRequest:
        """The model request with the memory blocks after the agent's own system prompt."""
        ctx = self.context(request.runtime)  # a run that names no user is refused here too
        blocks = memory_prompt(_shown(request.state), self.settings.window.profile_token_budget)
        own = request.system_message.text if request.system_message is not None else ""
        system = SystemMessage(f"{own}\n\n{blocks}" if own else blocks)
        if ctx.memory_tools or not self.tools:
            return request.override(system_message=system)
        ours = {t.name for t in self.tools}  # memory_tools=False: the model does not see them
        tools = [t for t in request.tools if getattr(t, "name", None) not in ours]
        return request.override(system_message=system, tools=tools)

    async def aafter_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """End the turn: window, overflow to pending, then a memory run when one is due."""
        ctx = self.context(runtime)
        thread = current_thread_id()
        services, provider = await self.open()
        messages = state.get("messages") or []
        ending = ends_session(messages, bool(state.get("end_session")))
        end = await finish_turn(
            services,
            self.settings,
            ctx,
            thread,
            messages,
            end_session=ending,
            next_system_prompt=memory_prompt(
                _shown(state), self.settings.window.profile_token_budget
            ),
            recalled=state.get("memory_recalled") or [],
            scheduler=self.scheduler,
            touch=partial(provider.touch, ctx) if hasattr(provider, "touch") else _untouched,
        )
        events = list(state.get("memory_events") or []) + end.events
        if end.forms_here:  # inline, or a session end: this run forms memory
            config, memory_ctx = memory_run(ctx, thread)
            graph = self._memory_graph = self._memory_graph or build_graph(
                services, settings=self.settings
            )
            inputs = {"compress": end.window.compress}
            done = await graph.ainvoke(inputs, config, context=memory_ctx)
            events += done.get("memory_events") or []
        update: dict[str, Any] = {"messages": end.removed, "memory_events": events}
        if state.get("end_session"):  # consumed: the thread's next turn is an ordinary one
            update["end_session"] = False
        return update


def _shown(state: Mapping[str, Any]) -> dict[str, Any]:
    """The middleware's state as `memory_prompt` reads it (our graph's key names)."""
    return {
        "profile": state.get("memory_profile"),
        "profile_changes": state.get("memory_changes"),
        "recalled": state.get("memory_recalled"),
        "thread_summary": state.get("memory_summary"),
    }


async def _or_empty(read: Awaitable[Any], empty: Any) -> Any:
    """A read of long-term memory; its store being down means answering without it."""
    try:
        return await read
    except StoreUnavailable:
        return empty


async def _untouched(items: list[Any]) -> None:
    """A provider without ``touch`` counts no access."""
