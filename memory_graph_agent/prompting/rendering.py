"""Rendering of stored text as prompt data, and small text helpers (pure functions)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage

from memory_graph_agent.core import tokens
from memory_graph_agent.core.kinds import is_turn
from memory_graph_agent.core.records import MemoryEvent, event
from memory_graph_agent.prompting.budgets import cut_text
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
FACT_VALUE_TOKENS = 60
"""A profile value is shown cut to this, so one long value cannot fill the profile budget."""
_LEFT_OUT = "({n} more facts not shown: over the profile budget)"


def render_profile(
    profile: dict[str, dict[str, Any]],
    changes: Sequence[dict[str, Any]] | None = (),
    budget: int | None = None,
) -> str:
    """Profile facts as ``key: value`` lines, then change notes, within ``budget`` tokens.

    Pinned facts come first, then the most important; each value is cut to
    `FACT_VALUE_TOKENS`. Each recent change (``{key, old, new, at}``, oldest first; the
    newest ``MAX_CHANGE_NOTES``) becomes ``changed: key old → new (YYYY-MM-DD)`` so the
    agent can acknowledge it. Lines are taken in that order while they fit ``budget``
    (``None``: no limit); a last line counts the facts left out.
    """
    ranked = sorted(
        profile.items(),
        key=lambda kv: (bool(kv[1].get("pinned")), float(kv[1].get("importance") or 0)),
        reverse=True,
    )
    facts = [
        defang(f"{key}: {cut_text(str(fact.get('value', '')), FACT_VALUE_TOKENS)}")
        for key, fact in ranked
    ]
    notes = [
        defang(f"changed: {c['key']} {c.get('old')} → {c.get('new')} ({str(c.get('at', ''))[:10]})")
        for c in list(changes or ())[-MAX_CHANGE_NOTES:]
    ]
    if budget is None:
        lines = facts + notes
    else:
        room = budget - text_tokens(_LEFT_OUT.format(n=len(facts)))
        lines = _fill(facts, room)
        lines += _fill(notes, room - sum(map(text_tokens, lines)))
        if len(lines) < len(facts) + len(notes):
            shown = len(set(lines) & set(facts))
            if shown < len(facts):
                lines.append(_LEFT_OUT.format(n=len(facts) - shown))
    return "\n".join(lines) if lines else "(nothing known yet)"


def _fill(lines: list[str], room: int) -> list[str]:
    """The lines, in order, that fit ``room`` tokens together (skipping those that do not)."""
    kept: list[str] = []
    for line in lines:
        cost = text_tokens(line)
        if cost <= room:
            kept.append(line)
            room -= cost
    return kept


def text_tokens(text: str) -> int:
    """Tokens one line (and its newline) adds to the prompt (ASCII: 4 characters a token)."""
    return tokens.text_tokens(text + "\n")


def episode_header(memory: dict[str, Any]) -> str:
    """The date line a group of recalled turns of one day shares: ``[YYYY-MM-DD]``."""
    return f"[{str(memory.get('created_at', ''))[:10]}]"


def render_memory(memory: dict[str, Any]) -> str:
    """One recalled memory as a line of data (a turn without its date: its group has it).

    A turn is its ``Speaker: text`` alone, no indent or marker: every character is
    budget, and the date line above it says what it is.
    """
    if is_turn(memory.get("kind")):
        return defang(str(memory.get("text", "")))
    day = str(memory.get("created_at", ""))[:10]
    return f"- [{memory.get('kind')} {day}] {defang(str(memory.get('text', '')))}"


def render_memories(recalled: list[dict[str, Any]]) -> str:
    """The recalled block in its given order; each day's turns under one date line."""
    lines: list[str] = []
    header = None
    for memory in recalled:
        group = episode_header(memory) if is_turn(memory.get("kind")) else None
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
