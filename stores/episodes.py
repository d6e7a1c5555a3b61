"""The episodic log: every message, append-only, in Postgres, before it can leave the window.

Table ``episodes`` (one row per (user, thread, message id)); ``summarized`` is the
extracted-up-to marker: it flips to true when the message's summary is stored, so after
any loss of Redis data the unsummarized messages can be found and re-queued.
"""

from __future__ import annotations

from datetime import UTC, datetime

from langchain_postgres import PGEngine

from stores.ids import validate_id
from stores.memories import _run
from stores.window import StoredMessage

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS episodes (
        user_id TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        seq BIGSERIAL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL,
        ts TIMESTAMPTZ NOT NULL,
        logged_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        summarized BOOLEAN NOT NULL DEFAULT false,
        PRIMARY KEY (user_id, thread_id, message_id)
    )""",
    "CREATE INDEX IF NOT EXISTS episodes_open ON episodes (user_id, thread_id, seq) "
    "WHERE NOT summarized",
]


def _ts(value: str) -> datetime:
    try:
        ts = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return datetime.now(UTC)
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


class EpisodeLog:
    """Append-only raw conversation log, per user and thread."""

    def __init__(self, engine: PGEngine) -> None:
        self.engine = engine

    @classmethod
    async def open(cls, engine: PGEngine) -> EpisodeLog:
        """Create the table if needed."""
        try:
            await _run(engine, *_SCHEMA)
        except Exception as exc:  # concurrent CREATE by another process
            if "already exists" not in str(exc) and "duplicate key" not in str(exc):
                raise
        return cls(engine)

    async def append(
        self, user_id: str, thread_id: str, messages: list[StoredMessage], *, durable: bool = True
    ) -> int:
        """Log messages (each once; re-logging is a no-op) and return the open count.

        The open count is how many logged messages of the thread are not summarized yet
        (the recovery check compares it with what Redis holds). ``durable=False`` skips
        waiting for the WAL flush: fine while the messages are still in the window.
        """
        validate_id(user_id, "user_id")
        validate_id(thread_id, "thread_id")
        params = {
            "user_id": user_id,
            "thread_id": thread_id,
            "ids": [m.id for m in messages],
            "roles": [m.role for m in messages],
            "names": [m.name for m in messages],
            # Postgres text cannot hold NUL; the Redis copy keeps the original.
            "contents": [m.content.replace("\x00", "") for m in messages],
            "ts": [_ts(m.ts) for m in messages],
        }
        statements: list = [] if durable else ["SET LOCAL synchronous_commit = off"]
        if messages:
            statements.append(
                (
                    "INSERT INTO episodes "
                    "(user_id, thread_id, message_id, role, name, content, ts) "
                    "SELECT :user_id, :thread_id, m.id, m.role, m.name, m.content, m.ts "
                    "FROM unnest(CAST(:ids AS text[]), CAST(:roles AS text[]), "
                    "CAST(:names AS text[]), CAST(:contents AS text[]), "
                    "CAST(:ts AS timestamptz[])) "
                    "WITH ORDINALITY AS m(id, role, name, content, ts, ord) ORDER BY m.ord "
                    "ON CONFLICT DO NOTHING",
                    params,
                )
            )
        statements.append(
            (
                "SELECT count(*) AS n FROM episodes WHERE user_id = :user_id "
                "AND thread_id = :thread_id AND NOT summarized",
                params,
            )
        )
        rows = await _run(self.engine, *statements)
        return int(rows[0]["n"])

    async def open_count(self, user_id: str, thread_id: str) -> int:
        """How many logged messages of the thread are not summarized yet."""
        rows = await _run(
            self.engine,
            (
                "SELECT count(*) AS n FROM episodes WHERE user_id = :user_id "
                "AND thread_id = :thread_id AND NOT summarized",
                {"user_id": validate_id(user_id, "user_id"), "thread_id": thread_id},
            ),
        )
        return int(rows[0]["n"])

    async def mark_summarized(self, user_id: str, thread_id: str, ids: list[str]) -> int:
        """Advance the extracted-up-to marker over these messages."""
        if not ids:
            return 0
        rows = await _run(
            self.engine,
            (
                "UPDATE episodes SET summarized = true WHERE user_id = :user_id "
                "AND thread_id = :thread_id AND message_id = ANY(CAST(:ids AS text[])) "
                "RETURNING 1",
                {"user_id": user_id, "thread_id": thread_id, "ids": ids},
            ),
        )
        return len(rows)

    async def unsummarized(self, user_id: str, thread_id: str) -> list[StoredMessage]:
        """Logged messages whose summary is not stored yet, oldest first."""
        rows = await _run(
            self.engine,
            (
                "SELECT message_id, role, name, content, ts FROM episodes WHERE user_id = :user_id "
                "AND thread_id = :thread_id AND NOT summarized ORDER BY seq",
                {"user_id": validate_id(user_id, "user_id"), "thread_id": thread_id},
            ),
        )
        return [
            StoredMessage(
                id=r["message_id"],
                role=r["role"],
                name=r["name"],
                content=r["content"],
                ts=r["ts"].isoformat(),
            )
            for r in rows
        ]

    async def history(self, user_id: str, thread_id: str | None = None) -> list[StoredMessage]:
        """The raw conversation(s) of a user, oldest first (audit and replay)."""
        where = "user_id = :user_id" + (" AND thread_id = :thread_id" if thread_id else "")
        rows = await _run(
            self.engine,
            (
                f"SELECT message_id, role, name, content, ts FROM episodes WHERE {where} "
                "ORDER BY thread_id, seq",
                {"user_id": validate_id(user_id, "user_id"), "thread_id": thread_id},
            ),
        )
        return [
            StoredMessage(
                id=r["message_id"],
                role=r["role"],
                name=r["name"],
                content=r["content"],
                ts=r["ts"].isoformat(),
            )
            for r in rows
        ]
