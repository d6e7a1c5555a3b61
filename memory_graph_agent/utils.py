"""Small helpers shared by nodes: ids of the run, rendering, guarded model calls."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.config import get_config
from pydantic import BaseModel, ValidationError

from memory_graph_agent.ids import validate_id
from memory_graph_agent.storage.failsafe import outages

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

DEFAULT_THREAD = "default"


def current_thread_id() -> str:
    """The run's thread id (``configurable.thread_id``), validated; ``default`` if unset."""
    configurable = get_config().get("configurable", {})
    return validate_id(str(configurable.get("thread_id") or DEFAULT_THREAD), "thread_id")


def events_so_far(state: dict[str, Any]) -> list[str]:
    """This turn's ``memory_events`` so far, plus the one-time notices queued since.

    Notices (`memory_graph_agent.storage.failsafe.Outages.notify`) say that something crashed: a PostgreSQL
    server process, the local model server. Each is shown once, in the first node that
    takes it.
    """
    return [*state.get("memory_events", []), *(f"notice: {n}" for n in outages.take_notices())]


def latest_human_text(messages: list[AnyMessage]) -> str:
    """Text of the newest human message, or '' if there is none."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text if not isinstance(message.content, str) else message.content
    return ""


FENCES = ("profile", "memories", "summary", "summaries", "conversation", "new", "existing")
"""Every tag that fences data in a prompt of `graph.prompts`."""
_FENCE_TAG = re.compile(r"<\s*/?\s*(" + "|".join(FENCES) + r")\b[^>]*>", re.IGNORECASE)


def defang(text: str) -> str:
    """Neutralise our fence tags inside stored text so it cannot close or open a fence."""
    return _FENCE_TAG.sub(lambda m: m.group().replace("<", "(").replace(">", ")"), text)


MAX_CHANGE_NOTES = 5


def render_profile(
    profile: dict[str, dict[str, Any]], changes: Sequence[dict[str, Any]] | None = ()
) -> str:
    """Profile facts as ``key: value`` lines, most important first, then change notes.

    Each recent change (``{key, old, new, at}``, oldest first; the newest
    ``MAX_CHANGE_NOTES`` are shown) becomes ``changed: key old → new (YYYY-MM-DD)`` so
    the agent can acknowledge it.
    """
    lines = [f"{key}: {fact.get('value', '')}" for key, fact in profile.items()]
    lines += [
        f"changed: {c['key']} {c.get('old')} → {c.get('new')} ({str(c.get('at', ''))[:10]})"
        for c in list(changes or ())[-MAX_CHANGE_NOTES:]
    ]
    return "\n".join(defang(line) for line in lines) if lines else "(nothing known yet)"


def render_memory(memory: dict[str, Any]) -> str:
    """One recalled memory as a line of data."""
    day = str(memory.get("created_at", ""))[:10]
    return f"- [{memory.get('kind')} {day}] {defang(str(memory.get('text', '')))}"


def render_memories(recalled: list[dict[str, Any]]) -> str:
    """The recalled block, in rank order."""
    return "\n".join(render_memory(m) for m in recalled) if recalled else "(none)"


def now_iso() -> str:
    """Current UTC time, ISO-8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def limit_words(text: str, max_words: int) -> str:
    """Cut ``text`` to at most ``max_words`` words."""
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])


async def invoke_text(model: BaseChatModel, prompt: str, timeout_s: float) -> str:
    """Call the model with one user prompt; raise on timeout, error or empty output."""
    reply = await asyncio.wait_for(model.ainvoke([HumanMessage(prompt)]), timeout_s)
    text = reply.text if not isinstance(reply.content, str) else reply.content
    if not text.strip():
        raise ValueError("model returned an empty answer")
    return text.strip()


async def invoke_structured(
    model: BaseChatModel, schema: type[T], prompt: str, timeout_s: float
) -> T | None:
    """Call the model constrained by ``schema``; ``None`` (logged) on any failure."""
    try:
        runnable = model.with_structured_output(schema)
        result = await asyncio.wait_for(runnable.ainvoke([HumanMessage(prompt)]), timeout_s)
        if isinstance(result, dict):
            result = schema.model_validate(result)
        if not isinstance(result, schema):
            raise ValueError(f"expected {schema.__name__}, got {type(result).__name__}")
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
    return None
