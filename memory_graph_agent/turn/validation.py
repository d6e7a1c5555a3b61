"""Validation of a turn's input at the edge of the graph, before anything is written.

`validate_turn` checks the turn's new messages (roles, text-only content, sizes, NUL and
surrogates, tool answers); docs/reliability-and-security.md ("Bad input") lists the
rules. Every rejection raises `InvalidInputError` without echoing large or binary input
back.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memory_graph_agent.core.ids import InvalidIdError, validate_id

MAX_MESSAGE_CHARS = 32_000
"""Longest accepted message text (about 8k tokens). Longer input is rejected, not cut."""

MAX_TURN_MESSAGES = 100
"""Most new messages accepted in one turn."""

ALLOWED_TYPES = ("human", "ai", "tool")
_INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp"}


class InvalidInputError(ValueError):
    """The turn's input was rejected; nothing of it was written to memory.

    Attributes:
        message_ids: Ids of the rejected turn's new messages. The thread's next turn
            removes them from its state; `discard_rejected` removes them at once.
    """

    def __init__(self, message: str, message_ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message_ids = [i for i in message_ids if i]


def check_id(value: object, what: str) -> str:
    """`validate_id` raising `InvalidInputError` (same message)."""
    try:
        return validate_id(value, what)
    except InvalidIdError as exc:
        raise InvalidInputError(str(exc)) from None


def validate_text(
    text: object, where: str = "message", *, max_chars: int = MAX_MESSAGE_CHARS
) -> str:
    """Check one text for storability; returns it unchanged.

    Raises `InvalidInputError` for non-strings, lone surrogates, NUL characters and
    text longer than ``max_chars``.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"{where}: text must be a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise InvalidInputError(
            f"{where} is {len(text):,} characters long; the limit is {max_chars:,} "
            "(max_message_chars). Split it or send a shorter excerpt."
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(text[exc.start])
        raise InvalidInputError(
            f"{where} is not valid Unicode: lone surrogate U+{bad:04X} at position "
            f"{exc.start} (undecodable input bytes?)"
        ) from None
    if "\x00" in text:
        raise InvalidInputError(
            f"{where} contains a NUL character (\\x00) at position {text.index(chr(0))}; "
            "NUL cannot be stored"
        )
    return text


def has_visible_text(text: str) -> bool:
    """Whether ``text`` has a character that is not whitespace, control or format."""
    return any(unicodedata.category(ch) not in _INVISIBLE for ch in text)


def validate_user_text(text: object, *, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    """Validate what a user typed (CLI): storable and not empty. Returns it unchanged."""
    validate_text(text, "message", max_chars=max_chars)
    if not has_visible_text(text):  # type: ignore[arg-type]
        raise InvalidInputError("message is empty (no visible characters)")
    return text  # type: ignore[return-value]


def _content_text(message: BaseMessage, where: str) -> str:
    content = message.content
    if content is None:
        raise InvalidInputError(f"{where} has no content (None)")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidInputError(f"{where}: content must be text, got {type(content).__name__}")
    parts: list[str] = []
    for i, block in enumerate(content):
        if isinstance(block, str):
            parts.append(block)
            continue
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        if kind != "text" or not isinstance(block.get("text"), str):
            raise InvalidInputError(
                f"{where}: content block {i} is of type {str(kind)[:40]!r}; only text is "
                "supported (images, audio and files are not stored in memory)"
            )
        parts.append(block["text"])
    return "".join(parts)


def _tool_call_ids(messages: Iterable[BaseMessage]) -> set[str]:
    ids: set[str] = set()
    for m in messages:
        for call in getattr(m, "tool_calls", None) or []:
            if call.get("id"):
                ids.add(call["id"])
    return ids


def validate_message(
    message: BaseMessage, where: str, *, max_chars: int = MAX_MESSAGE_CHARS
) -> None:
    """Check one message: role, name and content."""
    kind = getattr(message, "type", None)
    if kind == "system":
        raise InvalidInputError(
            f"{where} is a system message; the agent builds its own system prompt and "
            "does not accept one from the caller (send a human message)"
        )
    if kind not in ALLOWED_TYPES:
        role = getattr(message, "role", None) or kind
        raise InvalidInputError(
            f"{where} has unsupported role {str(role)[:40]!r}; use 'user'/'human' "
            "('ai' and 'tool' are accepted as history)"
        )
    if message.name is not None:
        try:
            validate_id(message.name, "name")
        except InvalidIdError as exc:
            raise InvalidInputError(f"{where}: {exc}") from None
    text = validate_text(_content_text(message, where), where, max_chars=max_chars)
    if kind == "human" and not has_visible_text(text):
        raise InvalidInputError(f"{where} is empty (no visible characters)")


def validate_turn(
    messages: Sequence[BaseMessage],
    new: Sequence[BaseMessage] | None = None,
    *,
    max_chars: int = MAX_MESSAGE_CHARS,
    max_messages: int = MAX_TURN_MESSAGES,
    end_session: bool = False,
) -> None:
    """Validate a turn: ``messages`` is the whole graph state, ``new`` the unstored part.

    ``new`` defaults to all of ``messages`` (a graph without a checkpointer). The whole
    turn is rejected: the error's ``message_ids`` are the ids of every new message.
    A session end (``end_session``) needs no human message: it may be empty, or end
    with the agent's reply; whatever it adds is still checked.
    """
    new = list(messages if new is None else new)
    try:
        _validate_turn(messages, new, max_chars, max_messages, end_session)
    except InvalidInputError as exc:
        raise InvalidInputError(str(exc), [m.id for m in new]) from None


def _validate_turn(
    messages: Sequence[BaseMessage],
    new: list[BaseMessage],
    max_chars: int,
    max_messages: int,
    end_session: bool = False,
) -> None:
    ends_with_human = bool(messages) and getattr(messages[-1], "type", None) == "human"
    if not ends_with_human and not end_session:
        got = repr(getattr(messages[-1], "type", None)) if messages else "no message"
        raise InvalidInputError(
            f"a turn must end with a human message (role 'user' / 'human'); got {got}"
        )
    if len(new) > max_messages:
        raise InvalidInputError(
            f"a turn may add at most {max_messages} messages, got {len(new)} "
            "(max_turn_messages); send the history in smaller turns"
        )
    answered = _tool_call_ids(messages)
    for i, message in enumerate(new, 1):
        where = f"message {i} of {len(new)} ({getattr(message, 'type', '?')})"
        validate_message(message, where, max_chars=max_chars)
        if message.type == "tool" and message.tool_call_id not in answered:
            raise InvalidInputError(
                f"{where} answers tool call {str(message.tool_call_id)[:64]!r}, but no "
                "earlier AI message of the thread made that call"
            )


async def discard_rejected(agent: Any, config: dict[str, Any], error: InvalidInputError) -> int:
    """Remove the messages of a rejected turn from the thread's checkpoint now.

    A node that raises cannot change the state, so with a checkpointer the rejected
    input stays in the thread's checkpoint until the thread's next turn undoes it
    (`memory_graph_agent.turn.admission`; nothing of it is ever stored in memory). Call
    this to take it out at once, from the state a client reads and from a rejected
    session end's flag. Returns how many messages were removed.
    """
    from langchain_core.messages import RemoveMessage

    snapshot = await agent.aget_state(config)
    present = {m.id for m in snapshot.values.get("messages", [])}
    ids = [i for i in error.message_ids if i in present]
    update: dict[str, Any] = {}
    if ids:
        update["messages"] = [RemoveMessage(id=i) for i in ids]
    if snapshot.values.get("end_session"):  # a rejected session end must not linger either
        update["end_session"] = False
    if update:
        await agent.aupdate_state(config, update, as_node="__start__")
    return len(ids)


class ThreadOwnershipError(InvalidInputError):
    """The thread id is already used by another user."""
