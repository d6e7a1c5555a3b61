"""Which summaries a reflection reads: a bounded, most-important-first selection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_graph_agent.core.tokens import text_tokens
from memory_graph_agent.formation.reflection import ITEM_TOKENS, select_for_reflection
from memory_graph_agent.storage.memories import Memory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _summary(i: int, text: str, importance: float) -> Memory:
    return Memory(
        user_id="u1",
        kind="summary",
        text=text,
        importance=importance,
        source_ids=[f"m{i}"],
        created_at=T0 + timedelta(hours=i),
    )


def test_the_listing_fits_its_budget_however_many_summaries_wait() -> None:
    since = [_summary(i, "raw transcript line. " * 400, 0.3) for i in range(50)]
    since += [_summary(50, "The user likes tea.", 0.5)]
    read, listing = select_for_reflection(since, 1_000)
    assert text_tokens(listing) <= 1_000
    assert since[-1] in read, "the most important summary is read first"
    assert all(text_tokens(line) <= ITEM_TOKENS + 10 for line in listing.splitlines())
    assert [m.created_at for m in read] == sorted(m.created_at for m in read), "oldest first"


def test_a_budget_below_one_summary_still_reads_one_cut_to_it() -> None:
    read, listing = select_for_reflection([_summary(0, "word " * 2_000, 0.5)], 40)
    assert len(read) == 1 and text_tokens(listing) <= 60
