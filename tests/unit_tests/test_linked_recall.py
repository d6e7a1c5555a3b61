"""Recall's compact block and the turns linked to hits (pure functions, no services)."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_graph_agent.prompting.rendering import render_memories, text_tokens
from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.recall.linking import link_turns, summary_turns
from memory_graph_agent.recall.ranking import RRF_K, fill_budget
from memory_graph_agent.recall.retrieval import prompt_order
from memory_graph_agent.settings import RecallWeights
from memory_graph_agent.storage.episode_index import EpisodeHit
from memory_graph_agent.storage.memory_rows import Memory

DAY1 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
DAY2 = datetime(2023, 6, 1, 9, 0, tzinfo=UTC)


def weights(
    neighbour_weight: float = 0.5, summary_turn_weight: float = 0.3, recall_rrf_k: int = RRF_K
) -> RecallWeights:
    return RecallWeights(
        neighbour_weight=neighbour_weight,
        summary_turn_weight=summary_turn_weight,
        recall_rrf_k=recall_rrf_k,
    )


def hit(mid: str, text: str, ts: datetime = DAY1, thread: str = "t") -> EpisodeHit:
    return EpisodeHit(thread_id=thread, message_id=mid, content=f"Ann: {text}", ts=ts)


def fused(*hits: EpisodeHit, rrf: float = 0.02) -> list[dict]:
    items = []
    for i, h in enumerate(hits):
        item = episode_item(h)
        item.update(rrf=rrf / (i + 1), similarity=0.5, keyword_score=None)
        items.append(item)
    return items


def test_a_neighbour_joins_at_its_share_of_the_hits_score():
    items = fused(hit("m5", "I adopted a dog"))
    out = link_turns(items, [], [], [(("t", "m5"), hit("m6", "His name is Rex"))], weights())
    assert [m["id"] for m in out] == ["t:m5", "t:m6"]
    assert out[1]["rrf"] == 0.01 and out[1]["via"] == "neighbour"
    assert out[1]["source_ids"] == ["m6"] and out[1]["kind"] == "episode"


def test_a_neighbour_that_is_already_a_hit_keeps_the_larger_score():
    items = fused(hit("m5", "dog"), hit("m6", "Rex"), rrf=0.03)  # m6 has 0.015
    out = link_turns(items, [], [], [(("t", "m5"), hit("m6", "Rex"))], weights(0.9))
    assert out[1]["id"] == "t:m6" and out[1]["rrf"] == 0.027
    out = link_turns(items, [], [], [(("t", "m5"), hit("m6", "Rex"))], weights(0.1))
    assert out[1]["rrf"] == 0.015 and "via" not in out[1]


def test_neighbours_off_adds_nothing():
    items = fused(hit("m5", "dog"))
    out = link_turns(items, [], [], [(("t", "m5"), hit("m6", "Rex"))], weights(0.0, 0.0))
    assert [m["id"] for m in out] == ["t:m5"]


def test_the_turns_of_a_recalled_summary_rise_by_its_rank():
    summary = Memory("u", "summary", "Ann adopted Rex", 0.5, ["m1", "m2"], thread_id="t")
    summary.similarity = 0.8
    assert summary_turns([summary]) == [("t", "m1"), ("t", "m2")]
    items = fused(hit("m1", "I adopted a dog"), rrf=0.01)
    out = link_turns(items, [summary], [hit("m1", "dog"), hit("m2", "Rex")], [], weights())
    by_id = {m["id"]: m for m in out}
    boost = 0.3 / (RRF_K + 1)
    assert abs(by_id["t:m1"]["rrf"] - (0.01 + boost)) < 1e-6  # added to its own score
    assert abs(by_id["t:m2"]["rrf"] - boost) < 1e-6 and by_id["t:m2"]["via"] == "summary"
    # the boost uses the run's RRF constant
    out = link_turns(items, [summary], [hit("m2", "Rex")], [], weights(recall_rrf_k=5))
    assert abs({m["id"]: m for m in out}["t:m2"]["rrf"] - 0.3 / (5 + 1)) < 1e-6
    # a reflection's sources are summaries, not turns
    reflection = Memory("u", "reflection", "x", 0.5, ["m1"], thread_id="t")
    assert summary_turns([reflection]) == []


def test_turns_are_shown_by_date_each_day_under_one_line():
    items = [episode_item(h) for h in (hit("b", "later", DAY2), hit("a", "first"), hit("c", "x"))]
    memory = {"kind": "summary", "text": "Ann likes dogs", "created_at": "2023-07-01"}
    block = render_memories(prompt_order([*items, memory]))
    assert block.splitlines() == [
        "- [summary 2023-07-01] Ann likes dogs",
        "[2023-05-08]",
        "Ann: first",
        "Ann: x",
        "[2023-06-01]",
        "Ann: later",
    ]


def test_a_day_line_is_paid_once_and_counted_like_the_prompt():
    assert text_tokens("abc") == 1 and text_tokens("abcd") == 2  # the newline counts
    a = {"kind": "episode", "tokens": 10, "source_ids": ["a"], "text": "", "group": "d1"}
    a["group_tokens"] = 5
    b = dict(a, source_ids=["b"])
    c = dict(a, source_ids=["c"], group="d2")
    taken, used = fill_budget([a, b, c], 100)
    assert used == 10 + 5 + 10 + 10 + 5
    taken, used = fill_budget([a, b, c], 26)  # c's day line does not fit
    assert taken == [a, b] and used == 25


def test_a_transcript_summary_gives_way_to_its_turns():
    turns = [hit("m1", "I adopted a dog"), hit("m2", "His name is Rex")]
    raw = Memory("u", "summary", "[2023] Ann: I adopted a dog\n[2023] Ann: His name is Rex", 0.3,
                 ["m1", "m2"], thread_id="t")  # fmt: skip
    llm = Memory("u", "summary", "Ann adopted a dog called Rex.", 0.5, ["m1", "m2"], "t", id="x")
    items = [{"id": m.id, "kind": "summary", "rrf": 0.02, "source_ids": m.source_ids}
             for m in (raw, llm)]  # fmt: skip
    out = link_turns(items, [raw, llm], turns, [], weights(0.0, 0.3))
    ids = [m["id"] for m in out]
    assert raw.id not in ids and llm.id in ids
    assert {"t:m1", "t:m2"} <= set(ids)
    # one of its turns not fetched (e.g. not indexed): the transcript stays
    out = link_turns(items, [raw], turns[:1], [], weights(0.0, 0.3))
    assert raw.id in [m["id"] for m in out]
