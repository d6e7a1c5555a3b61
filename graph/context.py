"""Run-time configuration of the memory agent: one `Context` dataclass.

A field left at its default is read from its upper-cased environment variable (``WINDOW_SIZE``),
so the knobs work the same from Studio's form, the CLI and ``langgraph.json``'s ``env`` file.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from typing import Annotated, Any, Protocol

from langgraph.config import get_config
from langgraph.runtime import get_runtime

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.services.models import default_chat_model
from memory_graph_agent.turn.validation import check_id


def knob(default: Any, description: str) -> Any:
    """A `Context` field with its description (shown in Studio's form)."""
    return field(default=default, metadata={"description": description})


@dataclass(kw_only=True)
class Context:
    """Knobs of the memory agent, shown as a form in LangGraph Studio."""

    user_id: str = knob(
        "default-user", "Whose memory this run reads and writes (1-64 of [A-Za-z0-9_.@-])."
    )
    model: Annotated[str, {"__template_metadata__": {"kind": "llm"}}] = knob(
        "",
        "Chat model as 'provider:model' (e.g. 'openai:gpt-4o-mini'); 'local:smollm2' runs "
        "SmolLM2-135M in a local server process. Empty picks OpenAI when OPENAI_API_KEY is set, "
        "else the local model.",
    )
    window_size: int = knob(20, "Messages kept in the Redis working window.")
    window_token_share: float = knob(
        0.5,
        "Share of memory_token_budget the working window may hold: older whole turns leave "
        "it (to the durable queue) beyond that, and recall fills what the window leaves of "
        "the budget. The newest two turns always stay.",
    )
    summary_batch: int = knob(5, "Pending messages needed before summarizing.")
    reflect_after: int = knob(10, "Summaries since the last reflection that trigger one.")
    recall_k: int = knob(5, "Memories recalled per turn (top-k).")
    min_similarity: float = knob(0.2, "Cosine similarity below which a memory is ignored.")
    neighbour_weight: float = knob(
        0.5,
        "Share of a recalled turn's score its neighbours (the turns said just before and "
        "after) get; 0 turns neighbours off. Chosen by cross-validation on LoCoMo.",
    )
    summary_turn_weight: float = knob(
        0.0,
        "Weight of a recalled summary's rank in the ranking of the turns it was made from; "
        "0 turns it off. Off by default: it helped LoCoMo and cost LongMemEval more "
        "(bench.joint_cv).",
    )
    recall_rrf_k: int = knob(
        5,
        "The constant k of recall's reciprocal-rank fusion (1 / (k + rank)): smaller "
        "trusts the top ranks more. Chosen by cross-validation on LoCoMo.",
    )
    topic_weight: float = knob(
        0.0,
        "Share of the best turns' score lent to turns that share their rarer words "
        "(topic links, pseudo-relevance feedback in the candidates); 0 turns it off. Off by "
        "default: it helped LoCoMo and cost LongMemEval more (bench.joint_cv).",
    )
    entity_weight: float = knob(
        0.0,
        "Share of the best turns' score lent to the user's other turns that share their "
        "entity keys (names; edges stored with each turn), reaching turns no search "
        "found, at one more statement after the searches; 0 (off) by default: on LoCoMo "
        "0.1 added 0.1 point of recall for ~4 ms p50 of the read path.",
    )
    speaker_weight: float = knob(
        1.5,
        "How much more a turn counts when the query names its speaker (``Melanie`` in "
        '"What books has Melanie read?"): its RRF is multiplied by 1 + this; 0 turns it '
        "off. Chosen by cross-validation on LoCoMo.",
    )
    speaker_turns: int = knob(
        40,
        "How many of the nearest turns said by someone the query names (``Melanie``) "
        "join the dense turns' ranking (a second query, right after the dense one on its "
        "connection); 0 turns it off. Chosen by cross-validation on LoCoMo.",
    )
    turn_context_weight: float = knob(
        0.25,
        "Share of each adjacent turn's embedding (the turns said just before and after) "
        "mixed into a raw turn's stored vector when it is indexed, so a short answer is "
        "found by the question it answers; 0 stores each turn's own vector. Applies to "
        "turns indexed from then on. Chosen by cross-validation on LoCoMo.",
    )
    newest_first: bool = knob(
        True,
        "A user's turn that speaks of the same subject as an older turn of another session "
        "(two of the query's words in common) is ranked just above it if it scored less: "
        "the update before the stale value. Changes no recall figure, only the order.",
    )
    recall_candidate_tokens: int = knob(
        30,
        "Each turn channel fetches one candidate per this many tokens of the budget (at "
        "least 20). Chosen by cross-validation on LoCoMo.",
    )
    memory_token_budget: int = knob(
        1800,
        "Token budget of what a turn's prompt carries from the thread and memory: the "
        "working window and the recalled memories together (recall fills what the window "
        "leaves). The profile and the running summary have caps of their own.",
    )
    profile_token_budget: int = knob(
        400,
        "Token cap of the profile block: pinned, then most important facts first (each value "
        "cut to 60 tokens), then recent change notes, as many as fit; a last line counts the "
        "facts left out.",
    )
    min_fact_importance: float = knob(0.5, "Extracted facts below this importance are dropped.")
    summary_mode: str = knob(
        "llm",
        "'llm' compresses evicted messages with the chat model; 'raw' stores their raw text (no "
        "model call, e.g. for benchmarks).",
    )
    memory_mode: str = knob(
        "background",
        "'background': the turn's run ends after trim_window and summarize → consolidate → "
        "reflect run later, as a run of this graph on the thread's memory thread, so no reply "
        "waits for memory. 'inline': they run in the turn's own run. Background needs a "
        "scheduler (the CLI, `graph.background` and the LangGraph server have one); a graph "
        "compiled without one runs memory inline.",
    )
    memory_delay_s: float = knob(
        1.0,
        "Seconds a background memory run waits before it starts: the user reads the reply "
        "meanwhile, so the run does not compete with the next turn's recall, and work that "
        "arrives meanwhile joins it (langchain-ai/memory-template's after_seconds).",
    )
    memory_give_way_s: float = knob(
        0.25,
        "Memory work (summarize, consolidate, reflect, and every node of a memory run) waits "
        "before each store call while a turn of this process is in load_profile or recall, "
        "at most this many seconds per call; 0 turns it off. Keeps background memory off "
        "the next turn's time to first token on a small machine.",
    )
    memory_of: str = knob(
        "",
        "Set by the scheduler on memory runs only: the conversation thread whose memory the "
        "run forms (it starts at trim_window, on the thread's memory thread). Leave empty.",
    )
    max_message_chars: int = knob(
        32_000, "Longer messages are rejected (nothing is cut or stored)."
    )
    max_turn_messages: int = knob(100, "New messages one turn may add.")
    lease_seconds: float = knob(120.0, "How long a claimed batch stays leased to its worker.")
    max_attempts: int = knob(5, "Failed stores of a batch before it is dead-lettered.")
    retry_backoff_s: float = knob(2.0, "First retry delay; doubles with each failure.")
    model_timeout_s: float = knob(60.0, "Timeout of background model calls (summary, facts).")
    # --- recall ranking (score = relevance + recency + importance, each in [0, 1]) ---
    recall_mode: str = knob(
        "auto",
        "'auto': recall searches every turn; 'tool': the model searches through the search_memory "
        "tool; 'flat': inject the user's hottest memories by importance, no search. Same token "
        "budget in all modes.",
    )
    weight_relevance: float = knob(1.0, "Weight of the fused (vector + keyword) relevance.")
    weight_recency: float = knob(
        0.0,
        "Weight of recency (exponential decay since last access). Off by default: on LoCoMo it "
        "boosts memories recalled for earlier, unrelated questions (0.829 at 0, 0.825 at 0.5; "
        "in-budget 0.776 vs 0.724).",
    )
    weight_importance: float = knob(0.5, "Weight of the memory's importance.")
    recency_half_life_days: float = knob(30.0, "Days after which the recency signal halves.")
    # --- consolidation, reflection, decay ---
    merge_similarity: float = knob(
        0.8,
        "A new summary this close (cosine) to an existing memory is "
        "merged/updated/strengthened/discarded by the model instead of just created.",
    )
    reflect_importance_threshold: float = knob(
        5.0,
        "Summed importance of memories since the last reflection that triggers one (or "
        "reflect_after summaries, whichever comes first).",
    )
    ttl_policy: str = knob(
        "0.9:never,0.5:30,0:7",
        "Expiry by importance, 'min_importance:days|never' pairs: facts and memories at or above a"
        " threshold live that long; pinned items never expire.",
    )
    change_note_days: int = knob(7, "Profile changes this recent are noted in the prompt.")
    evict_below_importance: float = knob(0.1, "Maintenance evicts memories below this importance")
    evict_after_days: int = knob(180, "... and older than this many days.")
    duplicate_similarity: float = knob(
        0.95, "Maintenance compacts active memories at least this similar."
    )
    fact_rules: str = knob(
        "auto",
        "Rule-based extraction of explicit self-statements (name, city, preferred language...) "
        "merged with the model's facts: 'on', 'off', or 'auto' (on for local models, which map "
        "statements to keys unreliably).",
    )
    # --- short-term compression by tokens ---
    context_window_tokens: int = knob(8192, "Context size of the chat model, in tokens.")
    trigger_ratio: float = knob(
        0.8, "Compress the window when the prompt exceeds this share of context_window_tokens."
    )
    keep_recent_turns: int = knob(5, "Turns kept verbatim when compressing.")
    # --- memory tools ---
    memory_tools: bool = knob(
        True,
        "Bind search_memory/remember/forget/pin/unpin to the model when it supports tool calling.",
    )
    max_tool_rounds: int = knob(4, "Tool-call rounds allowed per turn.")

    def __post_init__(self) -> None:
        """Fill defaults from the environment, resolve auto models and validate."""
        for f in fields(self):
            if f.default is MISSING or getattr(self, f.name) != f.default:
                continue
            raw = os.environ.get(f.name.upper())
            if raw is not None and raw != "":
                setattr(self, f.name, _coerce(raw, type(f.default), f.name))
        if not self.model:
            self.model = default_chat_model()
        self.user_id = validate_id(self.user_id, "user_id")
        if self.memory_of:
            self.memory_of = validate_id(self.memory_of, "memory_of")
        for name in (
            "window_size",
            "summary_batch",
            "reflect_after",
            "recall_k",
            "max_message_chars",
            "max_turn_messages",
            "keep_recent_turns",
            "context_window_tokens",
            "max_tool_rounds",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.window_token_share <= 1.0:
            raise ValueError(f"window_token_share must be in [0, 1], got {self.window_token_share}")
        if not 0.0 <= self.neighbour_weight <= 1.0:
            raise ValueError(f"neighbour_weight must be in [0, 1], got {self.neighbour_weight}")
        if self.summary_turn_weight < 0:
            raise ValueError("summary_turn_weight must be >= 0")
        if self.recall_rrf_k < 0:
            raise ValueError(f"recall_rrf_k must be >= 0, got {self.recall_rrf_k}")
        if self.topic_weight < 0:
            raise ValueError(f"topic_weight must be >= 0, got {self.topic_weight}")
        if self.speaker_weight < 0:
            raise ValueError(f"speaker_weight must be >= 0, got {self.speaker_weight}")
        if self.entity_weight < 0:
            raise ValueError(f"entity_weight must be >= 0, got {self.entity_weight}")
        if self.speaker_turns < 0:
            raise ValueError(f"speaker_turns must be >= 0, got {self.speaker_turns}")
        if self.turn_context_weight < 0:
            raise ValueError(f"turn_context_weight must be >= 0, got {self.turn_context_weight}")
        if self.recall_candidate_tokens < 1:
            raise ValueError("recall_candidate_tokens must be >= 1")
        if not 0.0 <= self.min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be in [0, 1], got {self.min_similarity}")
        if self.summary_mode not in ("llm", "raw"):
            raise ValueError(f"summary_mode must be 'llm' or 'raw', got {self.summary_mode!r}")
        if not 0 <= self.memory_delay_s <= 3600:
            raise ValueError(f"memory_delay_s must be in [0, 3600], got {self.memory_delay_s}")
        if not 0 <= self.memory_give_way_s <= 60:
            raise ValueError(f"memory_give_way_s must be in [0, 60], got {self.memory_give_way_s}")
        if self.memory_mode not in ("background", "inline"):
            raise ValueError(
                f"memory_mode must be 'background' or 'inline', got {self.memory_mode!r}"
            )
        for name in ("memory_token_budget", "profile_token_budget"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.recall_mode not in ("auto", "tool", "flat"):
            raise ValueError(
                f"recall_mode must be 'auto', 'tool' or 'flat', got {self.recall_mode!r}"
            )
        if self.fact_rules not in ("auto", "on", "off"):
            raise ValueError(f"fact_rules must be 'auto', 'on' or 'off', got {self.fact_rules!r}")
        if not 0.0 < self.trigger_ratio <= 1.0:
            raise ValueError(f"trigger_ratio must be in (0, 1], got {self.trigger_ratio}")
        for name in ("weight_relevance", "weight_recency", "weight_importance"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.recency_half_life_days <= 0:
            raise ValueError("recency_half_life_days must be > 0")
        self._ttl_rules = parse_ttl_policy(self.ttl_policy)

    def ttl_days(self, importance: float, pinned: bool = False) -> float | None:
        """Days an item of this importance lives (``None``: never expires)."""
        if pinned:
            return None
        for threshold, days in self._ttl_rules:
            if importance >= threshold:
                return days
        return self._ttl_rules[-1][1]


def parse_ttl_policy(policy: str) -> list[tuple[float, float | None]]:
    """Parse ``"0.9:never,0.5:30,0:7"`` into rules sorted by threshold, highest first."""
    rules: list[tuple[float, float | None]] = []
    for part in policy.split(","):
        if not part.strip():
            continue
        try:
            threshold, days = part.split(":")
            rule = (float(threshold), None if days.strip().lower() == "never" else float(days))
        except ValueError as exc:
            raise ValueError(
                f"ttl_policy must look like '0.9:never,0.5:30,0:7', got {policy!r}"
            ) from exc
        if rule[1] is not None and rule[1] <= 0:
            raise ValueError(f"ttl_policy days must be > 0, got {part!r}")
        rules.append(rule)
    if not rules:
        raise ValueError("ttl_policy needs at least one 'min_importance:days' rule")
    return sorted(rules, key=lambda r: -r[0])


def _coerce(raw: str, kind: type, name: str) -> Any:
    """Convert an environment string to the field's type with a clear error."""
    try:
        if kind is bool:
            return raw.strip().lower() in {"1", "true", "yes", "on"}
        return kind(raw)
    except ValueError as exc:
        raise ValueError(
            f"environment variable {name.upper()}={raw!r} is not a valid {kind.__name__}"
        ) from exc


DEFAULT_THREAD = "default"


class MemoryScheduler(Protocol):
    """Starts the memory run of a thread soon, without waiting for it (`graph.background`)."""

    async def __call__(
        self, context: Context, thread_id: str, compress: bool, after_s: float | None = None
    ) -> None:
        """Schedule it; raise if it cannot be scheduled (memory then runs inline).

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
