"""Questions that point at a place in the conversation: "what did I ask first?".

A user who asks "what did you tell me three questions ago?", "what was my second
question?" or "recap what we talked about" names turns of the conversation in progress by
their place in it, not by what they say. No search finds them that way: the words of the
question are not theirs. So a turn's recall reads the pointed turns from the thread's
log by position (`EpisodeLog.asked`) and offers them before anything else
(`recall.retrieval.retrieve`); a pointed turn the window shows is not shown twice.

`pointed` reads the question, in English, and only says what a question names
explicitly: an ordinal or a count of questions ("my third question", "two questions
ago", "what did I ask first", "the start of this conversation"), or a recap of the whole
conversation. "When did I first go hiking?" points at nothing: it asks about a first time,
not about the conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
    "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
}  # fmt: skip
COUNTS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3,
}  # fmt: skip
MAX_POSITION = 50
"""The farthest place a question may name: "my 400th question" points at nothing."""
READ_CHARS = 300
"""How much of a long message is read, from its start and from its end: a question that
points somewhere is short, and a long paste is not read whole on the turn's path."""

_ORD = r"(?P<ord>" + "|".join(ORDINALS) + r"|\d{1,3}(?:st|nd|rd|th))"
_COUNT = r"(?P<count>" + "|".join(COUNTS) + r"|\d{1,3})"
_UNIT = r"(?:questions?|messages?|turns?|exchanges?|things?)"
_SAY = r"(?:ask(?:ed)?|say|said|tell|told|mention(?:ed)?|wr[io]te|write|bring up|brought up)"
_THREAD = r"(?:this|our|the|today's)\s+(?:conversation|chat|session|discussion|talk)"

_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+(?:ago|back|before)\b")  # n back, 1: the newest
_LAST = re.compile(r"\b(?:my|your|the)\s+(?:last|previous)\s+(?:question|message|answer|reply)\b")
_FROM_START = [  # the nth question of the conversation, the oldest first
    re.compile(rf"\b(?:my|your)\s+{_ORD}\s+(?:question|message|answer|reply)\b"),
    re.compile(rf"\b(?:the\s+)?{_ORD}\s+{_UNIT}\s+(?:that\s+)?(?:i|you)\s+(?:\w+\s+)?{_SAY}\b"),
    re.compile(rf"\b(?:i|you)\s+{_SAY}\s+(?:you\s+|me\s+)?(?:about\s+)?(?P<first>first)\b"),
    re.compile(rf"\b(?P<start>start|beginning|outset)\s+of\s+{_THREAD}\b"),
]
_RECAP_ASK = re.compile(r"\b(?:recap|summari[sz]e|sum up|go over|list|remind me of)\b")
_RECAP_WHAT = re.compile(r"\b(?:everything|all|what)\b")
_RECAP_SAID = re.compile(rf"\b(?:we|i)\s+(?:\w+\s+)?(?:talked|discussed|covered|{_SAY})\b")
_RECAP_OF = re.compile(rf"\b(?:recap|summary)\s+of\s+{_THREAD}\b")


def _recap(text: str) -> bool:
    """A recap of the conversation: "recap / summarize ... everything ... we talked about"."""
    if _RECAP_OF.search(text):
        return True
    for sentence in re.split(r"[?.!]", text):
        ask = _RECAP_ASK.search(sentence)
        what = ask and _RECAP_WHAT.search(sentence, ask.end())
        if what and _RECAP_SAID.search(sentence, what.end()):
            return True
    return False


@dataclass(frozen=True)
class Pointer:
    """The places in the conversation a question names (1 is the first, or the last).

    Attributes:
        from_start: The user's nth questions of the thread, counted from its first.
        back: The user's questions ``n`` questions ago (1: the one before this).
        every: A recap: every question of the thread.
    """

    from_start: tuple[int, ...] = ()
    back: tuple[int, ...] = ()
    every: bool = False

    def __bool__(self) -> bool:
        return bool(self.from_start or self.back or self.every)


def _ordinal(word: str) -> int:
    return ORDINALS.get(word) or int(re.sub(r"\D", "", word))


def pointed(question: str) -> Pointer:
    """The places of the conversation ``question`` names; an empty `Pointer` if none."""
    text = " ".join(question.lower().split())
    if len(text) > 2 * READ_CHARS:
        text = f"{text[:READ_CHARS]} . {text[-READ_CHARS:]}"
    back = {COUNTS.get(m["count"]) or int(m["count"]) for m in _AGO.finditer(text)}
    back |= {1} if _LAST.search(text) else set()
    start: set[int] = set()
    for pattern in _FROM_START:
        for m in pattern.finditer(text):
            groups = m.groupdict()
            start.add(_ordinal(groups["ord"]) if groups.get("ord") else 1)
    every = _recap(text)
    keep = lambda found: tuple(sorted(n for n in found if 1 <= n <= MAX_POSITION))  # noqa: E731
    return Pointer(from_start=keep(start), back=keep(back), every=every)


__all__ = ["MAX_POSITION", "Pointer", "pointed"]
