"""How recall ranks what it found: its tuned weights, declared once as one frozen group.

`RecallWeights` is `graph.context.Context`'s ``recall_weights``: the constant of the
reciprocal-rank fusion, the links' shares (summary turns, neighbours, topics, entities),
the speaker's boost, the contextual turn vectors and the memory score's weights. Each
weight is declared with its default, description and bounds (`operator_knob`), chosen by
cross-validation on LoCoMo and LongMemEval (`bench.locomo_cv`, `bench.joint_cv`), and is
the operator's: read from the environment variable of its own name (``NEIGHBOUR_WEIGHT``)
by `Context`, refused from clients of the server with the whole group.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_graph_agent.core.knobs import check_fields, operator_knob


@dataclass(frozen=True, kw_only=True)
class RecallWeights:
    """Recall's ranking weights, tuned on LoCoMo and LongMemEval (``ctx.recall_weights``).

    Frozen: `memory_graph_agent.core.knobs.with_knobs` (or ``dataclasses.replace``) makes
    a copy with other values.
    """

    neighbour_weight: float = operator_knob(
        0.5,
        "Share of a recalled turn's score its neighbours (the turns said just before and "
        "after) get; 0 turns neighbours off. Chosen by cross-validation on LoCoMo.",
        ge=0,
        le=1,
    )
    summary_turn_weight: float = operator_knob(
        0.0,
        "Weight of a recalled summary's rank in the ranking of the turns it was made from; "
        "0 turns it off. Off by default: it helped LoCoMo and cost LongMemEval more "
        "(bench.joint_cv).",
        ge=0,
    )
    recall_rrf_k: int = operator_knob(
        5,
        "The constant k of recall's reciprocal-rank fusion (1 / (k + rank)): smaller "
        "trusts the top ranks more. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    topic_weight: float = operator_knob(
        0.0,
        "Share of the best turns' score lent to turns that share their rarer words "
        "(topic links, pseudo-relevance feedback in the candidates); 0 turns it off. Off by "
        "default: it helped LoCoMo and cost LongMemEval more (bench.joint_cv).",
        ge=0,
    )
    entity_weight: float = operator_knob(
        0.0,
        "Share of the best turns' score lent to the user's other turns that share their "
        "entity keys (names; edges stored with each turn), reaching turns no search "
        "found, at one more statement after the searches; 0 (off) by default: on LoCoMo "
        "0.1 added 0.1 point of recall for ~4 ms p50 of the read path.",
        ge=0,
    )
    speaker_weight: float = operator_knob(
        1.5,
        "How much more a turn counts when the query names its speaker (``Melanie`` in "
        '"What books has Melanie read?"): its RRF is multiplied by 1 + this; 0 turns it '
        "off. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    turn_context_weight: float = operator_knob(
        0.25,
        "Share of each adjacent turn's embedding (the turns said just before and after) "
        "mixed into a raw turn's stored vector when it is indexed, so a short answer is "
        "found by the question it answers; 0 stores each turn's own vector. Applies to "
        "turns indexed from then on. Chosen by cross-validation on LoCoMo.",
        ge=0,
    )
    weight_relevance: float = operator_knob(
        1.0, "Weight of the fused (vector + keyword) relevance.", ge=0
    )
    weight_recency: float = operator_knob(
        0.0,
        "Weight of recency (exponential decay since last access). Off by default: on LoCoMo it "
        "boosts memories recalled for earlier, unrelated questions (0.829 at 0, 0.825 at 0.5; "
        "in-budget 0.776 vs 0.724).",
        ge=0,
    )
    weight_importance: float = operator_knob(0.5, "Weight of the memory's importance.", ge=0)
    recency_half_life_days: float = operator_knob(
        30.0, "Days after which the recency signal halves.", gt=0
    )

    def __post_init__(self) -> None:
        """Check every weight's bounds (the environment is read by `Context`)."""
        check_fields(self)
