"""A newer statement on a subject never ranks below an older one (pure ranking rule)."""

from __future__ import annotations

from memory_graph_agent.recall.updates import newest_first

QUERY = "How many trips have I taken with my Canon camera?"


def turn(key: str, text: str, score: float, day: int, thread: str | None = None) -> dict:
    return {
        "id": key,
        "kind": "episode",
        "text": text,
        "score": score,
        "created_at": f"2023-05-{day:02d}T10:00:00",
        "thread_id": thread or f"s{day}",
    }


def test_the_update_is_raised_above_the_stale_statement():
    stale = turn("old", "user: I have taken my Canon camera on four trips so far.", 0.9, 1)
    update = turn("new", "user: My Canon camera came on a fifth trip last week!", 0.5, 20)
    other = turn("x", "user: I love hiking in the Alps.", 0.7, 10)
    ranked = newest_first([stale, other, update], QUERY)
    assert [m["id"] for m in ranked] == ["new", "old", "x"]
    assert ranked[0]["raised_as_update"] and ranked[0]["score"] > 0.9
    assert "raised_as_update" not in ranked[1]


def test_an_update_already_above_is_left_alone_and_nothing_is_lowered():
    stale = turn("old", "user: My Canon camera has been on four trips.", 0.4, 1)
    update = turn("new", "user: Five trips now with the Canon camera.", 0.8, 20)
    ranked = newest_first([update, stale], QUERY)
    assert [(m["id"], m["score"]) for m in ranked] == [("new", 0.8), ("old", 0.4)]


def test_other_subjects_the_assistant_and_the_same_session_are_not_updates():
    stale = turn("old", "user: My Canon camera has been on four trips.", 0.9, 1)
    assistant = turn("a", "assistant: A Canon camera is great for trips.", 0.3, 20)
    same = turn("same", "user: The Canon camera trips were fun.", 0.2, 2, thread="s1")
    unrelated = turn("u", "user: I bought a new camera bag.", 0.1, 30)  # one shared word
    items = [stale, assistant, same, unrelated]
    assert newest_first(items, QUERY) == items
