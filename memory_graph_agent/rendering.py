"""Rendering of stored text as prompt data, and small text helpers (pure functions)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage

from memory_graph_agent import tokens
from memory_graph_agent.records import MemoryEvent, event
from memory_graph_agent.storage.outages import outages


def notices(node: str) -> list[MemoryEvent]:
    """The one-time notices queued since the last node took them, as events.

    Notices (`memory_graph_agent.storage.outages.Outages.notify`) say that something
    crashed: a PostgreSQL server process, the local model server. Each is shown once, in
    the first node that takes it.
    """
    return [event(node, "notice", f"notice: {n}") for n in outages.take_notices()]


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


def text_tokens(text: str) -> int:
    """Tokens one line (and its newline) adds to the prompt (ASCII: 4 characters a token)."""
    return tokens.text_tokens(text + "\n")


def episode_header(memory: dict[str, Any]) -> str:
    """The date line a group of recalled turns of one day shares."""
    return f"[conversation {str(memory.get('created_at', ''))[:10]}]"


def render_memory(memory: dict[str, Any]) -> str:
    """One recalled memory as a line of data (a turn without its date: its group has it)."""
    if memory.get("kind") == "episode":
        return f"  {defang(str(memory.get('text', '')))}"
    day = str(memory.get("created_at", ""))[:10]
    return f"- [{memory.get('kind')} {day}] {defang(str(memory.get('text', '')))}"


def render_memories(recalled: list[dict[str, Any]]) -> str:
    """The recalled block in its given order; each day's turns under one date line."""
    lines: list[str] = []
    header = None
    for memory in recalled:
        group = episode_header(memory) if memory.get("kind") == "episode" else None
        if group is not None and group != header:
            lines.append(group)
        header = group
        lines.append(render_memory(memory))
    return "\n".join(lines) if lines else "(none)"


def now_iso() -> str:
    """Current UTC time, ISO-8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def limit_words(text: str, max_words: int) -> str:
    """Cut ``text`` to at most ``max_words`` words."""
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])
