"""The kinds of memory come from one enum (`core.kinds.MemoryKind`): records, SQL, order."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_graph_agent.core.kinds import STORED, TIER_ORDER, MemoryKind, is_stored, is_turn
from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.recall.retrieval import prompt_order
from memory_graph_agent.storage.episode_index import EpisodeHit
from memory_graph_agent.storage.memory_rows import _SINCE_REFLECTION, Memory, memory_id

STORAGE = Path(__file__).resolve().parents[2] / "memory_graph_agent" / "storage"


def test_the_stored_values_are_the_ones_the_tables_hold():
    # no data migration: the strings stored before are the members' values
    assert [k.value for k in MemoryKind] == ["reflection", "summary", "episode", "fact"]
    assert set(STORED) == {"summary", "reflection"}
    assert list(TIER_ORDER) == ["reflection", "summary", "episode"]


def test_a_memory_holds_the_plain_value_and_keeps_its_id():
    memory = Memory("u", MemoryKind.SUMMARY, "text", 0.5, ["m1"], "t")
    assert type(memory.kind) is str and memory.kind == "summary"
    assert memory.id == memory_id("u", "t", "summary", ["m1"])  # the ids stored before
    assert Memory("u", "summary", "text", 0.5, ["m1"], "t").id == memory.id
    turn = EpisodeHit("t", "m", "Ann: hi", datetime(2024, 1, 1, tzinfo=UTC))
    assert type(episode_item(turn)["kind"]) is str


def test_a_memory_of_a_kind_that_is_not_stored_is_refused():
    for kind in ("episode", "fact", "note"):
        with pytest.raises(ValueError, match="stored memory's kind"):
            Memory("u", kind, "text", 0.5, [])


def test_turns_and_stored_kinds_are_told_apart_by_the_enum():
    assert is_turn("episode") and is_turn(MemoryKind.EPISODE) and not is_turn("summary")
    assert is_stored("reflection") and not is_stored("episode") and not is_stored(None)


def test_the_prompt_order_follows_the_tiers():
    items = [
        {"kind": "episode", "created_at": "2024-01-02"},
        {"kind": "summary", "id": "s"},
        {"kind": "episode", "created_at": "2024-01-01"},
        {"kind": "reflection", "id": "r"},
    ]
    kinds = [(m["kind"], m.get("created_at")) for m in prompt_order(items)]
    assert kinds == [
        ("reflection", None),
        ("summary", None),
        ("episode", "2024-01-01"),
        ("episode", "2024-01-02"),
    ]


def test_no_sql_of_storage_spells_a_kind():
    assert "s.kind = 'summary'" in _SINCE_REFLECTION  # written from the enum
    for path in STORAGE.glob("*.py"):
        text = path.read_text()
        for kind in MemoryKind:
            assert f"'{kind.value}'" not in text, f"{path.name} spells '{kind.value}'"
