"""What the reply call sends to the chat model, so that no message can wedge a thread.

The prompt is the system prompt, then the newest whole turns that fit the reply budget:

* only complete tool-call groups: an AI message's calls go only with the results that
  follow it. A client may send a call without results; OpenAI refuses such a prompt
  (HTTP 400), and it would be refused again on every later turn.
* a turn larger than the budget on its own (a pasted document) is shown cut: each long
  message keeps its head and tail around a marker saying how much was left out. The
  state, the window and memory keep it whole.
* a model that still refuses the prompt as invalid (HTTP 400: its tokenizer needs more
  than counted, e.g. a token per digit) is asked once more with the current turn alone,
  each message cut to `RETRY_SHARE` of the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.exceptions import ContextOverflowError, ModelInvalidRequestError
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from memory_graph_agent.core.records import MemoryEvent, event
from memory_graph_agent.core.tokens import message_tokens, text_tokens
from memory_graph_agent.core.turns import turn_starts
from memory_graph_agent.prompting.budgets import cut_text, messages_within_budget

log = logging.getLogger(__name__)

MIN_SHOWN_TOKENS = 32
"""A cut message still shows at least this much of its text."""
RETRY_SHARE = 8
"""On the retry each message of the current turn gets 1/RETRY_SHARE of the budget."""
_MARKER = (
    "\n[... {omitted:,} of {total:,} characters left out here: the message is longer than "
    "the model's context; it is stored whole ...]\n"
)


@dataclass
class ReplyPrompt:
    """The messages sent after the system prompt, and the ids of those shown cut."""

    messages: list[BaseMessage]
    cut: list[str] = field(default_factory=list)
    events: list[MemoryEvent] = field(default_factory=list)


def complete_tool_groups(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with each AI tool call kept only if its result follows it.

    An AI message keeps the calls answered by the tool messages right after it (and its
    text, if it has any); a tool message that answers no such call is left out.
    """
    out: list[BaseMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if isinstance(message, ToolMessage):
            continue  # a result not right after its call
        if not (isinstance(message, AIMessage) and message.tool_calls):
            out.append(message)
            continue
        results: list[ToolMessage] = []
        while i < len(messages) and isinstance(messages[i], ToolMessage):
            results.append(messages[i])  # type: ignore[arg-type]
            i += 1
        answered = {r.tool_call_id for r in results}
        calls = [c for c in message.tool_calls if c["id"] in answered]
        if calls == message.tool_calls:
            out.append(message)
        elif calls or message.text.strip():
            out.append(
                AIMessage(message.content, id=message.id, name=message.name, tool_calls=calls)
            )
        called = {c["id"] for c in calls}
        out += [r for r in results if r.tool_call_id in called]
    return out


def fit_messages(
    messages: Sequence[BaseMessage], room: int, per_message: int | None = None
) -> ReplyPrompt:
    """Cut the longest texts of ``messages`` until they fit ``room`` tokens together."""
    out = list(messages)
    cut: list[str] = []
    if per_message is not None:
        for i, message in enumerate(out):
            out[i] = _cut(message, per_message, cut)
    over = message_tokens(out) - room
    for i in sorted(range(len(out)), key=lambda i: -text_tokens(out[i].text)):
        if over <= 0:
            break
        own = text_tokens(out[i].text)
        out[i] = _cut(out[i], max(own - over - 2, MIN_SHOWN_TOKENS), cut)
        over = message_tokens(out) - room
    return ReplyPrompt(out, cut)


def _cut(message: BaseMessage, max_tokens: int, cut: list[str]) -> BaseMessage:
    text = message.text
    shown = cut_text(text, max_tokens, _MARKER)
    if shown == text:
        return message
    cut.append(message.id or "")
    return message.model_copy(update={"content": shown})


def reply_prompt(system: str, messages: Sequence[BaseMessage], budget: int) -> ReplyPrompt:
    """Complete tool groups, the newest whole turns that fit, long ones shown cut."""
    room = max(budget - message_tokens([SystemMessage(system)]), MIN_SHOWN_TOKENS)
    kept = messages_within_budget(system, complete_tool_groups(messages), budget)
    return fit_messages(kept, room)


def current_turn_prompt(system: str, messages: Sequence[BaseMessage], budget: int) -> ReplyPrompt:
    """The current turn alone, each message cut to ``budget / RETRY_SHARE`` tokens."""
    complete = complete_tool_groups(messages)
    starts = turn_starts(complete)
    turn = complete[starts[-1] :] if starts else complete[-1:]
    room = max(budget - message_tokens([SystemMessage(system)]), MIN_SHOWN_TOKENS)
    return fit_messages(turn, room, per_message=max(budget // RETRY_SHARE, MIN_SHOWN_TOKENS))


def refused(exc: BaseException) -> bool:
    """Whether the model refused the request itself (HTTP 400), not failed to answer.

    LangChain's providers raise `ModelInvalidRequestError` / `ContextOverflowError`; an
    SDK error that LangChain does not wrap still carries its ``status_code``.
    """
    if isinstance(exc, ModelInvalidRequestError | ContextOverflowError):
        return True
    status = getattr(exc, "status_code", None) or getattr(
        getattr(exc, "response", None), "status_code", None
    )
    return status == 400


async def answer(
    model: Any, system: str, messages: Sequence[BaseMessage], budget: int
) -> tuple[BaseMessage, ReplyPrompt]:
    """Call ``model`` on the reply prompt; once more on the current turn if refused."""
    prompt = reply_prompt(system, messages, budget)
    try:
        reply = await model.ainvoke([SystemMessage(system), *prompt.messages])
    except Exception as exc:
        if not refused(exc):
            raise
        log.warning("the model refused the prompt (%s); retrying with the current turn", exc)
        prompt = current_turn_prompt(system, messages, budget)
        prompt.events.append(
            event(
                "respond",
                "retried",
                f"respond: prompt refused ({str(exc)[:120]}); retried with the current turn alone",
            )
        )
        reply = await model.ainvoke([SystemMessage(system), *prompt.messages])
    if prompt.cut:
        prompt.events.append(
            event(
                "respond",
                "truncated",
                f"respond: {len(prompt.cut)} message(s) longer than the {budget}-token prompt "
                "budget shown cut to the model; stored whole",
            )
        )
    return reply, prompt
