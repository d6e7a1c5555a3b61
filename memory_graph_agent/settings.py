"""The deployment's settings: one frozen, typed object, grouped by concern.

A deployment sets them once (`Settings.from_env`, or `Settings(...)` in code) and hands
them to `graph.builder.build_graph`, `add_memory`, the maintenance graph and
`MemoryMiddleware`; a run never carries them, so no client of the server can reach one.
Each field reads the environment variable of its ``env`` name (``WINDOW_SIZE``), which is
its own name in upper case unless declared. Bounds and choices live in the fields.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import reduce
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo


def setting(default: Any, description: str, *, env: str | None = None, **bounds: Any) -> Any:
    """A field with its description, its bounds and (when not its own name) its variable."""
    extra = {"env": env} if env else None
    return Field(default, description=description, json_schema_extra=extra, **bounds)


class Group(BaseModel):
    """A frozen group of settings: unknown names fail, values are checked on creation."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class LimitSettings(Group):
    """What one turn may carry and cost."""

    max_message_chars: int = setting(
        32_000, "Longer messages are rejected (nothing is cut or stored).", ge=1
    )
    max_turn_messages: int = setting(100, "New messages one turn may add.", ge=1)
    max_tool_rounds: int = setting(4, "Tool-call rounds allowed per turn.", ge=1)
    model_timeout_s: float = setting(
        60.0, "Timeout of background model calls (summary, facts).", gt=0
    )


class WindowSettings(Group):
    """The working window and the prompt's budgets (tokens)."""

    size: int = setting(20, "Messages kept in the Redis working window.", env="WINDOW_SIZE", ge=1)
    token_share: float = setting(
        0.0,
        "Share of memory_token_budget the working window may hold: older whole turns leave "
        "it (to the durable queue) beyond that, and recall fills what the window leaves of "
        "the budget. The newest two turns always stay (0: the window is those two turns).",
        env="WINDOW_TOKEN_SHARE",
        ge=0,
        le=1,
    )
    memory_token_budget: int = setting(
        1800,
        "Token budget of what a turn's prompt carries from the thread and memory: the "
        "working window and the recalled memories together (recall fills what the window "
        "leaves). The profile and the running summary have caps of their own.",
        ge=0,
    )
    profile_token_budget: int = setting(
        400,
        "Token cap of the profile block: pinned, then most important facts first (each value "
        "cut to 60 tokens), then recent change notes, as many as fit; a last line counts the "
        "facts left out.",
        ge=0,
    )
    context_window_tokens: int = setting(8192, "Context size of the chat model, in tokens.", ge=1)
    trigger_ratio: float = setting(
        0.8,
        "Compress the window when the prompt exceeds this share of context_window_tokens.",
        gt=0,
        le=1,
    )
    keep_recent_turns: int = setting(5, "Turns kept verbatim when compressing.", ge=1)
    change_note_days: int = setting(7, "Profile changes this recent are noted in the prompt.", ge=0)


class RecallWeights(Group):
    """How recall ranks what it found, tuned by cross-validation on LoCoMo and LongMemEval."""

    neighbour_weight: float = setting(
        0.5,
        "Share of a recalled turn's score its neighbours (the turns said just before and "
        "after) get; 0 turns neighbours off. Chosen by cross-validation on LoCoMo.",
        ge=0,
        le=1,
    )
    neighbour_reach: int = setting(
        2,
        "Turns each way a recalled turn's neighbours reach; the nth gets neighbour_weight^n.",
        ge=1,
        le=3,
    )
    summary_turn_weight: float = setting(
        0.0,
        "Weight of a recalled summary's rank in the ranking of the turns it was made from; "
        "0 turns it off. Off by default: it helped LoCoMo and cost LongMemEval more "
        "(bench.joint_cv).",
        ge=0,
    )
    recall_rrf_k: int = setting(
        5,
        "The constant k of recall's reciprocal-rank fusion (1 / (k + rank)): smaller "
        "trusts the top ranks more. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    topic_weight: float = setting(
        0.0,
        "Share of the best turns' score lent to turns that share their rarer words "
        "(topic links, pseudo-relevance feedback in the candidates); 0 turns it off. Off by "
        "default: it helped LoCoMo and cost LongMemEval more (bench.joint_cv).",
        ge=0,
    )
    entity_weight: float = setting(
        0.0,
        "Share of the best turns' score lent to the user's other turns that share their "
        "entity keys (names; edges stored with each turn), reaching turns no search "
        "found, at one more statement after the searches; 0 (off) by default: on LoCoMo "
        "0.1 added 0.1 point of recall for ~4 ms p50 of the read path.",
        ge=0,
    )
    speaker_weight: float = setting(
        1.5,
        "How much more a turn counts when the query names its speaker (``Melanie`` in "
        '"What books has Melanie read?"): its RRF is multiplied by 1 + this; 0 turns it '
        "off. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    turn_context_weight: float = setting(
        0.25,
        "Share of each adjacent turn's embedding (the turns said just before and after) "
        "mixed into a raw turn's stored vector when it is indexed, so a short answer is "
        "found by the question it answers; 0 stores each turn's own vector. Applies to "
        "turns indexed from then on. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    weight_relevance: float = setting(
        1.0, "Weight of the fused (vector + keyword) relevance.", ge=0
    )
    weight_recency: float = setting(
        0.0,
        "Weight of recency (exponential decay since last access). Off by default: on LoCoMo it "
        "boosts memories recalled for earlier, unrelated questions (0.829 at 0, 0.825 at 0.5; "
        "in-budget 0.776 vs 0.724).",
        ge=0,
    )
    weight_importance: float = setting(0.5, "Weight of the memory's importance.", ge=0)
    recency_half_life_days: float = setting(
        30.0, "Days after which the recency signal halves.", gt=0
    )


class RecallSettings(Group):
    """How much recall fetches, what it keeps, and how it ranks (``weights``)."""

    k: int = setting(5, "Memories recalled per turn (top-k).", env="RECALL_K", ge=1)
    candidate_tokens: int = setting(
        30,
        "Each turn channel fetches one candidate per this many tokens of the budget (at "
        "least 20). Chosen by cross-validation on LoCoMo.",
        env="RECALL_CANDIDATE_TOKENS",
        ge=1,
    )
    speaker_turns: int = setting(
        40,
        "How many of the nearest turns said by someone the query names (``Melanie``) "
        "join the dense turns' ranking (a second query, right after the dense one on its "
        "connection); 0 turns it off. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    min_similarity: float = setting(
        0.2, "Cosine similarity below which a memory is ignored.", ge=0, le=1
    )
    conversation_similarity: float = setting(
        0.4,
        "When recall's best match (cosine) is below this, the thread's older turns fill first.",
        ge=0,
        le=1,
    )
    newest_first: bool = setting(
        True,
        "A user's turn that speaks of the same subject as an older turn of another session "
        "(two of the query's words in common) is ranked just above it if it scored less: "
        "the update before the stale value. Changes no recall figure, only the order.",
    )
    weights: RecallWeights = Field(
        default_factory=RecallWeights,
        description="How recall ranks what it found; each weight reads its own variable.",
    )


class FormationSettings(Group):
    """When and how summaries, facts and reflections are made."""

    mode: Literal["background", "inline"] = setting(
        "background",
        "'background': the turn's run ends after trim_window and summarize → consolidate → "
        "reflect run later, as a run of this graph on the thread's memory thread, so no reply "
        "waits for memory. 'inline': they run in the turn's own run. Background needs a "
        "scheduler (the CLI, `graph.background` and the LangGraph server have one); a graph "
        "compiled without one runs memory inline.",
        env="MEMORY_MODE",
    )
    delay_s: float = setting(
        1.0,
        "Seconds a background memory run waits before it starts: the user reads the reply "
        "meanwhile, so the run does not compete with the next turn's recall, and work that "
        "arrives meanwhile joins it (langchain-ai/memory-template's after_seconds).",
        env="MEMORY_DELAY_S",
        ge=0,
        le=3600,
    )
    summary_mode: Literal["llm", "raw"] = setting(
        "llm",
        "'llm' compresses evicted messages with the chat model; 'raw' stores their raw text (no "
        "model call, e.g. for benchmarks).",
    )
    summary_batch: int = setting(5, "Pending messages needed before summarizing.", ge=1)
    reflect_after: int = setting(10, "Summaries since the last reflection that trigger one.", ge=1)
    reflect_importance_threshold: float = setting(
        5.0,
        "Summed importance of memories since the last reflection that triggers one (or "
        "reflect_after summaries, whichever comes first).",
    )
    merge_similarity: float = setting(
        0.8,
        "A new summary this close (cosine) to an existing memory is "
        "merged/updated/strengthened/discarded by the model instead of just created.",
    )
    min_fact_importance: float = setting(0.5, "Extracted facts below this importance are dropped.")
    fact_rules: Literal["auto", "on", "off"] = setting(
        "auto",
        "Rule-based extraction of explicit self-statements (name, city, preferred language...) "
        "merged with the model's facts: 'on', 'off', or 'auto' (on for local models, which map "
        "statements to keys unreliably).",
    )


class QueueSettings(Group):
    """The durable queue of evicted messages: leases and retries."""

    lease_seconds: float = setting(
        120.0, "How long a claimed batch stays leased to its worker.", gt=0
    )
    max_attempts: int = setting(5, "Failed stores of a batch before it is dead-lettered.", ge=1)
    retry_backoff_s: float = setting(2.0, "First retry delay; doubles with each failure.", ge=0)


class RetentionSettings(Group):
    """Expiry, eviction, compaction, checkpoints, the decision log and idle threads."""

    ttl_policy: str = setting(
        "0.9:never,0.5:30,0:7",
        "Expiry by importance, 'min_importance:days|never' pairs: facts and memories at or above a"
        " threshold live that long; pinned items never expire.",
    )
    evict_below_importance: float = setting(
        0.1, "Maintenance evicts memories below this importance"
    )
    evict_after_days: int = setting(180, "... and older than this many days.", ge=0)
    duplicate_similarity: float = setting(
        0.95, "Maintenance compacts active memories at least this similar."
    )
    checkpoint_retention: Literal["keep_latest", "off"] = setting(
        "keep_latest",
        "What maintenance keeps of each conversation's and memory run's checkpoints: "
        "'keep_latest' keeps one per thread (the latest, with its pending writes: all a run "
        "needs to resume; no step back to older ones), 'off' keeps every checkpoint. A thread "
        "with a run in flight or memory work under way (a batch leased) is left whole.",
    )
    decision_retention_days: int = setting(
        180,
        "Maintenance deletes memory decisions (the audit log of why each memory was created, "
        "merged or removed) older than this many days; 0 keeps them forever. A thread's "
        "decisions stay while it has memory work pending or dead-lettered (a retry reads them).",
        ge=0,
    )
    idle_thread_days: int = setting(
        30,
        "Maintenance archives a thread nobody wrote to for this many days, as a session end "
        "does (its working window is summarized into memory), then deletes its window, seen-set "
        "and running summary from Redis; its owner can still come back to it. 0 keeps them "
        "forever. A thread whose memory batch is leased or dead-lettered, or with a turn in the "
        "last day, is left alone.",
        ge=0,
    )

    @field_validator("ttl_policy")
    @classmethod
    def _parses(cls, policy: str) -> str:
        parse_ttl_policy(policy)
        return policy

    def ttl_days(self, importance: float, pinned: bool = False) -> float | None:
        """Days an item of this importance lives (``None``: never expires)."""
        if pinned:
            return None
        rules = parse_ttl_policy(self.ttl_policy)
        for threshold, days in rules:
            if importance >= threshold:
                return days
        return rules[-1][1]


class Settings(Group):
    """The deployment's settings, grouped by concern; frozen (`override` makes a copy)."""

    limits: LimitSettings = Field(default_factory=LimitSettings)
    window: WindowSettings = Field(default_factory=WindowSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    formation: FormationSettings = Field(default_factory=FormationSettings)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment gives (``WINDOW_SIZE``...); an empty value is unset."""
        env = os.environ if environ is None else environ
        values = {name: env[name] for name in ENV_PATHS if env.get(name, "") != ""}
        try:
            return cls().override(**{name.lower(): raw for name, raw in values.items()})
        except ValidationError as exc:
            by_path = {path: name for name, path in ENV_PATHS.items()}
            wrong = "; ".join(
                f"{by_path.get(tuple(map(str, e['loc'])), '.'.join(map(str, e['loc'])))}="
                f"{e['input']!r}: {e['msg']}"
                for e in exc.errors()
            )
            raise ValueError(f"invalid setting in the environment: {wrong}") from None

    def by_name(self) -> dict[str, Any]:
        """Every setting by its variable's name in lower case (the names `override` takes)."""
        return {env.lower(): reduce(getattr, path, self) for env, path in ENV_PATHS.items()}

    def override(self, **values: Any) -> Settings:
        """A copy with settings changed by their variable's name in lower case.

        ``settings.override(window_size=6, neighbour_weight=0.0)``; the values are checked
        as in the models, an unknown name raises ``TypeError``.
        """
        data = self.model_dump()
        for name, value in values.items():
            path = ENV_PATHS.get(name.upper())
            if path is None:
                raise TypeError(
                    f"no setting {name!r}: name one by its environment variable in lower "
                    "case (window_size, neighbour_weight...)"
                )
            reduce(dict.__getitem__, path[:-1], data)[path[-1]] = value
        return type(self).model_validate(data)


def env_name(name: str, info: FieldInfo) -> str:
    """The environment variable of a field: its ``env`` if declared, else its upper name."""
    extra = info.json_schema_extra
    return str(extra["env"]) if isinstance(extra, dict) and "env" in extra else name.upper()


def _paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out |= _paths(kind, (*prefix, name))
        else:
            out[env_name(name, info)] = (*prefix, name)
    return out


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


ENV_PATHS: dict[str, tuple[str, ...]] = _paths(Settings)
"""Every setting's environment variable and its path (``WINDOW_SIZE`` -> window.size)."""
