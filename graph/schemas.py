"""JSON schemas (pydantic) that constrain the model's structured outputs."""

from __future__ import annotations

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
