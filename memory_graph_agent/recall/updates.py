"""Knowledge that changes: a newer statement on a subject never ranks below an older one.

When the user says one thing and later another on the same subject ("I've taken my Canon
on four trips", then weeks later "that makes five trips"), recall may find both turns:
the stale one must not outrank the update. Two recalled turns speak of the same subject
when they share at least `MIN_SHARED` of the query's content words (all of them, for a
query with fewer). The assistant's turns are left out: they restate, the user updates.
Pure functions.
"""

from __future__ import annotations

from typing import Any

from memory_graph_agent.core.kinds import is_turn
from memory_graph_agent.recall.topics import topic_words

MIN_SHARED = 2
"""Query words two turns must share to speak of the same subject."""
ASSISTANT = "assistant: "
RAISE = 1e-6
"""How far above the stale turn an update is put."""


class _Best:
    """The best score of a set of turns, and the best of those outside its thread."""

    __slots__ = ("score", "thread", "elsewhere")

    def __init__(self) -> None:
        self.score: float | None = None
        self.thread: Any = None
        self.elsewhere: float | None = None
        """The best score of the turns of every other thread than ``thread``'s."""

    def add(self, score: float, thread: Any) -> None:
        """Count a turn of ``thread`` scored ``score``."""
        if self.score is None or (thread == self.thread and score > self.score):
            self.score, self.thread = score, thread
        elif thread != self.thread:
            if score > self.score:  # the old best is now the best of another thread
                self.elsewhere, self.score, self.thread = self.score, score, thread
            elif self.elsewhere is None or score > self.elsewhere:
                self.elsewhere = score

    def other_than(self, thread: Any) -> float | None:
        """The best score of the turns not of ``thread`` (``None``: there are none)."""
        return self.score if thread != self.thread else self.elsewhere


def newest_first(items: list[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    """``items`` (best score first), each update raised just above the stale turns it trails.

    A user's turn that came later than another turn of another session on the same subject
    gets a score just above that one's, if it had less; nothing is lowered. Returns the
    items re-sorted by score (ties keep their order).
    """
    asked = topic_words(query)
    need = min(MIN_SHARED, len(asked))
    if need == 0:
        return items
    subjects = {}
    for m in items:
        text = str(m.get("text", ""))
        if not is_turn(m.get("kind")) or text.startswith(ASSISTANT):
            continue
        shared = topic_words(text) & asked
        if len(shared) >= need:
            subjects[m["id"]] = (m, shared)
    if len(subjects) < 2:
        return items
    scores = {key: float(m["score"]) for key, (m, _) in subjects.items()}
    in_time = sorted(subjects.values(), key=lambda pair: str(pair[0].get("created_at", "")))
    # The best score said earlier on each set of shared words, in one thread and in any
    # other: an update needs the best older turn of another thread on its subject, and
    # turns share few word sets, so each turn looks at the sets, not at every older turn.
    earlier: dict[frozenset[str], _Best] = {}
    for newer, words in in_time:
        key, thread = newer["id"], newer.get("thread_id")
        older = [b.other_than(thread) for w, b in earlier.items() if len(words & w) >= need]
        stale = max((s for s in older if s is not None), default=None)
        if stale is not None and stale >= scores[key]:
            scores[key] = stale + RAISE
        earlier.setdefault(words, _Best()).add(scores[key], thread)
    out = [
        {**m, "score": round(scores[m["id"]], 7), "raised_as_update": True}
        if m.get("id") in scores and scores[m["id"]] > float(m["score"])
        else m
        for m in items
    ]
    return sorted(out, key=lambda m: -float(m["score"]))
