"""JSON schemas (pydantic) that constrain the model's structured outputs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ExtractedFact(BaseModel):
    """One candidate profile fact."""

    key: str = Field(max_length=40, description="e.g. name, city, employer, preferred_language")
    value: str = Field(max_length=80, description="the value, in the user's own words")
    importance: float = Field(
        ge=0.0, le=1.0, description="0.9-1 identity, 0.7-0.8 context, 0.5-0.6 minor"
    )


class FactList(BaseModel):
    """Facts extracted from one summary."""

    facts: list[ExtractedFact] = Field(default_factory=list, max_length=5)


ConsolidationAction = Literal["created", "merged", "updated", "strengthened", "discarded"]


class ConsolidationDecision(BaseModel):
    """What to do with a new memory given the similar memories already stored."""

    action: ConsolidationAction = Field(
        description="created: new information, keep both; merged: same topic, combine "
        "both into merged_text; updated: the new one replaces (corrects) the old one; "
        "strengthened: the new one confirms the old one; discarded: a duplicate"
    )
    target_id: str = Field(
        default="", max_length=64, description="id of the existing memory the action is about"
    )
    merged_text: str | None = Field(
        default=None, max_length=2000, description="the combined text, for 'merged' only"
    )
    reason: str = Field(default="", max_length=300, description="one short sentence")


INSIGHT_MIN_CHARS = 20
"""A reflection says something: a constrained 135M model, given raw transcripts (every
summary fell back), otherwise answers with an empty insight, which fails the reflection."""


class ReflectionOut(BaseModel):
    """A reflection over recent summaries, with the stable facts it supports."""

    insight: str = Field(
        min_length=INSIGHT_MIN_CHARS,
        description="the user's long-term preferences, habits and goals",
    )
    facts: list[ExtractedFact] = Field(
        default_factory=list,
        max_length=3,
        description="stable traits the summaries state outright (profile facts)",
    )
