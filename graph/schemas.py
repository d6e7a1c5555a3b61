"""JSON schemas (pydantic) that constrain the model's structured outputs."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ExtractedFact(BaseModel):
    """One candidate profile fact."""

    key: str = Field(description="short snake_case attribute, e.g. name, city, preferred_language")
    value: str = Field(description="the value, as the user stated it")
    importance: float = Field(ge=0.0, le=1.0, description="0.9-1 identity, 0.7-0.8 context, 0.5-0.6 minor")


class FactList(BaseModel):
    """Facts extracted from one summary."""

    facts: list[ExtractedFact] = Field(default_factory=list)
