"""The run's context: what a caller chooses per run, and nothing else.

Studio shows it as the run's form; a client of the server may set every field (the server
sets ``user_id`` to the authenticated caller). A field left at its default is read from
the environment variable of its name in upper case (``MODEL``), as in the LangGraph
templates. The deployment's settings (limits, budgets, batches, thresholds, modes,
weights) are not here: they are `memory_graph_agent.settings.Settings`, handed once to
`graph.builder.build_graph`, so no run carries them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal, Protocol, get_args

from langgraph.config import get_config
from langgraph.runtime import get_runtime

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.services.models import default_chat_model
from memory_graph_agent.turn.validation import check_id

RecallMode = Literal["auto", "tool", "flat"]


def _field(default: Any, description: str) -> Any:
    return field(default=default, metadata={"description": description})


@dataclass(kw_only=True)
class Context:
    """What a run of the memory agent is for: the user, the model, how memory is used."""

    user_id: str = _field(
        "default-user", "Whose memory this run reads and writes (1-64 of [A-Za-z0-9_.@-])."
    )
    model: Annotated[str, {"__template_metadata__": {"kind": "llm"}}] = _field(
        "",
        "Chat model as 'provider:model' (e.g. 'openai:gpt-4o-mini'); 'local:smollm2' runs "
        "SmolLM2-135M in a local server process. Empty picks OpenAI when OPENAI_API_KEY is "
        "set, else the local model.",
    )
    recall_mode: RecallMode = _field(
        "auto",
        "'auto': recall searches every turn; 'tool': the model searches through the "
        "search_memory tool; 'flat': inject the user's hottest memories by importance, no "
        "search. Same token budget in all modes.",
    )
    memory_tools: bool = _field(
        True,
        "Bind search_memory/remember/forget/pin/unpin to the model when it supports tool calling.",
    )
    # The memory scheduler's field, not a caller's choice (to be redesigned separately).
    memory_of: str = _field(
        "",
        "Set by the scheduler on memory runs only: the conversation thread whose memory the "
        "run forms (it starts at backlog, on the thread's memory thread). Leave empty; "
        "the server accepts it only on that memory thread of the caller's.",
    )

    def __post_init__(self) -> None:
        """Fill defaults from the environment, resolve an empty model, check the values."""
        for f in fields(self):
            raw = os.environ.get(f.name.upper(), "")
            if raw and getattr(self, f.name) == f.default:
                value = (
                    raw.strip().lower() in {"1", "true", "yes", "on"} if f.type == "bool" else raw
                )
                setattr(self, f.name, value)
        if self.recall_mode not in get_args(RecallMode):
            raise ValueError(
                f"recall_mode must be 'auto', 'tool' or 'flat', got {self.recall_mode!r}"
            )
        self.model = self.model or default_chat_model()
        self.user_id = validate_id(self.user_id, "user_id")
        if self.memory_of:
            self.memory_of = validate_id(self.memory_of, "memory_of")


CONTEXT_FIELDS = frozenset(f.name for f in fields(Context))
"""What a run's context may name: a client of the server sets them (``memory_of`` aside)."""


DEFAULT_THREAD = "default"
QUERY_VECTOR = "__memory_query_vector"
"""The run's ``configurable`` key of its question's embedding, started with the run
(`graph.prefetch`; ``__``: never persisted)."""


@dataclass(frozen=True)
class StartedVector:
    """The embedding of a run's question, started with the run."""

    question: str
    vector: asyncio.Future[list[float]]


class MemoryScheduler(Protocol):
    """Starts the memory run of a thread soon, without waiting for it (`graph.background`)."""

    async def __call__(
        self,
        context: Context,
        thread_id: str,
        compress: bool,
        after_s: float | None = None,
        *,
        delay_s: float = 0.0,
    ) -> None:
        """Schedule it; raise if it cannot be scheduled (the work then waits, durably).

        A turn whose scheduler raises does not form memory itself (it may run with
        durability ``"exit"``, `graph.durability`): the messages stay in the pending
        list for the next turn's memory run or the session end.

        A turn's run starts ``delay_s`` (``settings.formation.delay_s``) from now, and work
        that arrives meanwhile joins it; ``after_s`` asks for another run then (a batch
        leased by another worker).
        """


def current_task() -> tuple[str, int, str] | None:
    """``(run_id, step, node)`` of the running node of a server run, else None.

    The LangGraph server's ``configurable.run_id`` is kept across its retries, and a
    retried run resumes at the step that was running; the CLI and tests pass no run id.
    """
    config = get_config()
    run_id = config.get("configurable", {}).get("run_id")
    meta = config.get("metadata", {})
    if not run_id or "langgraph_step" not in meta:
        return None
    return str(run_id), int(meta["langgraph_step"]), str(meta.get("langgraph_node", ""))


def current_thread_id() -> str:
    """The conversation thread of the run, validated, never from state.

    ``context.memory_of`` for a memory run (it runs on the thread's memory thread), else
    ``configurable.thread_id`` (``default`` if unset).
    """
    memory_of = getattr(get_runtime().context, "memory_of", "")
    configurable = get_config().get("configurable", {})
    thread = memory_of or configurable.get("thread_id") or DEFAULT_THREAD
    return check_id(str(thread), "thread_id")


def query_vector(query: str) -> Awaitable[list[float]] | None:
    """The run's embedding of ``query`` started with the run, else ``None``."""
    started = get_config().get("configurable", {}).get(QUERY_VECTOR)
    if isinstance(started, StartedVector) and started.question == query:
        if not started.vector.cancelled():
            return started.vector
    return None
