"""Builders shared by unit and integration tests: stored messages, LoCoMo samples,
migrations undone."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

from memory_graph_agent.core.turns import turn_boundary_cut
from memory_graph_agent.storage.postgres import SCHEMA_TABLE
from memory_graph_agent.storage.window import StoredMessage

TS = "2026-01-02T03:04:05+00:00"

# `_vector_schema` at schema version 1: the tsvector stored as EXTENDED (out of line)
V1_VECTOR_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS "{table}" (
        user_id TEXT NOT NULL, thread_id TEXT NOT NULL, message_id TEXT NOT NULL,
        embedding vector({dim}) NOT NULL, content TEXT NOT NULL, ts TIMESTAMPTZ NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
        PRIMARY KEY (user_id, thread_id, message_id),
        FOREIGN KEY (user_id, thread_id, message_id)
            REFERENCES episodes (user_id, thread_id, message_id) ON DELETE CASCADE
    )""",
    'ALTER TABLE "{table}" ALTER COLUMN embedding SET STORAGE PLAIN',
    'CREATE INDEX IF NOT EXISTS "{table}_tsv" ON "{table}" USING gin (tsv)',
    'CREATE INDEX IF NOT EXISTS "{table}_hnsw" ON "{table}" '
    "USING hnsw (embedding vector_cosine_ops)",
]


def msg(role: str, mid: str | None = None, content: str = "", tool_calls=None, tool_call_id=None):
    mid = mid or f"{role}-{uuid.uuid4().hex[:8]}"
    return StoredMessage(
        id=mid,
        role=role,
        content=content or f"{role} {mid}",
        ts=TS,
        tool_calls=list(tool_calls or []),
        tool_call_id=tool_call_id,
    )


def tc(call_id: str) -> dict:
    return {"name": "lookup", "args": {"q": call_id}, "id": call_id, "type": "tool_call"}


def tool_conversation() -> list[list[StoredMessage]]:
    """Turns (lists of messages) mixing plain turns and tool-call turns."""
    turns: list[list[StoredMessage]] = []
    for t in range(6):
        h = msg("human", f"h{t}")
        if t % 2 == 0:
            calls = [tc(f"c{t}a"), tc(f"c{t}b")] if t % 4 == 0 else [tc(f"c{t}a")]
            ai_call = msg("ai", f"call{t}", content="", tool_calls=calls)
            results = [msg("tool", f"r{c['id']}", tool_call_id=c["id"]) for c in calls]
            turns.append([h, ai_call, *results, msg("ai", f"a{t}")])
        else:
            turns.append([h, msg("ai", f"a{t}")])
    return turns


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def assert_tool_groups_intact(pending: list[StoredMessage], window: list[StoredMessage]) -> None:
    """Every AI tool call sits in the same list as all of its tool results."""
    where: dict[str, str] = {}
    for name, lst in (("pending", pending), ("window", window)):
        for m in lst:
            where[m.id] = name
    for lst in (pending, window):
        for m in lst:
            for call in m.tool_calls:
                for r in pending + window:
                    if r.role == "tool" and r.tool_call_id == call["id"]:
                        assert where[r.id] == where[m.id], (
                            f"tool call {m.id} in {where[m.id]} but result {r.id} in {where[r.id]}"
                        )
    if pending and window:
        last, first = pending[-1], window[0]
        assert not (last.role == "ai" and last.tool_calls and first.role == "tool"), (
            "pending ends with a tool-call AI message whose results stayed in the window"
        )
    assert not window or window[0].role != "tool", "window starts with an orphan tool result"


def locomo_sample(
    sample_id: str, sessions: dict[int, list[tuple[str, str]]], qa: list[dict]
) -> dict:
    conversation = {"speaker_a": "Alice", "speaker_b": "Bob"}
    for n, turns in sessions.items():
        conversation[f"session_{n}_date_time"] = f"{n}:00 pm on {n} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": speaker, "dia_id": f"D{n}:{i}", "text": text}
            for i, (speaker, text) in enumerate(turns, start=1)
        ]
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa}


async def log_turns(services, user, thread, *texts, day="2024-03-01", hour=10) -> list[str]:
    """Log and index ``texts`` as consecutive turns of ``thread``; return their ids."""
    messages = [
        StoredMessage(
            id=f"m-{uuid.uuid4().hex[:8]}",
            role="human" if i % 2 == 0 else "ai",
            content=text,
            ts=f"{day}T{hour:02d}:{i:02d}:00+00:00",
        )
        for i, text in enumerate(texts)
    ]
    await services.episodes.append(user, thread, messages)
    await services.episodes.index(user, thread, messages, services.embeddings)
    return [m.id for m in messages]


async def turns_table_record(services) -> list[dict]:
    """The turns table's own migration record (version, when it last ran)."""
    return await services.db.query(
        f"SELECT version, migrated_at FROM {SCHEMA_TABLE} WHERE component = :c",
        {"c": services.episodes.vector_table},
    )


@contextlib.asynccontextmanager
async def without_component(services, component: str, drop: str) -> AsyncIterator[None]:
    """Within: the turns table's ``component`` undone (``drop`` run, its record deleted), as
    on a database made before it; after: the episode log opened again, which migrates it
    (the session's other tests need it, so this happens even when the block fails)."""
    try:
        await services.db.run(
            drop, (f"DELETE FROM {SCHEMA_TABLE} WHERE component = :c", {"c": component})
        )
        yield
    finally:
        await type(services.episodes).open(services.db, services.episodes.dim)


def keep_last(window_size: int):
    """The window's count rule alone, as `WindowStore.overflow` takes it."""
    return lambda items: turn_boundary_cut(items, window_size)
