"""Guarded model calls of the memory nodes, tagged ``nostream``, ``memory``, ``prompt:<purpose>``.

``nostream`` keeps memory's tokens out of the user's stream (``stream_mode="messages"``);
the other tags let a fake model answer by purpose.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ValidationError

from memory_graph_agent.core import metrics

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

Purpose = Literal["summarize", "extract_facts", "reflect", "consolidate"]
MEMORY_TAG = "memory"
NOSTREAM_TAG = "nostream"
"""LangGraph's ``TAG_NOSTREAM`` (the domain does not import langgraph; a test checks it)."""


def tagged(purpose: Purpose) -> RunnableConfig:
    """The run config of a memory model call for ``purpose``."""
    return {
        "tags": [NOSTREAM_TAG, MEMORY_TAG, f"prompt:{purpose}"],
        "metadata": {"prompt": purpose},
    }


def tokens(text: str) -> int:
    """Approximate tokens of a prompt or an answer (when the provider reports no usage)."""
    return count_tokens_approximately([HumanMessage(text)])


async def invoke_text(model: BaseChatModel, prompt: str, timeout_s: float, purpose: Purpose) -> str:
    """Call the model with one user prompt; raise on timeout, error or empty output.

    The call and its tokens are counted (`metrics.record_llm_call`): the provider's usage
    when the reply carries one, else approximate counts; a failed call costs its prompt.
    """
    try:
        reply = await asyncio.wait_for(
            model.ainvoke([HumanMessage(prompt)], tagged(purpose)), timeout_s
        )
    except BaseException:
        metrics.record_llm_call(purpose, tokens(prompt), 0)
        raise
    usage = reply.usage_metadata
    if usage:
        metrics.record_llm_call(purpose, usage["input_tokens"], usage["output_tokens"])
    else:
        metrics.record_llm_call(purpose, tokens(prompt), count_tokens_approximately([reply]))
    text = reply.text if not isinstance(reply.content, str) else reply.content
    if not text.strip():
        raise ValueError("model returned an empty answer")
    return text.strip()


async def invoke_structured(
    model: BaseChatModel, schema: type[T], prompt: str, timeout_s: float, purpose: Purpose
) -> T | None:
    """Call the model constrained by ``schema``; ``None`` (logged) on any failure.

    Counted like `invoke_text`, with approximate tokens (the parsed answer as JSON).
    """
    answer = ""
    try:
        runnable = model.with_structured_output(schema)
        result = await asyncio.wait_for(
            runnable.ainvoke([HumanMessage(prompt)], tagged(purpose)), timeout_s
        )
        if isinstance(result, dict):
            result = schema.model_validate(result)
        if not isinstance(result, schema):
            raise ValueError(f"expected {schema.__name__}, got {type(result).__name__}")
        answer = result.model_dump_json()
        return result
    except (TimeoutError, ValidationError, ValueError, NotImplementedError) as exc:
        log.warning("structured call for %s failed: %s", schema.__name__, str(exc)[:200])
    except Exception as exc:  # model/provider errors must not break the memory pipeline
        log.warning(
            "structured call for %s raised %s: %s",
            schema.__name__,
            type(exc).__name__,
            str(exc)[:200],
        )
    finally:
        metrics.record_llm_call(purpose, tokens(prompt), tokens(answer) if answer else 0)
    return None


@dataclass(frozen=True)
class MemoryPrompts:
    """The prompt templates of memory's model calls (`graph.prompts.MEMORY_PROMPTS`)."""

    summarize: str
    """``{transcript}``."""
    extract_facts: str
    """``{summary}``."""
    consolidate: str
    """``{new}`` and ``{existing}``."""
    reflect: str
    """``{summaries}``."""
