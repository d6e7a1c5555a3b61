"""The conversation in progress in recall's ranking and fill (pure logic, no server)."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_graph_agent.recall.conversation import (
    conversation_chars,
    conversation_items,
    leads,
    rank_conversation,
)
from memory_graph_agent.storage.episodes import EpisodeHit

AT = datetime(2026, 1, 2, tzinfo=UTC)


def turns(*ids: str) -> list[EpisodeHit]:
    """The thread's turns, newest first."""
    return [EpisodeHit("t", i, f"user: said {i}", AT) for i in ids]


def test_a_weight_of_zero_leaves_the_ranking_alone() -> None:
    items = [{"id": "t:a", "rrf": 0.2}]
    assert rank_conversation(items, turns("b", "a"), set(), 0.0, 5) is items


def test_the_newest_turn_off_screen_ranks_first_and_a_found_turn_adds_up() -> None:
    found = {"id": "t:c", "kind": "episode", "rrf": 0.05, "similarity": 0.4}
    ranked = rank_conversation([found], turns("w", "b", "c"), {"w"}, 1.0, 5)
    by_id = {m["id"]: m for m in ranked}
    assert "t:w" not in by_id  # on screen: no rank, no item
    assert by_id["t:b"]["conversation_rank"] == 1 and by_id["t:b"]["rrf"] == round(1 / 6, 6)
    assert by_id["t:b"]["via"] == "conversation" and by_id["t:b"]["similarity"] is None
    assert by_id["t:c"]["conversation_rank"] == 2
    assert by_id["t:c"]["rrf"] == round(0.05 + 1 / 7, 6) and by_id["t:c"]["similarity"] == 0.4
    assert [m["id"] for m in ranked] == ["t:c", "t:b"]


def test_the_fill_offers_what_recall_did_not_keep_newest_first() -> None:
    kept = [{"id": "t:b", "kind": "episode"}]
    items = conversation_items(turns("c", "b", "a"), kept)
    assert [m["id"] for m in items] == ["t:c", "t:a"]
    assert all(m["via"] == "conversation" and m["score"] is None for m in items)
    assert items[0]["text"] == "user: said c" and items[0]["source_ids"] == ["c"]


def test_the_thread_is_read_as_far_as_twice_the_budget_could_show() -> None:
    assert conversation_chars(1800) == 14_400
    assert conversation_chars(-5) == 0


def test_the_conversation_leads_when_nothing_of_another_thread_matches_well() -> None:
    ours = {"thread_id": "t", "similarity": 0.9}  # the thread's own match says nothing
    weak = {"thread_id": "old", "similarity": 0.3}
    keyword_only = {"thread_id": "old", "similarity": None}
    assert leads([ours, weak, keyword_only], "t", 0.4)
    assert not leads([ours, weak, {"thread_id": "old", "similarity": 0.4}], "t", 0.4)
    assert not leads([weak], "t", 0.0)  # 0: recall always first
    assert leads([], "t", 0.4)
