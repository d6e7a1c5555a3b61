"""The settings the memory domain reads, as a protocol.

The domain never imports the graph: `graph.context.Context` (the run's configuration,
a Studio form) satisfies `Settings` structurally, and tests may pass any object that does.
"""

from __future__ import annotations

from typing import Protocol


class Settings(Protocol):
    """Knobs the domain functions read (see `graph.context.Context` for their meaning)."""

    user_id: str
    model: str
    model_timeout_s: float
    recall_k: int
    memory_token_budget: int
    profile_token_budget: int
    min_similarity: float
    neighbour_weight: float
    summary_turn_weight: float
    recall_rrf_k: int
    topic_weight: float
    entity_weight: float
    speaker_weight: float
    speaker_turns: int
    turn_context_weight: float
    newest_first: bool
    recall_candidate_tokens: int
    weight_relevance: float
    weight_recency: float
    weight_importance: float
    recency_half_life_days: float
    merge_similarity: float
    min_fact_importance: float
    fact_rules: str
    change_note_days: int
    max_message_chars: int
    max_turn_messages: int
    window_size: int
    window_token_share: float
    context_window_tokens: int
    trigger_ratio: float
    keep_recent_turns: int
    summary_batch: int
    summary_mode: str
    lease_seconds: float
    max_attempts: int
    retry_backoff_s: float
    reflect_after: int
    reflect_importance_threshold: float

    def ttl_days(self, importance: float, pinned: bool = False) -> float | None:
        """Days an item of this importance lives (``None``: never expires)."""
        ...
