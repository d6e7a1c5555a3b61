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


def _one_by_one(items: list[dict], query: str) -> list[dict]:
    """The rule as stated, each turn against every older turn (the reference)."""
    from memory_graph_agent.recall.topics import topic_words
    from memory_graph_agent.recall.updates import MIN_SHARED, RAISE

    asked = topic_words(query)
    need = min(MIN_SHARED, len(asked))
    subjects = {
        m["id"]: (m, topic_words(m["text"]) & asked)
        for m in items
        if m["kind"] == "episode" and not m["text"].startswith("assistant: ")
    }
    subjects = {k: v for k, v in subjects.items() if need and len(v[1]) >= need}
    if len(subjects) < 2:
        return items
    scores = {k: float(m["score"]) for k, (m, _) in subjects.items()}
    in_time = sorted(subjects.values(), key=lambda pair: pair[0]["created_at"])
    for n, (newer, words) in enumerate(in_time):
        stale = [
            scores[older["id"]]
            for older, theirs in in_time[:n]
            if older["thread_id"] != newer["thread_id"] and len(words & theirs) >= need
        ]
        if stale and max(stale) >= scores[newer["id"]]:
            scores[newer["id"]] = max(stale) + RAISE
    out = [
        {**m, "score": round(scores[m["id"]], 7), "raised_as_update": True}
        if scores.get(m["id"], m["score"]) > m["score"]
        else m
        for m in items
    ]
    return sorted(out, key=lambda m: -m["score"])


def test_the_update_rule_matches_checking_every_older_turn():
    """Looking at the sets of shared words, not every older turn, ranks the same."""
    import random

    rng = random.Random(5)
    words = ["canon", "camera", "trips", "hiking", "budget", "garden"]
    raised = 0
    for _ in range(3000):
        query = "How " + " ".join(rng.sample(words, rng.randint(0, 4)))
        items = []
        for i in range(rng.randint(0, 30)):
            speaker = rng.choice(["user", "user", "assistant", "Mel"])
            said = " ".join(rng.choices(words, k=rng.randint(0, 4)))
            items.append(
                {
                    **turn(f"t{i}", f"{speaker}: {said}", 0.0, rng.randint(1, 9)),
                    "kind": rng.choice(["episode", "episode", "summary"]),
                    "score": rng.choice([0.1, 0.5, round(rng.random(), 3)]),
                    "thread_id": rng.choice(["a", "b", "c", None]),
                }
            )
        items.sort(key=lambda m: -m["score"])
        ranked = newest_first([dict(m) for m in items], query)
        assert ranked == _one_by_one([dict(m) for m in items], query)
        raised += sum("raised_as_update" in m for m in ranked)
    assert raised > 1000  # the draws do raise updates
