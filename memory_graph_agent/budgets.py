"""Token arithmetic of short-term compression: prompt size, budgets and turn-safe cuts.

Pure functions shared by `nodes.trim_window` (evict old turns once the next prompt would
outgrow ``trigger_ratio`` of the model's context), `nodes.summarize` (claim no more than
the summarizer's prompt can hold) and `nodes.respond` (never send a prompt larger than
the context window). Tokens are counted with LangChain's
``count_tokens_approximately`` (about 4 characters a token): tiktoken needs a download.

A *turn* starts at a human message and runs to the next one, so a cut on a turn
boundary never separates an AI tool call from its tool results. Functions take
LangChain messages or `memory_graph_agent.storage.window.StoredMessage` (anything with ``type`` or ``role``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately


def _role(message: Any) -> str:
    return getattr(message, "role", None) or getattr(message, "type", "")


def _as_message(message: Any) -> BaseMessage:
    return message if isinstance(message, BaseMessage) else message.to_message()


def count_tokens(messages: Sequence[Any]) -> int:
    """Approximate tokens of messages (LangChain or stored), role overhead included."""
    if not messages:
        return 0
    return count_tokens_approximately([_as_message(m) for m in messages])


def prompt_tokens(system_prompt: str, messages: Sequence[Any]) -> int:
    """Approximate tokens of a prompt: the system prompt followed by ``messages``."""
    return count_tokens_approximately([SystemMessage(system_prompt)]) + count_tokens(messages)


def trigger_budget(context_window_tokens: int, trigger_ratio: float) -> int:
    """Prompt size above which the window is compressed (``ratio × context``)."""
    return int(context_window_tokens * trigger_ratio)


def messages_over_budget(system_prompt: str, messages: Sequence[Any], budget: int) -> bool:
    """Whether the system prompt plus ``messages`` exceed ``budget`` tokens."""
    return prompt_tokens(system_prompt, messages) > budget


def turn_starts(messages: Sequence[Any]) -> list[int]:
    """Indexes of the human messages, i.e. where each turn starts."""
    return [i for i, m in enumerate(messages) if _role(m) == "human"]


def cut_to_recent_turns(messages: Sequence[Any], keep_turns: int) -> int:
    """How many of the oldest messages to drop so only the last ``keep_turns`` turns remain.

    The cut lands just before a human message, so the active tool-call chain (an AI
    tool call and its tool results) always stays whole. Returns 0 when the messages
    hold ``keep_turns`` turns or fewer.
    """
    starts = turn_starts(messages)
    if keep_turns < 1 or len(starts) <= keep_turns:
        return 0
    return starts[-keep_turns]


def fit_to_budget(
    system_prompt: str, messages: Sequence[Any], budget: int, min_turns: int = 1
) -> int:
    """How many of the oldest messages to drop so the prompt fits ``budget`` tokens.

    Whole turns are dropped, oldest first, but never the last ``min_turns`` turns (the
    current question and its tool-call chain): if those alone exceed the budget the
    cut keeps them anyway. Returns 0 when the prompt already fits.
    """
    if not messages_over_budget(system_prompt, messages, budget):
        return 0
    fixed = count_tokens_approximately([SystemMessage(system_prompt)])
    starts = turn_starts(messages)
    limit = starts[-min_turns] if min_turns >= 1 and len(starts) >= min_turns else 0
    for cut in starts:
        if cut > limit:
            break
        if cut and fixed + count_tokens(messages[cut:]) <= budget:
            return cut
    return limit


def messages_within_budget(
    system_prompt: str, messages: Sequence[BaseMessage], budget: int, min_turns: int = 1
) -> list[BaseMessage]:
    """``messages`` without the oldest whole turns that do not fit ``budget`` (for respond)."""
    return list(messages[fit_to_budget(system_prompt, messages, budget, min_turns) :])


def batch_that_fits(messages: Sequence[Any], budget: int, overhead: int = 0) -> int:
    """How many of the oldest ``messages`` fit ``budget`` tokens together (at least 1)."""
    used = overhead
    for n, message in enumerate(messages):
        used += count_tokens([message])
        if used > budget:
            return max(n, 1)
    return max(len(messages), 1)
