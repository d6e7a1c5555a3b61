"""The kinds of memory, in one place: what is stored, recalled and decided about.

`MemoryKind` names every kind; its values are the strings stored in Postgres (the
``kind`` column of the memories table, ``item_kind`` of ``memory_decisions``) and shown
in a recalled item's ``kind``, so adding a member needs no data migration. A member is a
`str`: it compares, hashes, formats and is sent to the database as its value. Records
that reach the graph's state (`Memory`, a recalled item) hold the plain value
(``MemoryKind.SUMMARY.value``), so a checkpoint never holds an enum.

To add a kind: add a member here, then say where it belongs: stored in the memories
table (`STORED`), its place in the prompt (`TIER_ORDER`), whether it is a raw turn
(`TURNS`).
"""

from __future__ import annotations

from enum import StrEnum


class MemoryKind(StrEnum):
    """Every kind of memory the agent keeps or recalls."""

    REFLECTION = "reflection"
    """An insight drawn from several summaries (the memories table)."""
    SUMMARY = "summary"
    """What a batch of evicted messages said (the memories table)."""
    EPISODE = "episode"
    """A raw turn that left the window, recalled as it was said (the turns table)."""
    FACT = "fact"
    """A profile fact (Redis); decided about like the others (``memory_decisions``)."""


STORED: tuple[MemoryKind, ...] = (MemoryKind.SUMMARY, MemoryKind.REFLECTION)
"""The kinds that are rows of the memories table (search, pin, forget, listing)."""
TURNS: tuple[MemoryKind, ...] = (MemoryKind.EPISODE,)
"""The kinds recalled as raw turns: shown under their day's date line, never touched."""
TIER_ORDER: dict[MemoryKind, int] = {
    MemoryKind.REFLECTION: 0,
    MemoryKind.SUMMARY: 1,
    MemoryKind.EPISODE: 2,
}
"""The prompt's order of recalled kinds: reflections, then summaries, then turns."""


def is_turn(kind: object) -> bool:
    """Whether a recalled item of ``kind`` is a raw turn."""
    return kind in TURNS


def is_stored(kind: object) -> bool:
    """Whether ``kind`` names rows of the memories table."""
    return kind in STORED
