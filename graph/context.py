"""Run-time configuration of the memory agent: one `Context` dataclass, in two tiers.

- **The user's knobs** (`knob`): who the run is for, the model, how recall is used. They
  are Studio's form, and a client of the server may set them per run (``context``).
- **The operator's knobs** (`operator_knob`): every limit, budget, batch size, timeout,
  threshold, mode and tuned weight, anything that bounds work or storage. They come from
  the deployment: a field left at its default is read from its upper-cased environment
  variable (``WINDOW_SIZE``, e.g. from ``langgraph.json``'s ``env`` file). The server
  refuses them from clients (`memory_graph_agent.auth.policy.run_context`, 403); code that
  builds a `Context` itself (the CLI, scripts, notebooks, tests) may set any of them.
  Recall's tuned ranking weights are one nested group of them, `RecallWeights`
  (``ctx.recall_weights.neighbour_weight``); each weight keeps its own variable
  (``NEIGHBOUR_WEIGHT``), and `memory_graph_agent.core.knobs.with_knobs` sets knobs by
  name in or out of the group.

Each field declares its tier, description and bounds (``ge``, ``gt``, ``le``, ``choices``)
once (`memory_graph_agent.core.knobs`): `Context.__post_init__` checks the bounds, the form
shows them, and the auth policy and the docs' tables follow the tier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from langgraph.config import get_config
from langgraph.runtime import get_runtime

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.core.knobs import (
    OPERATOR,
    SCHEDULER,
    USER,
    check_fields,
    form_schema,
    from_environment,
    knob,
    knob_fields,
    names_in,
    operator_group,
    operator_knob,
    scheduler_knob,
)
from memory_graph_agent.recall.weights import RecallWeights
from memory_graph_agent.services.models import default_chat_model
from memory_graph_agent.settings import parse_ttl_policy
from memory_graph_agent.turn.validation import check_id


@dataclass(kw_only=True)
class Context:
    """Knobs of the memory agent: the user's (Studio's form), then the operator's."""

    user_id: str = knob(
        "default-user", "Whose memory this run reads and writes (1-64 of [A-Za-z0-9_.@-])."
    )
    model: Annotated[str, {"__template_metadata__": {"kind": "llm"}}] = knob(
        "",
        "Chat model as 'provider:model' (e.g. 'openai:gpt-4o-mini'); 'local:smollm2' runs "
        "SmolLM2-135M in a local server process. Empty picks OpenAI when OPENAI_API_KEY is set, "
        "else the local model.",
    )
    recall_mode: str = knob(
        "auto",
        "'auto': recall searches every turn; 'tool': the model searches through the search_memory "
        "tool; 'flat': inject the user's hottest memories by importance, no search. Same token "
        "budget in all modes.",
        choices=("auto", "tool", "flat"),
    )
    memory_tools: bool = knob(
        True,
        "Bind search_memory/remember/forget/pin/unpin to the model when it supports tool calling.",
    )
    min_similarity: float = knob(
        0.2, "Cosine similarity below which a memory is ignored.", ge=0, le=1
    )
    newest_first: bool = knob(
        True,
        "A user's turn that speaks of the same subject as an older turn of another session "
        "(two of the query's words in common) is ranked just above it if it scored less: "
        "the update before the stale value. Changes no recall figure, only the order.",
    )
    # ====== the operator's knobs: from the environment, never from a client of the server ======
    # --- what one turn may carry and cost ---
    max_message_chars: int = operator_knob(
        32_000,
        "Longer messages are rejected (nothing is cut or stored).",
        ge=1,
    )
    max_turn_messages: int = operator_knob(100, "New messages one turn may add.", ge=1)
    max_tool_rounds: int = operator_knob(4, "Tool-call rounds allowed per turn.", ge=1)
    model_timeout_s: float = operator_knob(
        60.0, "Timeout of background model calls (summary, facts).", gt=0
    )
    # --- working window and prompt budget (tokens) ---
    window_size: int = operator_knob(20, "Messages kept in the Redis working window.", ge=1)
    window_token_share: float = operator_knob(
        0.0,
        "Share of memory_token_budget the working window may hold: older whole turns leave "
        "it (to the durable queue) beyond that, and recall fills what the window leaves of "
        "the budget. The newest two turns always stay (0: the window is those two turns).",
        ge=0,
        le=1,
    )
    memory_token_budget: int = operator_knob(
        1800,
        "Token budget of what a turn's prompt carries from the thread and memory: the "
        "working window and the recalled memories together (recall fills what the window "
        "leaves). The profile and the running summary have caps of their own.",
        ge=0,
    )
    profile_token_budget: int = operator_knob(
        400,
        "Token cap of the profile block: pinned, then most important facts first (each value "
        "cut to 60 tokens), then recent change notes, as many as fit; a last line counts the "
        "facts left out.",
        ge=0,
    )
    context_window_tokens: int = operator_knob(
        8192, "Context size of the chat model, in tokens.", ge=1
    )
    trigger_ratio: float = operator_knob(
        0.8,
        "Compress the window when the prompt exceeds this share of context_window_tokens.",
        gt=0,
        le=1,
    )
    keep_recent_turns: int = operator_knob(5, "Turns kept verbatim when compressing.", ge=1)
    change_note_days: int = operator_knob(
        7, "Profile changes this recent are noted in the prompt.", ge=0
    )
    # --- recall: how much it fetches, then how it ranks (the tuned weights, a group) ---
    recall_k: int = operator_knob(5, "Memories recalled per turn (top-k).", ge=1)
    recall_candidate_tokens: int = operator_knob(
        30,
        "Each turn channel fetches one candidate per this many tokens of the budget (at "
        "least 20). Chosen by cross-validation on LoCoMo.",
        ge=1,
    )
    speaker_turns: int = operator_knob(
        40,
        "How many of the nearest turns said by someone the query names (``Melanie``) "
        "join the dense turns' ranking (a second query, right after the dense one on its "
        "connection); 0 turns it off. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    recall_weights: RecallWeights = operator_group(
        RecallWeights,
        "How recall ranks what it found: fusion, links, the speaker, contextual turn vectors "
        "and the memory score; tuned by cross-validation on LoCoMo and LongMemEval. Each "
        "weight reads its own environment variable (NEIGHBOUR_WEIGHT).",
    )
    # --- memory formation: when and how summaries, facts and reflections are made ---
    memory_mode: str = operator_knob(
        "background",
        "'background': the turn's run ends after trim_window and summarize → consolidate → "
        "reflect run later, as a run of this graph on the thread's memory thread, so no reply "
        "waits for memory. 'inline': they run in the turn's own run. Background needs a "
        "scheduler (the CLI, `graph.background` and the LangGraph server have one); a graph "
        "compiled without one runs memory inline.",
        choices=("background", "inline"),
    )
    memory_delay_s: float = operator_knob(
        1.0,
        "Seconds a background memory run waits before it starts: the user reads the reply "
        "meanwhile, so the run does not compete with the next turn's recall, and work that "
        "arrives meanwhile joins it (langchain-ai/memory-template's after_seconds).",
        ge=0,
        le=3600,
    )
    summary_mode: str = operator_knob(
        "llm",
        "'llm' compresses evicted messages with the chat model; 'raw' stores their raw text (no "
        "model call, e.g. for benchmarks).",
        choices=("llm", "raw"),
    )
    summary_batch: int = operator_knob(5, "Pending messages needed before summarizing.", ge=1)
    reflect_after: int = operator_knob(
        10, "Summaries since the last reflection that trigger one.", ge=1
    )
    reflect_importance_threshold: float = operator_knob(
        5.0,
        "Summed importance of memories since the last reflection that triggers one (or "
        "reflect_after summaries, whichever comes first).",
    )
    merge_similarity: float = operator_knob(
        0.8,
        "A new summary this close (cosine) to an existing memory is "
        "merged/updated/strengthened/discarded by the model instead of just created.",
    )
    min_fact_importance: float = operator_knob(
        0.5, "Extracted facts below this importance are dropped."
    )
    checkpoint_retention: str = operator_knob(
        "keep_latest",
        "What maintenance keeps of each conversation's and memory run's checkpoints: "
        "'keep_latest' keeps one per thread (the latest, with its pending writes: all a run "
        "needs to resume; no step back to older ones), 'off' keeps every checkpoint. A thread "
        "with a run in flight or memory work under way (a batch leased) is left whole.",
        choices=("keep_latest", "off"),
    )
    fact_rules: str = operator_knob(
        "auto",
        "Rule-based extraction of explicit self-statements (name, city, preferred language...) "
        "merged with the model's facts: 'on', 'off', or 'auto' (on for local models, which map "
        "statements to keys unreliably).",
        choices=("auto", "on", "off"),
    )
    # --- the durable queue of evicted messages ---
    lease_seconds: float = operator_knob(
        120.0, "How long a claimed batch stays leased to its worker.", gt=0
    )
    max_attempts: int = operator_knob(
        5, "Failed stores of a batch before it is dead-lettered.", ge=1
    )
    retry_backoff_s: float = operator_knob(
        2.0, "First retry delay; doubles with each failure.", ge=0
    )
    # --- retention: expiry, eviction, compaction and the decision log, by maintenance ---
    ttl_policy: str = operator_knob(
        "0.9:never,0.5:30,0:7",
        "Expiry by importance, 'min_importance:days|never' pairs: facts and memories at or above a"
        " threshold live that long; pinned items never expire.",
    )
    evict_below_importance: float = operator_knob(
        0.1, "Maintenance evicts memories below this importance"
    )
    evict_after_days: int = operator_knob(180, "... and older than this many days.", ge=0)
    duplicate_similarity: float = operator_knob(
        0.95, "Maintenance compacts active memories at least this similar."
    )
    decision_retention_days: int = operator_knob(
        180,
        "Maintenance deletes memory decisions (the audit log of why each memory was created, "
        "merged or removed) older than this many days; 0 keeps them forever. A thread's "
        "decisions stay while it has memory work pending or dead-lettered (a retry reads them).",
        ge=0,
    )
    idle_thread_days: int = operator_knob(
        30,
        "Maintenance archives a thread nobody wrote to for this many days, as a session end "
        "does (its working window is summarized into memory), then deletes its window, seen-set "
        "and running summary from Redis; its owner can still come back to it. 0 keeps them "
        "forever. A thread whose memory batch is leased or dead-lettered, or with a turn in the "
        "last day, is left alone.",
        ge=0,
    )
    # ====== set by the memory scheduler on the memory runs it starts ======
    memory_of: str = scheduler_knob(
        "",
        "Set by the scheduler on memory runs only: the conversation thread whose memory the "
        "run forms (it starts at trim_window, on the thread's memory thread). Leave empty; "
        "the server accepts it only on that memory thread of the caller's.",
    )

    def __post_init__(self) -> None:
        """Fill defaults from the environment, resolve auto models and check every bound."""
        for name, value in from_environment(self).items():
            setattr(self, name, value)
        check_fields(self)
        if not self.model:
            self.model = default_chat_model()
        self.user_id = validate_id(self.user_id, "user_id")
        if self.memory_of:
            self.memory_of = validate_id(self.memory_of, "memory_of")
        self._ttl_rules = parse_ttl_policy(self.ttl_policy)

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        """Studio's form: the user's knobs with their bounds (and the scheduler's field)."""
        return form_schema(cls, handler.resolve_ref_schema(handler(core_schema)))

    def ttl_days(self, importance: float, pinned: bool = False) -> float | None:
        """Days an item of this importance lives (``None``: never expires)."""
        if pinned:
            return None
        for threshold, days in self._ttl_rules:
            if importance >= threshold:
                return days
        return self._ttl_rules[-1][1]


USER_KNOBS = names_in(Context, USER)
"""What a client of the server may set in a run's context."""
OPERATOR_KNOBS = names_in(Context, OPERATOR)
"""What only the deployment's environment (or code that builds a `Context`) sets: the
``recall_weights`` group and each of its weights by name among them."""
KNOB_FIELDS = knob_fields(Context)
"""Every knob's declaration by name, the recall weights' among them (a name is unique)."""
SCHEDULER_KNOBS = names_in(Context, SCHEDULER)
"""What the memory scheduler sets on the memory runs it starts (``memory_of``)."""


DEFAULT_THREAD = "default"


class MemoryScheduler(Protocol):
    """Starts the memory run of a thread soon, without waiting for it (`graph.background`)."""

    async def __call__(
        self, context: Context, thread_id: str, compress: bool, after_s: float | None = None
    ) -> None:
        """Schedule it; raise if it cannot be scheduled (the work then waits, durably).

        A turn whose scheduler raises does not form memory itself (it may run with
        durability ``"exit"``, `graph.durability`): the messages stay in the pending
        list for the next turn's memory run or the session end.

        It starts ``after_s`` seconds from now if given, else after ``context.memory_delay_s``.
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
