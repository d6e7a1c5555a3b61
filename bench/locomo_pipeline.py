"""The memory pipeline `bench.locomo` and `bench.longmemeval` drive: replay, then ask recall.

Replay: ``trim_window → summarize → consolidate → reflect`` as the agent routes them, raw
summaries, a guard model that refuses every call. Recall: the node on the thread's window.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
from langchain_core.outputs import ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.locomo_scoring import Shown, message_tokens
from graph.context import Context, current_thread_id
from graph.routing import bound, route_after_consolidate, route_after_summarize, route_after_trim
from graph.state import State
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import Services, services_session
from memory_graph_agent.settings import Settings
from nodes.consolidate import consolidate
from nodes.recall import recall
from nodes.reflect import reflect
from nodes.summarize import summarize
from nodes.trim_window import trim_window

RECALL_K = 5
"""The settings' default: the token budget, not ``recall_k``, limits hybrid recall."""
NO_REFLECTION = 10**6


@dataclass(frozen=True)
class Run:
    """A bench point: the run's context and the settings its graph is compiled with."""

    ctx: Context
    settings: Settings

    def override(self, **values: Any) -> Run:
        """The same run with settings changed by name (`Settings.override`)."""
        return Run(self.ctx, self.settings.override(**values))

    def by_name(self) -> dict[str, Any]:
        """The context's fields and every setting, by name (what a report records)."""
        return {**asdict(self.ctx), **self.settings.by_name()}


class PerSettings:
    """A graph compiled once per `Settings`, invoked with a `Run`'s context."""

    def __init__(self, build: Callable[[Settings], CompiledStateGraph]) -> None:
        self.build = build
        self.graphs: dict[Settings, CompiledStateGraph] = {}

    async def ainvoke(self, inputs: Any, thread_id: str, run: Run) -> Any:
        """Run the graph of ``run.settings`` with ``run.ctx`` in ``thread_id``."""
        if run.settings not in self.graphs:
            self.graphs[run.settings] = self.build(run.settings)
        config = {"configurable": {"thread_id": thread_id}}
        return await self.graphs[run.settings].ainvoke(inputs, config, context=run.ctx)


class GuardChatModel(BaseChatModel):
    """The replay's chat model: counts calls and refuses them (raw mode needs none)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "locomo-guard"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        raise RuntimeError("the LoCoMo replay must not call a chat model")


def build_replay_graph(services: Services) -> PerSettings:
    """trim_window → summarize → consolidate → reflect, bound as `graph.builder` binds them."""

    def build(settings: Settings) -> CompiledStateGraph:
        builder = StateGraph(State, context_schema=Context)
        for node in (trim_window, summarize, consolidate, reflect):
            builder.add_node(node.__name__, partial(node, services=services, settings=settings))
        builder.add_edge(START, "trim_window")
        builder.add_conditional_edges("trim_window", bound(route_after_trim, settings))
        builder.add_conditional_edges("summarize", route_after_summarize)
        builder.add_conditional_edges("consolidate", bound(route_after_consolidate, settings))
        builder.add_edge("reflect", END)
        return builder.compile(name="locomo_replay")

    return PerSettings(build)


class QueryCache(Embeddings):
    """The run's embeddings, each question's vector computed once (the grid asks it often)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.vectors: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Delegate."""
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The question's vector, computed once."""
        if text not in self.vectors:
            self.vectors[text] = self.inner.embed_query(text)
        return self.vectors[text]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Delegate."""
        return await self.inner.aembed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        """The question's vector, computed once."""
        if text not in self.vectors:
            self.vectors[text] = await self.inner.aembed_query(text)
        return self.vectors[text]


def build_recall_graph(services: Services) -> PerSettings:
    """The recall node alone, on the messages the agent's checkpoint would hold."""
    services = replace(services, embeddings=QueryCache(services.embeddings))

    async def checkpointed(state: State, runtime: Runtime[Context]) -> dict:
        window = await services.window.window(runtime.context.user_id, current_thread_id())
        reset = RemoveMessage(id=REMOVE_ALL_MESSAGES)
        return {"messages": [reset, *(m.to_message() for m in window), *state["messages"]]}

    def build(settings: Settings) -> CompiledStateGraph:
        builder = StateGraph(State, context_schema=Context)
        builder.add_node("window", checkpointed)
        builder.add_node("recall", partial(recall, services=services, settings=settings))
        builder.add_edge(START, "window")
        builder.add_edge("window", "recall")
        builder.add_edge("recall", END)
        return builder.compile(name="locomo_recall")

    return PerSettings(build)


def replay_context(thread: Any, model: str) -> Run:
    """Raw summaries, no reflection: the replay needs no model."""
    settings = Settings.from_env().override(
        summary_mode="raw",
        reflect_after=NO_REFLECTION,
        reflect_importance_threshold=float(NO_REFLECTION),
    )
    return Run(Context(user_id=thread.user_id, model=model), settings)


def recall_context(thread: Any, model: str, budget: int) -> Run:
    """The recall node's settings for the questions (``min_similarity`` left at its default)."""
    return replay_context(thread, model).override(
        recall_k=RECALL_K, memory_token_budget=max(0, budget)
    )


async def check_fresh(services: Services, thread: Any) -> None:
    """Refuse to replay into a user that already has memory (results would be mixed)."""
    if await services.window.window(thread.user_id, thread.thread_id) or (
        await services.memories.count(thread.user_id)
    ):
        raise RuntimeError(
            f"user {thread.user_id!r} already has memory in this database/prefix; "
            "run against a fresh database (the default) or another key prefix"
        )


@dataclass
class MemoryState:
    """What the pipeline holds for a thread after the replay."""

    window_ids: list[str]
    window_tokens: int
    summaries: int
    summarized_ids: set[str]
    counts: dict[str, int]


async def memory_state(services: Services, user_id: str, thread_id: str) -> MemoryState:
    """The thread's live window (newest first) and what long-term memory covers."""
    window = await services.window.window(user_id, thread_id)
    summaries = await services.memories.list(user_id, kind="summary", limit=10**7)
    return MemoryState(
        window_ids=[m.id for m in reversed(window)],
        window_tokens=message_tokens([m.to_message() for m in window]),
        summaries=len(summaries),
        summarized_ids={sid for s in summaries for sid in s.source_ids},
        counts=await services.memories.count(user_id),
    )


@contextlib.asynccontextmanager
async def accesses_rolled_back(services: Services, user_id: str) -> AsyncIterator[None]:
    """Restore the user's memory access statistics (recency signal) on exit."""
    table, params = services.memories.table, {"user_id": user_id}
    select = "SELECT langchain_id::text AS id, last_accessed_at AS at, access_count AS n"
    rows = await services.db.run((f'{select} FROM "{table}" WHERE user_id = :user_id', params))
    try:
        yield
    finally:
        columns = {k: [r[k] for r in rows] for k in ("id", "at", "n")}
        await services.db.run(
            (
                f'UPDATE "{table}" t SET last_accessed_at = s.at, access_count = s.n '
                "FROM unnest(CAST(:id AS uuid[]), CAST(:at AS timestamptz[]), "
                "CAST(:n AS integer[])) AS s(id, at, n) "
                "WHERE t.user_id = :user_id AND t.langchain_id = s.id",
                params | columns,
            ),
        )


def header(benchmark: str, started: float) -> dict[str, Any]:
    """What a report opens with: the benchmark, when, how long, and the code's commit."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    try:  # suffixed -dirty with local changes
        commit = git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain") else "")
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "benchmark": benchmark,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime_s": round(time.perf_counter() - started, 1),
        "git_commit": commit,
    }


@dataclass
class Bench:
    """A run's services, its replay and recall graphs, the guard model and the machine."""

    services: Services
    replay: PerSettings
    recall: PerSettings
    guard: GuardChatModel
    spec: str
    machine: dict[str, Any]

    async def recalled(
        self, run: Run, thread_id: str, question: tuple[str, str], keep: bool = False
    ) -> Shown:
        """The turn ids the recall node's items hold, best score first, and their tokens.

        ``question``: its text and message id. The user's accesses (the recency signal)
        are rolled back afterwards unless ``keep``.
        """
        user = run.ctx.user_id
        async with contextlib.nullcontext() if keep else accesses_rolled_back(self.services, user):
            message = HumanMessage(question[0], id=question[1])
            state = await self.recall.ainvoke({"messages": [message]}, thread_id, run)
        items = sorted(state.get("recalled") or [], key=lambda item: -(item.get("score") or 0.0))
        ids = [sid for item in items for sid in item.get("source_ids") or []]
        return list(dict.fromkeys(ids)), sum(int(item.get("tokens", 0)) for item in items)

    async def probe(
        self, points: dict[str, Run], thread_id: str, question: tuple[str, str]
    ) -> dict[str, Shown]:
        """What recall shows at each grid point, the accesses rolled back after each."""
        return {key: await self.recalled(run, thread_id, question) for key, run in points.items()}


@contextlib.asynccontextmanager
async def pipeline(a: Any, tag: str) -> AsyncIterator[Bench]:
    """Fresh servers (or ``--database-url``'s, left in place), MiniLM and both graphs."""
    guard = GuardChatModel()
    spec = register_chat_model(f"{tag}-guard-{uuid.uuid4().hex[:8]}", guard)
    async with (
        isolated_services(a.database_url, a.redis_url, a.key_prefix, tag=f"bench_{tag}") as env,
        services_session(EMBEDDING) as services,  # closed before the database is dropped
    ):
        replay, recall = build_replay_graph(services), build_recall_graph(services)
        yield Bench(services, replay, recall, guard, spec, await machine_info(env.database_url))
