"""Reciprocal-rank fusion, the memory score and budget filling (pure functions, no services)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from memory_graph_agent.recall.ranking import (
    RRF_K,
    fill_budget,
    memory_score,
    recency,
    rrf,
    shown_verbatim,
)


def keys(fused) -> list:
    return [f.key for f in fused]


def test_rrf_scores_are_the_sum_of_reciprocal_ranks():
    fused = rrf({"dense": ["a", "b", "c"], "keyword": ["c", "a"]})
    by_key = {f.key: f for f in fused}
    assert by_key["a"].score == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert by_key["c"].score == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))
    assert by_key["b"].score == pytest.approx(1 / (RRF_K + 2))
    assert by_key["a"].ranks == {"dense": 1, "keyword": 2}
    assert by_key["b"].ranks == {"dense": 2}
    assert keys(fused) == ["a", "c", "b"]


def test_rrf_agreement_beats_a_single_top_rank():
    # "both" is second in two channels; "solo" is first in one only
    fused = rrf({"x": ["solo", "both"], "y": ["other", "both"]})
    assert keys(fused)[0] == "both"


def test_rrf_dedupes_within_a_channel_at_the_best_rank():
    fused = rrf({"dense": ["a", "a", "b"]})
    assert keys(fused) == ["a", "b"]
    assert fused[0].ranks == {"dense": 1}
    assert fused[1].ranks == {"dense": 2}  # the duplicate does not take a rank
    assert fused[0].score == pytest.approx(1 / (RRF_K + 1))


def test_rrf_ties_go_to_the_better_rank_then_the_first_channel():
    # b and x both have exactly 1/(k+1): the channel listed first wins
    assert keys(rrf({"first": ["b"], "second": ["x"]})) == ["b", "x"]
    assert keys(rrf({"second": ["x"], "first": ["b"]})) == ["x", "b"]
    # a and c tie exactly (1 + 1/3), both with a best rank of 1: a's is in channel p
    fused = rrf({"p": ["a", "b", "c"], "q": ["c", "b", "a"]}, k=0)
    assert keys(fused) == ["a", "c", "b"]


def test_rrf_weights_and_empty_input():
    assert rrf({}) == []
    assert rrf({"a": []}) == []
    fused = rrf({"dense": ["a"], "keyword": ["b"]}, weights={"keyword": 2.0})
    assert keys(fused) == ["b", "a"]
    with pytest.raises(ValueError):
        rrf({"a": ["x"]}, k=-1)


def test_rrf_equal_scores_share_a_rank():
    fused = rrf(
        {"dense": ["a", "b", "c", "d"], "keyword": ["x"]},
        scores={"dense": [0.9, 0.8, 0.8, 0.7]},
    )
    by_key = {f.key: f for f in fused}
    assert [by_key[k].ranks["dense"] for k in "abcd"] == [1, 2, 2, 4]  # competition ranking
    assert by_key["b"].score == by_key["c"].score == pytest.approx(1 / (RRF_K + 2))
    assert by_key["x"].ranks == {"keyword": 1}  # channels without scores rank as before
    with pytest.raises(ValueError):
        rrf({"dense": ["a", "b"]}, scores={"dense": [0.5]})


def test_recency_halves_every_half_life():
    now = datetime(2026, 1, 31, tzinfo=UTC)
    assert recency(now, now, 30) == 1.0
    assert recency(now - timedelta(days=30), now, 30) == pytest.approx(0.5)
    assert recency(now - timedelta(days=90), now, 30) == pytest.approx(0.125)
    assert recency(now + timedelta(days=1), now, 30) == 1.0  # clock skew: not above 1
    assert recency(None, now, 30) == 0.0
    assert recency(datetime(2023, 5, 1, tzinfo=UTC), now, 30) < 1e-9
    with pytest.raises(ValueError):
        recency(now, now, 0)


def test_memory_score_is_a_weighted_mean_in_unit_range():
    assert memory_score(1.0, 0.0, 0.5, (1.0, 0.5, 0.5)) == pytest.approx(1.25 / 2)
    assert memory_score(0.2, 1.0, 1.0, (1.0, 0.0, 0.0)) == pytest.approx(0.2)
    assert memory_score(0.2, 1.0, 1.0, (0.0, 0.0, 0.0)) == pytest.approx(0.2)  # relevance
    assert memory_score(2.0, -1.0, 3.0, (1.0, 1.0, 1.0)) == pytest.approx(2 / 3)  # clamped
    # equal relevance: the more important item scores higher, whatever the scale
    assert memory_score(0.7, 0.5, 0.9, (1, 1, 1)) > memory_score(0.7, 0.5, 0.2, (1, 1, 1))


def episode(tokens: int, mid: str, text: str = "", speaker: str = "Ann") -> dict:
    return {
        "kind": "episode",
        "tokens": tokens,
        "source_ids": [mid],
        "text": f"{speaker}: {text or 'turn ' + mid}",
    }


def summary(tokens: int, text: str, *mids: str) -> dict:
    return {"kind": "summary", "tokens": tokens, "source_ids": list(mids), "text": text}


def test_fill_budget_skips_what_does_not_fit_and_keeps_order():
    items = [episode(50, "a"), episode(100, "b"), episode(30, "c"), episode(20, "d")]
    taken, used = fill_budget(items, 100)
    assert taken == [items[0], items[2], items[3]]
    assert used == 100
    assert fill_budget(items, 0) == ([], 0)


RAW = "[2023-05-08T13:56] Ann: I adopted a dog\n[2023-05-08T13:57] Bob: What breed?"


def test_fill_budget_skips_turns_a_taken_raw_summary_quotes():
    raw = summary(40, RAW, "m1", "m2")
    dog = episode(10, "m1", "I adopted a dog")
    other = episode(10, "m3")
    taken, used = fill_budget([raw, dog, other], 1000)
    assert taken == [raw, other] and used == 50
    assert fill_budget([raw, dog], 1000, dedupe=False)[0] == [raw, dog]


def test_fill_budget_gives_back_turns_a_later_raw_summary_quotes():
    dog = episode(10, "m1", "I adopted a dog")
    other = episode(10, "m9")
    raw = summary(40, RAW, "m1", "m2")
    taken, used = fill_budget([dog, other, raw], 1000)
    assert taken == [other, raw] and used == 50
    # the freed tokens count: 10 + 10 used, the summary needs 40, the budget is 50
    assert fill_budget([dog, other, raw], 50)[0] == [other, raw]


def test_fill_budget_keeps_turns_an_llm_summary_paraphrases():
    llm = summary(30, "The user adopted a puppy.", "m1", "m2")
    dog = episode(10, "m1", "I adopted a dog")
    assert fill_budget([llm, dog], 1000)[0] == [llm, dog]
    assert fill_budget([dog, llm], 1000)[0] == [dog, llm]
    # provenance matters too: the same words from another message are not a duplicate
    quoted = summary(40, RAW, "m7", "m8")
    assert fill_budget([quoted, dog], 1000)[0] == [quoted, dog]


def test_fill_budget_excludes_window_messages():
    items = [episode(10, "w1"), summary(10, "x", "w1", "old"), episode(10, "m2")]
    taken, _ = fill_budget(items, 1000, exclude={"w1"})
    assert taken == items[1:]  # partly outside the window: kept


def _fill_budget_reference(items, budget, dedupe=True, exclude=()):
    """`fill_budget` as first written: every taken pair checked with `shown_verbatim`."""
    excluded, taken, memories, groups, used = set(exclude), [], [], set(), 0
    for item in items:
        sources = set(item.get("source_ids") or ())
        if sources and sources <= excluded:
            continue
        turn = item.get("kind") == "episode"
        if dedupe and turn and any(shown_verbatim(item, t) for t in memories):
            continue
        shown = [t for t in taken if shown_verbatim(t, item)] if dedupe and not turn else []
        freed = sum(int(t["tokens"]) for t in shown)
        group = item.get("group")
        cost = int(item["tokens"]) + (
            int(item.get("group_tokens") or 0) if group is not None and group not in groups else 0
        )
        if used - freed + cost > budget:
            continue
        if shown:
            taken = [t for t in taken if not any(t is s for s in shown)]
        taken.append(item)
        if not turn:
            memories.append(item)
        groups.add(group)
        used += cost - freed
    return taken, used


def test_fill_budget_checks_only_pairs_that_share_a_source_and_takes_the_same():
    """The source-id prefilter changes nothing: the same items as checking every pair."""
    rng = random.Random(11)
    words = ["dog", "cat", "Paris", "tea", "run", "blue", "book", "sea"]
    for _ in range(400):
        mids = [f"m{i}" for i in range(rng.randint(1, 8))]
        texts = {m: " ".join(rng.sample(words, 2)) for m in mids}
        items = []
        for _ in range(rng.randint(0, 14)):
            if rng.random() < 0.6:
                mid = rng.choice(mids)
                item = episode(rng.randint(1, 30), mid, texts[mid])
                if rng.random() < 0.15:  # a turn with two ids never counts as shown
                    item["source_ids"].append(rng.choice(mids))
                if rng.random() < 0.5:
                    item.update(group=rng.choice("ab"), group_tokens=rng.randint(0, 4))
            else:
                chosen = rng.sample(mids, rng.randint(0, len(mids)))
                quoted = rng.random() < 0.7  # a raw summary quotes its turns, else paraphrases
                body = "\n".join(f"Ann: {texts[m]}" for m in chosen) if quoted else "gist"
                item = summary(rng.randint(1, 60), body, *chosen)
            items.append(item)
        budget, dedupe = rng.randint(0, 150), rng.random() < 0.8
        exclude = set(rng.sample(mids, rng.randint(0, min(2, len(mids)))))
        expected = _fill_budget_reference(items, budget, dedupe, exclude)
        taken, used = fill_budget(items, budget, dedupe=dedupe, exclude=exclude)
        assert [id(t) for t in taken] == [id(t) for t in expected[0]] and used == expected[1]
