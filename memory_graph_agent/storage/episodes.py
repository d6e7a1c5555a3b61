"""The episodic log: every message, append-only, in Postgres, before it can leave the window.

Table ``episodes`` (one row per (user, thread, message id)); ``summarized`` is the
extracted-up-to marker: it flips to true when the message's summary is stored, so after
any loss of Redis data the unsummarized messages can be found and re-queued.

Table ``episode_vectors_<dim>`` makes the log searchable: one row per summarized human
or AI message with its embedding (HNSW, cosine) and a generated ``tsvector`` (GIN), so
recall can search raw turns densely and by keyword. Its rows reference ``episodes``
with ``ON DELETE CASCADE``: erasing a user's episodes erases their vectors too
(indexing and search: `memory_graph_agent.storage.episode_index`).
"""

from __future__ import annotations

from memory_graph_agent.ids import validate_id
from memory_graph_agent.storage.episode_index import (
    EpisodeHit,
    EpisodeIndex,
    embedding_text,
    episode_content,
    keyword_terms,
    speaker,
)
from memory_graph_agent.storage.memory_rows import _version_tuple
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Database
from memory_graph_agent.storage.window import StoredMessage, parse_ts

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
    # a recalled turn's neighbours: the previous and next message of its thread
    "CREATE INDEX IF NOT EXISTS episodes_thread_seq ON episodes (user_id, thread_id, seq)",
]


def _vector_schema(table: str, dim: int) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS "{table}" (
            user_id TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            embedding vector({dim}) NOT NULL,
            content TEXT NOT NULL,
            ts TIMESTAMPTZ NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
            PRIMARY KEY (user_id, thread_id, message_id),
            FOREIGN KEY (user_id, thread_id, message_id)
                REFERENCES episodes (user_id, thread_id, message_id) ON DELETE CASCADE
        )""",
        # In-row vectors (see storage.memories); the primary key doubles as the btree on
        # user_id that every per-user query filters on.
        f'ALTER TABLE "{table}" ALTER COLUMN embedding SET STORAGE PLAIN',
        f'CREATE INDEX IF NOT EXISTS "{table}_tsv" ON "{table}" USING gin (tsv)',
        f'CREATE INDEX IF NOT EXISTS "{table}_hnsw" ON "{table}" '
        "USING hnsw (embedding vector_cosine_ops)",
    ]


def _to_message(row: dict) -> StoredMessage:
    return StoredMessage(
        id=row["message_id"],
        role=row["role"],
        name=row["name"],
        content=row["content"],
        ts=row["ts"].isoformat(),
    )


@guarded("postgres")
class EpisodeLog(EpisodeIndex):
    """Append-only raw conversation log, per user and thread."""

    def __init__(
        self, db: Database, dim: int | None = None, query_options: list[str] | None = None
    ) -> None:
        self.db = db
        self.dim = dim
        self.vector_table = f"episode_vectors_{dim}" if dim else None
        self.query_options = query_options or []

    @classmethod
    async def open(cls, db: Database, dim: int | None = None) -> EpisodeLog:
        """Create the log (and, given the embedding ``dim``, its vector table) if needed."""
        statements = list(_SCHEMA) + (_vector_schema(f"episode_vectors_{dim}", dim) if dim else [])
        try:
            await db.run(*statements)
        except Exception as exc:  # concurrent CREATE by another process
            if "already exists" not in str(exc) and "duplicate key" not in str(exc):
                raise
            await db.run(*statements)  # IF NOT EXISTS: the rest is a no-op now
        options: list[str] = []
        if dim:
            version = await db.run("SELECT extversion FROM pg_extension WHERE extname='vector'")
            if version and _version_tuple(version[0]["extversion"]) >= (0, 8):
                options.append("hnsw.iterative_scan = relaxed_order")
        return cls(db, dim, options)

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
            "ts": [parse_ts(m.ts) for m in messages],
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
        rows = await self.db.run(*statements)
        return int(rows[0]["n"])

    async def mark_summarized(self, user_id: str, thread_id: str, ids: list[str]) -> int:
        """Advance the extracted-up-to marker over these messages."""
        if not ids:
            return 0
        rows = await self.db.run(
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
        rows = await self.db.run(
            (
                "SELECT message_id, role, name, content, ts FROM episodes WHERE user_id = :user_id "
                "AND thread_id = :thread_id AND NOT summarized ORDER BY seq",
                {"user_id": validate_id(user_id, "user_id"), "thread_id": thread_id},
            ),
        )
        return [_to_message(r) for r in rows]

    async def history(self, user_id: str, thread_id: str | None = None) -> list[StoredMessage]:
        """The raw conversation(s) of a user, oldest first (audit and replay)."""
        where = "user_id = :user_id" + (" AND thread_id = :thread_id" if thread_id else "")
        rows = await self.db.run(
            (
                f"SELECT message_id, role, name, content, ts FROM episodes WHERE {where} "
                "ORDER BY thread_id, seq",
                {"user_id": validate_id(user_id, "user_id"), "thread_id": thread_id},
            ),
        )
        return [_to_message(r) for r in rows]

    # ------------------------------------------------------------------ search index

    def _table(self) -> str:
        if not self.vector_table:
            raise RuntimeError("EpisodeLog was opened without an embedding dimension")
        return self.vector_table

    async def messages(self, user_id: str, thread_id: str, ids: list[str]) -> list[StoredMessage]:
        """Logged messages of the thread with these ids, in log order."""
        if not ids:
            return []
        rows = await self.db.run(
            (
                "SELECT message_id, role, name, content, ts FROM episodes "
                "WHERE user_id = :user_id AND thread_id = :thread_id "
                "AND message_id = ANY(CAST(:ids AS text[])) ORDER BY seq",
                {
                    "user_id": validate_id(user_id, "user_id"),
                    "thread_id": validate_id(thread_id, "thread_id"),
                    "ids": list(ids),
                },
            ),
        )
        return [_to_message(r) for r in rows]


__all__ = [
    "EpisodeHit",
    "EpisodeLog",
    "embedding_text",
    "episode_content",
    "keyword_terms",
    "speaker",
]
