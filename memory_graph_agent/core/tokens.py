"""Token counting: one pluggable counter of text, and messages counted with it.

The default, `script_tokens`, needs no download (tiktoken would). It charges what
LangChain's ``count_tokens_approximately`` charges for ASCII (4 characters a token, so
English budgets and the benchmarks' numbers are unchanged) and more for other scripts,
where that rate undercounts several times. Measured with SmolLM2's tokenizer (the
offline model): Cyrillic ~0.8 tokens a character, Arabic ~1.1, CJK and kana ~1.6,
Hangul ~2.7, emoji up to 4; OpenAI's tokenizers need about 1 per CJK character. The
rates below are at or above those, so a prompt counted as fitting does fit. Digits are
the exception (SmolLM2 spends a token on each): the reply path retries a prompt the
model refuses as too long (`memory_graph_agent.turn.replying`).

Plug in an exact counter for your model with `use_token_counter` (e.g. a tiktoken
encoding's ``lambda text: len(enc.encode(text))``); every budget then uses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

TextCounter = Callable[[str], int]
"""Tokens of a text."""

_RATES = (  # (first, last code point, quarter tokens a character); the first match wins
    (0x0370, 0x052F, 4),  # Greek, Cyrillic: ~0.8 tokens measured
    (0x1100, 0x11FF, 12),  # Hangul Jamo
    (0xA960, 0xA97F, 12),  # Hangul Jamo extended
    (0xAC00, 0xD7FF, 12),  # Hangul syllables: ~2.7 tokens measured
    (0x2E80, 0x9FFF, 8),  # CJK radicals, punctuation, kana, ideographs: ~1.6 measured
    (0xF900, 0xFAFF, 8),  # CJK compatibility ideographs
    (0xFE30, 0xFE4F, 8),  # CJK compatibility forms
    (0xFF00, 0xFFEF, 8),  # full-width forms
)


def _quarters(char: str) -> int:
    """Quarter tokens one character costs."""
    code = ord(char)
    if code < 0x80:
        return 1
    if code < 0x250:  # Latin-1 and Latin extended: accents often split a word
        return 2
    if code > 0xFFFF:  # emoji and other astral characters: at most their 4 UTF-8 bytes
        return 16
    for first, last, quarters in _RATES:
        if first <= code <= last:
            return quarters
    return 6  # Arabic, Hebrew, Indic, Thai, symbols...: ~1.1 tokens measured for Arabic


def script_tokens(text: str) -> int:
    """Tokens of ``text``: ASCII at 4 characters a token, other scripts at their own rate."""
    if text.isascii():
        return math.ceil(len(text) / 4)
    return math.ceil(sum(map(_quarters, text)) / 4)


_counter: TextCounter = script_tokens


def use_token_counter(counter: TextCounter | None) -> None:
    """Count every budget of this process with ``counter`` (``None``: `script_tokens`)."""
    global _counter
    _counter = counter or script_tokens


def text_tokens(text: str) -> int:
    """Tokens of ``text`` by the counter in use."""
    return _counter(text)


def _text_of(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def message_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens of messages: LangChain's per-message overhead, their text by the counter.

    With the default counter an ASCII message costs exactly what
    ``count_tokens_approximately`` says.
    """
    total = 0
    for message in messages:
        text = _text_of(message)
        if _counter is script_tokens and text.isascii():
            total += count_tokens_approximately([message])
        else:  # the role, name and tool calls as LangChain counts them, the text by ours
            bare = message.model_copy(update={"content": ""})
            total += count_tokens_approximately([bare]) + _counter(text)
    return total
