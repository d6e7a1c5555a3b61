"""Token budgets of a turn: prompt size, the reply's window, the summarizer's batch.

Tokens are counted by `memory_graph_agent.core.tokens` (pluggable; no download); old turns are
cut with ``trim_messages(strategy="last", start_on="human")``. Budgets are sized from the
smaller of ``context_window_tokens`` and the context the chat model declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, trim_messages

from memory_graph_agent.core.tokens import message_tokens, text_tokens
from memory_graph_agent.core.turns import cut_to_recent_turns, turn_boundary_cut, turn_starts
from memory_graph_agent.services.models import load_chat_model, model_context_tokens
from memory_graph_agent.settings import Settings

__all__ = [
    "batch_that_fits",
    "context_tokens",
    "count_tokens",
    "cut_text",
    "keep_newest",
    "cut_to_recent_turns",
    "messages_over_budget",
    "messages_within_budget",
    "prompt_tokens",
    "recall_budget",
    "reply_budget",
    "trigger_budget",
    "window_cut",
    "window_token_cap",
]


def _as_message(message: Any) -> BaseMessage:
    return message if isinstance(message, BaseMessage) else message.to_message()


REPLY_RESERVE_TOKENS = 512
"""Tokens of the context window left free for the model's answer."""


def count_tokens(messages: Sequence[Any]) -> int:
    """Approximate tokens of messages (LangChain or stored), role overhead included."""
    return message_tokens([_as_message(m) for m in messages])


def prompt_tokens(system_prompt: str, messages: Sequence[Any]) -> int:
    """Approximate tokens of a prompt: the system prompt followed by ``messages``."""
    return message_tokens([SystemMessage(system_prompt)]) + count_tokens(messages)


def context_tokens(settings: Settings, model: str) -> int:
    """The prompt context to plan for: ``window.context_window_tokens``, or less if the model says.

    The local model's server runs with a smaller ``n_ctx`` (4096) than the default
    ``context_window_tokens`` (8192); a known hosted model declares its own in its profile.
    """
    try:
        declared = model_context_tokens(load_chat_model(model))
    except Exception:  # a model that cannot be built fails where it is called, not here
        declared = None
    return min(
        settings.window.context_window_tokens, declared or settings.window.context_window_tokens
    )


def reply_budget(context: int) -> int:
    """Prompt tokens of a reply call: the context less room for the answer."""
    return context - min(REPLY_RESERVE_TOKENS, context // 4)


def trigger_budget(context_window_tokens: int, trigger_ratio: float) -> int:
    """Prompt size above which the window is compressed (``ratio × context``)."""
    return int(context_window_tokens * trigger_ratio)


def messages_over_budget(system_prompt: str, messages: Sequence[Any], budget: int) -> bool:
    """Whether the system prompt plus ``messages`` exceed ``budget`` tokens."""
    return prompt_tokens(system_prompt, messages) > budget


def messages_within_budget(
    system_prompt: str, messages: Sequence[BaseMessage], budget: int, min_turns: int = 1
) -> list[BaseMessage]:
    """The newest whole turns of ``messages`` that fit ``budget`` with the system prompt.

    The last ``min_turns`` turns (the current question and its tool-call chain) are kept
    even when they alone exceed the budget: an answer needs the question.
    """
    room = budget - message_tokens([SystemMessage(system_prompt)])
    kept = trim_messages(
        list(messages),
        max_tokens=max(room, 0),
        strategy="last",
        start_on="human",
        token_counter=message_tokens,
        allow_partial=False,
    )
    starts = turn_starts(messages)
    floor = starts[-min_turns] if min_turns >= 1 and len(starts) >= min_turns else 0
    return kept if len(kept) >= len(messages) - floor else list(messages[floor:])


MIN_WINDOW_TURNS = 2
"""Newest whole turns the window keeps whatever its token cap: the last exchange stays."""


def window_token_cap(memory_token_budget: int, share: float) -> int:
    """Tokens the working window may hold: its ``share`` of the turn's memory budget."""
    return int(memory_token_budget * share)


def window_cut(
    messages: Sequence[Any], window_size: int, max_tokens: int, min_turns: int = MIN_WINDOW_TURNS
) -> int:
    """How many of the oldest ``messages`` leave the window, cut on a turn boundary.

    The window keeps at most ``window_size`` messages (`turn_boundary_cut`) and, beyond
    that, drops its oldest whole turns while it holds more than ``max_tokens`` tokens;
    the newest ``min_turns`` turns always stay, whatever they cost.
    """
    cut = turn_boundary_cut(messages, window_size)
    starts = [s for s in turn_starts(messages) if s > cut]
    floor = starts[-min_turns] if len(starts) >= min_turns else cut
    sizes = [count_tokens([m]) for m in messages]
    held = sum(sizes[cut:])
    for start in starts:  # drop whole turns, oldest first, while over the cap
        if held <= max_tokens or start > floor:
            break
        held -= sum(sizes[cut:start])
        cut = start
    return cut


def recall_budget(memory_token_budget: int, messages: Sequence[Any]) -> int:
    """What recall may fill: the memory budget less the window the prompt shows.

    The window is every message before the current turn (the newest human message and
    what follows it); whatever it costs, recall gets the rest, never less than nothing.
    """
    starts = turn_starts(messages)
    window = messages[: starts[-1]] if starts else messages
    return max(0, memory_token_budget - count_tokens(window))


def batch_that_fits(messages: Sequence[Any], budget: int, overhead: int = 0) -> int:
    """How many of the oldest ``messages`` fit ``budget`` tokens together (at least 1)."""
    used = overhead
    for n, message in enumerate(messages):
        used += count_tokens([message])
        if used > budget:
            return max(n, 1)
    return max(len(messages), 1)


CUT_MARKER = "\n[... {omitted:,} of {total:,} characters left out here ...]\n"


def cut_text(text: str, max_tokens: int, marker: str = CUT_MARKER) -> str:
    """``text`` within ``max_tokens``: its head and tail around ``marker`` (or unchanged).

    ``marker`` may use ``{omitted}`` and ``{total}`` (characters).
    """
    if text_tokens(text) <= max_tokens:
        return text

    def shown(n: int) -> str:
        tail = n // 3
        note = marker.format(omitted=len(text) - n, total=len(text))
        return text[: n - tail] + note + (text[len(text) - tail :] if tail else "")

    low, high = 0, len(text) - 1  # the largest n whose cut text fits
    while low < high:
        mid = (low + high + 1) // 2
        if text_tokens(shown(mid)) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return shown(low)


THREAD_SUMMARY_TOKENS = 500
"""Token cap of the thread's running summary in the prompt (its newest part is kept)."""


def keep_newest(text: str, max_tokens: int = THREAD_SUMMARY_TOKENS) -> str:
    """The end of ``text`` within ``max_tokens``, after ``... `` if anything was cut.

    A word cap alone does not bound text without spaces (CJK): this one does.
    """
    if text_tokens(text) <= max_tokens:
        return text
    low, high = 1, len(text)  # the smallest start whose tail fits
    while low < high:
        mid = (low + high) // 2
        if text_tokens("... " + text[mid:]) <= max_tokens:
            high = mid
        else:
            low = mid + 1
    return "... " + text[low:].lstrip()
