"""The memory pipeline side of `bench.locomo`: replay a conversation, ask the recall node.

The replay graph runs the project's ``trim_window → summarize → consolidate → reflect``
nodes on the run's services (raw summaries, no reflection, a guard model that refuses
every call); the recall graph runs the project's ``recall`` node alone. The context a
question gets is the provenance of what recall returns plus the live window.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any, Protocol

import psycopg
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
from langchain_core.outputs import ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from bench.locomo_data import Conversation, Question
from bench.locomo_scoring import message_tokens
from graph.context import Context, current_thread_id
from graph.routing import bound, route_after_consolidate, route_after_summarize, route_after_trim
from graph.state import State
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.corpus_stats import corpus_tables
from nodes.consolidate import consolidate
from nodes.recall import recall
from nodes.reflect import reflect
from nodes.summarize import summarize
from nodes.trim_window import trim_window

RECALL_K = 5
"""The settings' default: the token budget, not ``recall_k``, limits hybrid recall."""
NO_REFLECTION = 10**6
REPLAY_NODES = (trim_window, summarize, consolidate, reflect)
INDEX_BUILD_MEMORY = "256MB"
"""``maintenance_work_mem`` of a rebuild of the turns' HNSW index (PostgreSQL's 64 MB
default builds a larger graph on disk, much more slowly)."""


@dataclass(frozen=True)
class Run:
    """A bench point: the run's context and the settings its graph is compiled with."""

    ctx: Context
    settings: Settings

    @property
    def user_id(self) -> str:
        """The run's user."""
        return self.ctx.user_id

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

    def graph(self, settings: Settings) -> CompiledStateGraph:
        """The graph compiled with ``settings``."""
        if settings not in self.graphs:
            self.graphs[settings] = self.build(settings)
        return self.graphs[settings]

    async def ainvoke(self, inputs: Any, config: Any, *, context: Run) -> Any:
        """Run the graph of ``context.settings`` with ``context.ctx``."""
        return await self.graph(context.settings).ainvoke(inputs, config, context=context.ctx)


class GuardChatModel(BaseChatModel):
    """The replay's chat model: counts calls and refuses them (raw mode needs none)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "locomo-guard"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        raise RuntimeError("the LoCoMo replay must not call a chat model")


def build_replay_graph(services: Services) -> PerSettings:
    """trim_window → summarize → consolidate → reflect, routed like the agent's graph.

    The nodes are bound to ``services`` and each run's settings as `graph.builder` binds them.
    """

    def build(settings: Settings) -> CompiledStateGraph:
        builder = StateGraph(State, context_schema=Context)
        for node in REPLAY_NODES:
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
    """The project's recall node, bound to ``services`` (query vectors cached).

    It runs on the messages the agent's checkpoint would hold: the thread's window, then
    the question (recall leaves out what the prompt shows already).
    """
    services = replace(services, embeddings=QueryCache(services.embeddings))

    async def checkpointed(state: State, runtime: Runtime[Context]) -> dict:
        window = await services.window.window(runtime.context.user_id, current_thread_id())
        window_messages = [m.to_message() for m in window]
        reset = RemoveMessage(id=REMOVE_ALL_MESSAGES)
        return {"messages": [reset, *window_messages, *state["messages"]]}

    def build(settings: Settings) -> CompiledStateGraph:
        builder = StateGraph(State, context_schema=Context)
        builder.add_node("window", checkpointed)
        builder.add_node("recall", partial(recall, services=services, settings=settings))
        builder.add_edge(START, "window")
        builder.add_edge("window", "recall")
        builder.add_edge("recall", END)
        return builder.compile(name="locomo_recall")

    return PerSettings(build)


def replay_context(conv: Conversation, model: str) -> Run:
    """Raw summaries, no reflection: the replay needs no model."""
    settings = Settings.from_env().override(
        summary_mode="raw",
        reflect_after=NO_REFLECTION,
        reflect_importance_threshold=float(NO_REFLECTION),
    )
    return Run(Context(user_id=conv.user_id, model=model), settings)


def recall_context(conv: Conversation, model: str, budget: int, recall_k: int) -> Run:
    """The recall node's settings for the questions (``min_similarity`` left at its default)."""
    return replay_context(conv, model).override(
        recall_k=recall_k, memory_token_budget=max(0, budget)
    )


def _thread_config(conv: Conversation) -> dict[str, Any]:
    return {"configurable": {"thread_id": conv.thread_id}}


async def check_fresh(services: Services, conv: Conversation) -> None:
    """Refuse to replay into a user that already has memory (results would be mixed)."""
    window = await services.window.window(conv.user_id, conv.thread_id)
    stored = await services.memories.count(conv.user_id)
    if window or stored:
        raise RuntimeError(
            f"user {conv.user_id!r} already has memory in this database/prefix; "
            "run against a fresh database (the default) or another key prefix"
        )


async def replay(
    graph: PerSettings, conv: Conversation, ctx: Run, advance: Callable[[], None]
) -> None:
    """Feed every turn, one graph invocation per turn."""
    config = _thread_config(conv)
    for turn in conv.turns:
        await graph.ainvoke({"messages": [turn.message()]}, config, context=ctx)
        advance()


@dataclass
class MemoryState:
    """What the pipeline holds for a conversation after the replay."""

    window_ids: set[str]
    window_tokens: int
    summaries: int
    summarized_ids: set[str]
    counts: dict[str, int]


async def memory_state(services: Services, conv: Conversation) -> MemoryState:
    """The live window and what long-term memory covers."""
    window = await services.window.window(conv.user_id, conv.thread_id)
    summaries = await services.memories.list(conv.user_id, kind="summary", limit=10**7)
    return MemoryState(
        window_ids={m.id for m in window},
        window_tokens=message_tokens([m.to_message() for m in window]),
        summaries=len(summaries),
        summarized_ids={sid for s in summaries for sid in s.source_ids},
        counts=await services.memories.count(conv.user_id),
    )


class Thread(Protocol):
    """A replayed thread: a LoCoMo `Conversation`, or a LongMemEval session."""

    user_id: str
    thread_id: str


async def reindex_turns(
    services: Services, threads: Sequence[Thread], context_weight: float
) -> int:
    """Index the threads' indexed turns again, with ``context_weight``; rebuild the index.

    `EpisodeIndex.index` on the turns the replay indexed (every summarized one), in log
    order: the vectors the replay would have stored with that `turn_context_weight`
    (a turn's vector does not depend on how the turns were batched), the keyword
    statistics and entity edges unchanged. A grid over an index-time knob needs no
    second replay. Every turn's row gets a new vector in place, so the HNSW index is
    rebuilt once the threads are done (`rebuild_turn_index`): the questions asked next
    search the graph a replay builds.
    """
    table, indexed = services.episodes.vector_table, 0
    for thread in threads:
        rows = await services.db.run(
            (
                f'SELECT message_id FROM "{table}" '
                "WHERE user_id = :user_id AND thread_id = :thread_id",
                {"user_id": thread.user_id, "thread_id": thread.thread_id},
            ),
        )
        ids = [r["message_id"] for r in rows]
        messages = await services.episodes.messages(thread.user_id, thread.thread_id, ids)
        indexed += await services.episodes.index(
            thread.user_id, thread.thread_id, messages, services.embeddings, context_weight
        )
    await rebuild_turn_index(services)
    return indexed


async def rebuild_turn_index(services: Services) -> None:
    """Rebuild the turns' HNSW index, then VACUUM (ANALYZE) the tables a re-index rewrote.

    Updated in place, each row leaves a dead entry in the HNSW graph (searched, then
    skipped) until a VACUUM, and on 1,000 similar turns the graph VACUUM repairs lets a
    scan reach only 200 to 600 of them, even with iterative scans (pgvector 0.8.6;
    `tests/integration_tests/test_bench_reindex.py`). A rebuild from the live rows is the
    graph a replay would have built; the entity edges, deleted and inserted again, and the
    corpus counts are vacuumed too.
    """
    table = services.episodes.vector_table
    async with await psycopg.AsyncConnection.connect(
        services.database_url, autocommit=True
    ) as conn:
        await conn.execute(f"SET maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
        await conn.execute(f'REINDEX INDEX "{table}_hnsw"')
        for name in (table, services.episodes.entities.table, *corpus_tables(table)):
            await conn.execute(f'VACUUM (ANALYZE) "{name}"')


@contextlib.asynccontextmanager
async def accesses_rolled_back(services: Services, user_id: str) -> AsyncIterator[None]:
    """Restore the user's memory access statistics (recency signal) on exit."""
    table = services.memories.table
    rows = await services.db.run(
        (
            f'SELECT langchain_id::text AS id, last_accessed_at, access_count FROM "{table}" '
            "WHERE user_id = :user_id",
            {"user_id": user_id},
        ),
    )
    try:
        yield
    finally:
        await services.db.run(
            (
                f'UPDATE "{table}" t SET last_accessed_at = s.at, access_count = s.n '
                "FROM unnest(CAST(:ids AS uuid[]), CAST(:ats AS timestamptz[]), "
                "CAST(:ns AS integer[])) AS s(id, at, n) "
                "WHERE t.user_id = :user_id AND t.langchain_id = s.id",
                {
                    "user_id": user_id,
                    "ids": [r["id"] for r in rows],
                    "ats": [r["last_accessed_at"] for r in rows],
                    "ns": [r["access_count"] for r in rows],
                },
            ),
        )


async def recall_context_ids(
    graph: PerSettings, conv: Conversation, ctx: Run, question: Question
) -> tuple[set[str], int]:
    """Provenance ids and tokens of what the recall node returns for ``question``."""
    message = HumanMessage(question.text, id=f"q{question.index}")
    state = await graph.ainvoke({"messages": [message]}, _thread_config(conv), context=ctx)
    recalled = state.get("recalled") or []
    ids = {sid for item in recalled for sid in item.get("source_ids") or []}
    return ids, sum(int(item.get("tokens", 0)) for item in recalled)


@dataclass
class Graphs:
    """The compiled graphs and the guard model of a run."""

    replay: PerSettings
    recall: PerSettings
    model_spec: str
    model: GuardChatModel
