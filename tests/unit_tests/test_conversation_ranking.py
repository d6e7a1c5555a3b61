"""The conversation in progress in recall's ranking and fill (pure logic, no server)."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_graph_agent.recall.conversation import (
    conversation_chars,
    conversation_items,
    leads,
)
from memory_graph_agent.storage.episodes import EpisodeHit

AT = datetime(2026, 1, 2, tzinfo=UTC)


def turns(*ids: str) -> list[EpisodeHit]:
    """The thread's turns, newest first."""
    return [EpisodeHit("t", i, f"user: said {i}", AT) for i in ids]


def test_the_fill_offers_what_recall_did_not_keep_newest_first() -> None:
    kept = [{"id": "t:b", "kind": "episode"}]
    items = conversation_items(turns("c", "b", "a"), kept)
    assert [m["id"] for m in items] == ["t:c", "t:a"]
    assert all(m["via"] == "conversation" and m["score"] is None for m in items)
    assert items[0]["text"] == "user: said c" and items[0]["source_ids"] == ["c"]


def test_the_thread_is_read_as_far_as_twice_the_budget_could_show() -> None:
    assert conversation_chars(1800) == 14_400
    assert conversation_chars(-5) == 0


def test_the_conversation_leads_when_nothing_recall_found_matches_well() -> None:
    weak = {"thread_id": "old", "similarity": 0.3}
    keyword_only = {"thread_id": "t", "similarity": None}
    assert leads([weak, keyword_only], 0.4)
    assert not leads([weak, {"thread_id": "t", "similarity": 0.4}], 0.4)  # any thread's turn
    assert not leads([weak], 0.0)  # 0: recall always first
    assert leads([], 0.4)
