"""Memory's own model cost: every memory call and its tokens are counted, per purpose."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from prometheus_client import REGISTRY
from pydantic import BaseModel

from memory_graph_agent.prompting.llm import invoke_structured, invoke_text, tokens


class Reporting(BaseChatModel):
    """Answers ``text`` and reports ``usage`` (or none), or raises ``error``."""

    text: str = "A summary."
    usage: dict[str, int] | None = None
    error: bool = False

    @property
    def _llm_type(self) -> str:
        return "reporting"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.error:
            raise RuntimeError("provider down")
        message = AIMessage(self.text, usage_metadata=self.usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


def counts(purpose: str) -> tuple[float, float, float]:
    def v(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, {"purpose": purpose, **labels}) or 0.0

    return (
        v("agent_memory_llm_calls_total"),
        v("agent_memory_llm_tokens_total", direction="input"),
        v("agent_memory_llm_tokens_total", direction="output"),
    )


def delta(purpose: str, before: tuple[float, float, float]) -> tuple[float, ...]:
    return tuple(a - b for a, b in zip(counts(purpose), before, strict=True))


async def test_the_providers_usage_is_counted_when_it_reports_one():
    before = counts("summarize")
    usage = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    await invoke_text(Reporting(usage=usage), "Summarize this.", 5, "summarize")
    assert delta("summarize", before) == (1, 120, 30)


async def test_without_usage_tokens_are_estimated():
    before = counts("reflect")
    await invoke_text(Reporting(text="x" * 400), "Reflect on this.", 5, "reflect")
    calls, tokens_in, tokens_out = delta("reflect", before)
    assert calls == 1 and tokens_in == tokens("Reflect on this.") and tokens_out >= 100


async def test_a_failed_call_still_costs_its_prompt():
    before = counts("summarize")
    with pytest.raises(RuntimeError):
        await invoke_text(Reporting(error=True), "Summarize this.", 5, "summarize")
    assert delta("summarize", before) == (1, tokens("Summarize this."), 0)


class Fact(BaseModel):
    key: str


async def test_structured_calls_are_counted_even_when_they_fail():
    before = counts("extract_facts")
    assert (
        await invoke_structured(Reporting(error=True), Fact, "Extract.", 5, "extract_facts") is None
    )
    assert delta("extract_facts", before) == (1, tokens("Extract."), 0)
