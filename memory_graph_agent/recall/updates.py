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
    for n, (newer, words) in enumerate(in_time):
        stale = [
            scores[older["id"]]
            for older, theirs in in_time[:n]
            if older.get("thread_id") != newer.get("thread_id") and len(words & theirs) >= need
        ]
        if stale and max(stale) >= scores[newer["id"]]:
            scores[newer["id"]] = max(stale) + RAISE
    out = [
        {**m, "score": round(scores[m["id"]], 7), "raised_as_update": True}
        if m.get("id") in scores and scores[m["id"]] > float(m["score"])
        else m
        for m in items
    ]
    return sorted(out, key=lambda m: -float(m["score"]))
