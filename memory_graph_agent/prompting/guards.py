"""Checks that model output is grounded in what the user actually said.

A summary that drops or invents too many salient terms counts as a failed call, and a fact
whose value is not in the source text is dropped. Cheap and model-agnostic.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#'.-]*")
_COMMON = {
    "i",
    "i'm",
    "im",
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "so",
    "my",
    "me",
    "you",
    "your",
    "it",
    "is",
    "are",
    "was",
    "what",
    "who",
    "how",
    "why",
    "when",
    "where",
    "which",
    "tell",
    "hi",
    "hello",
    "hey",
    "thanks",
    "thank",
    "ok",
    "okay",
    "yes",
    "no",
    "please",
    "do",
    "can",
    "could",
    "would",
    "should",
    "this",
    "that",
    "these",
    "those",
    "we",
    "they",
    "he",
    "she",
    "user",
    "assistant",
    "human",
    "ai",
    "sure",
    "nice",
    "great",
    "well",
}
MIN_COVERAGE = 0.5
MAX_NOVELTY = 0.5


def salient_terms(text: str) -> set[str]:
    """Capitalised words and words with digits: names, places, products, numbers, dates.

    A capitalised word that only ever starts a sentence ("Over", "Tell") is not salient.
    """
    initial: set[str] = set()
    inner: set[str] = set()
    for match in _WORD.finditer(text):
        w = match.group().strip(".'-")
        if not w or w.lower() in _COMMON:
            continue
        if any(ch.isdigit() for ch in w):
            inner.add(w.lower())
        elif w[0].isupper():
            before = text[: match.start()].rstrip(" \t\"'(*")
            starts = not before or before[-1] in ".!?:\n-]"
            (initial if starts else inner).add(w.lower())
    return inner | {w for w in initial if w in inner}


def invents_few_entities(text: str, source: str) -> bool:
    """Whether at most half of the salient terms of ``text`` are absent from ``source``."""
    got = salient_terms(text)
    source_low = source.lower()
    novel = [t for t in got if t not in source_low]
    return not got or len(novel) / len(got) <= MAX_NOVELTY


def summary_is_faithful(summary: str, source: str) -> bool:
    """Whether ``summary`` keeps most salient terms of ``source`` and invents few."""
    wanted = salient_terms(source)
    if not summary.strip():
        return False
    low = summary.lower()
    if wanted and sum(1 for t in wanted if t in low) / len(wanted) < MIN_COVERAGE:
        return False
    return invents_few_entities(summary, source)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_SELF = re.compile(r"\b(i|i'm|im|i've|i'd|my|me|mine|we|our|user|user's)\b", re.IGNORECASE)


def self_statements(text: str) -> list[str]:
    """Sentences in which the user states something about themself (not questions)."""
    return [
        s
        for s in (p.strip() for p in _SENTENCE.split(text))
        if s and not s.endswith("?") and _SELF.search(s)
    ]


def fact_is_grounded(value: str, source: str) -> bool:
    """Whether every content word of a fact's value occurs in one self-statement of ``source``.

    "What is jazz?" grounds nothing; "I live in Berlin" grounds ``city=Berlin``.
    """
    words = [w.lower().strip(".'-") for w in _WORD.findall(value)]
    words = [w for w in words if len(w) >= 3 and w not in _COMMON]
    if not words:
        return False
    return any(all(w in s.lower() for w in words) for s in self_statements(source))


_PLACEHOLDER_KEY_WORDS = {
    "attribute",
    "snake",
    "short",
    "such",
    "example",
    "key",
    "value",
    "fact",
    "e.g",
}


def fact_key_is_valid(key: str) -> bool:
    """A real attribute name: 1-4 words, no schema placeholder copied by a small model."""
    parts = [p for p in key.lower().replace("-", "_").replace(" ", "_").split("_") if p]
    return 0 < len(parts) <= 4 and not (set(parts) & _PLACEHOLDER_KEY_WORDS)
