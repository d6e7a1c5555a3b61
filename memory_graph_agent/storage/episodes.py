"""The episodic log: every message, append-only, in Postgres, before it can leave the window.

``episodes.summarized`` is the extracted-up-to marker, so after any loss of Redis data the
unsummarized messages can be re-queued. ``episode_vectors_<dim>`` makes the log searchable
(`episode_index`) and linked (`episode_links`); its rows go with their episode
(``ON DELETE CASCADE``), and their entity edges with them (`entity_links`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.storage import halfvec
from memory_graph_agent.storage.corpus_stats import corpus_statistics
from memory_graph_agent.storage.entity_links import EntityLinks
from memory_graph_agent.storage.episode_index import (
    INDEXED_ROLES,
    SPEAKER_SQL,
    EpisodeHit,
    _to_message,
    embedding_text,
    episode_content,
    keyword_terms,
    speaker,
)
from memory_graph_agent.storage.episode_links import (
    NEIGHBOURS_SCHEMA_VERSION,
    EpisodeLinks,
    neighbours_function,
)
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Database
from memory_graph_agent.storage.window import StoredMessage, parse_ts

SCHEMA_VERSION = 1
"""Raise it with a change to `_SCHEMA`: `Database.migrate` runs it again."""
VECTOR_SCHEMA_VERSION = 3
"""Raise it with a change to `_vector_schema`. 2: the keyword channel's corpus statistics;
3: ``halfvec`` vectors (`halfvec.to_halfvec`), ``tsv`` without positions (`_TSV`)."""
SPEAKER_SCHEMA_VERSION = 1
"""Raise it with a change to `_speaker_schema` (its own component: adding the index to a
table made before reruns neither the table's DDL nor its statistics' recount)."""
_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS episodes (
        user_id TEXT NOT NULL, thread_id TEXT NOT NULL, message_id TEXT NOT NULL,
        seq BIGSERIAL, role TEXT NOT NULL, name TEXT, content TEXT NOT NULL,
        ts TIMESTAMPTZ NOT NULL, logged_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        summarized BOOLEAN NOT NULL DEFAULT false,
        PRIMARY KEY (user_id, thread_id, message_id)
    )""",
    "CREATE INDEX IF NOT EXISTS episodes_open ON episodes (user_id, thread_id, seq) "
    "WHERE NOT summarized",
    # a recalled turn's neighbours: the previous and next message of its thread
    "CREATE INDEX IF NOT EXISTS episodes_thread_seq ON episodes (user_id, thread_id, seq)",
]
_LOG = (
    "INSERT INTO episodes (user_id, thread_id, message_id, role, name, content, ts) "
    "SELECT :user_id, :thread_id, m.id, m.role, m.name, m.content, m.ts "
    "FROM unnest(CAST(:ids AS text[]), CAST(:roles AS text[]), CAST(:names AS text[]), "
    "CAST(:contents AS text[]), CAST(:ts AS timestamptz[])) "
    "WITH ORDINALITY AS m(id, role, name, content, ts, ord) ORDER BY m.ord ON CONFLICT DO NOTHING"
)
RECENT_TURNS = 200
"""The newest turns of a thread `EpisodeLog.recent` returns at most."""
_OPEN = "WHERE user_id = :user_id AND thread_id = :thread_id AND NOT summarized"


_TSV = "tsv tsvector GENERATED ALWAYS AS (strip(to_tsvector('english', content))) STORED"
"""The words of a turn for the keyword channel, without their positions: BM25 reads which
words a turn has and how many (`episode_index`), never where they are."""


def _vector_schema(table: str, dim: int) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS "{table}" (
            user_id TEXT NOT NULL, thread_id TEXT NOT NULL, message_id TEXT NOT NULL,
            embedding {halfvec.column(dim)} NOT NULL, content TEXT NOT NULL,
            ts TIMESTAMPTZ NOT NULL,
            {_TSV},
            PRIMARY KEY (user_id, thread_id, message_id),
            FOREIGN KEY (user_id, thread_id, message_id)
                REFERENCES episodes (user_id, thread_id, message_id) ON DELETE CASCADE
        )""",
        halfvec.to_halfvec(table, dim),
        # In-row vectors (see storage.memories); the primary key doubles as the btree on
        # user_id that every per-user query filters on.
        f'ALTER TABLE "{table}" ALTER COLUMN embedding SET STORAGE PLAIN',
        # In-row tsvectors too: the keyword channel tests each candidate's, and one out of
        # line (TOAST) costs a second lookup per row. A table made before keeps its values
        # out of line, or with positions, until rewritten: the column is made again, in
        # place (`_inline_tsv`).
        _inline_tsv(table),
        f'CREATE INDEX IF NOT EXISTS "{table}_tsv" ON "{table}" USING gin (tsv)',
        halfvec.hnsw_index(table),
        *corpus_statistics(table),
    ]


def _speaker_schema(table: str) -> list[str]:
    """The index of who said each turn, per user, and the table's statistics.

    The dense search of a named speaker's turns probes the index before it scans
    (`EpisodeIndex.dense_statements`). It is built without ``CONCURRENTLY`` (the migration
    is one transaction): writes to the table wait for it, reads do not. The table is
    analyzed with it, so the planner knows how many turns each speaker has and reads a
    rare speaker's turns through the index instead of a long filtered HNSW scan.
    """
    return [
        f'CREATE INDEX IF NOT EXISTS "{table}_speaker" ON "{table}" (user_id, {SPEAKER_SQL})',
        f'ANALYZE "{table}"',
    ]


def _inline_tsv(table: str) -> str:
    """Store ``tsv`` as `_TSV` says, MAIN (in the row); rewrite the table once if it was not."""
    return (
        "DO $$ BEGIN IF (SELECT a.attstorage <> 'm' OR pg_get_expr(d.adbin, d.adrelid) "
        "NOT LIKE 'strip(%' FROM pg_attribute a JOIN pg_attrdef d "
        "ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        f"WHERE a.attrelid = '\"{table}\"'::regclass AND a.attname = 'tsv') THEN "
        f'ALTER TABLE "{table}" DROP COLUMN tsv, ADD COLUMN {_TSV}, '
        "ALTER COLUMN tsv SET STORAGE MAIN; END IF; END $$"
    )


def _turn_hits(rows: list[dict[str, Any]]) -> list[EpisodeHit]:
    """Logged messages as `EpisodeHit` turns (``Speaker: text``), in the rows' order."""
    return [
        EpisodeHit(r["thread_id"], r["message_id"], episode_content(_to_message(r)), r["ts"])
        for r in rows
    ]


@guarded("postgres")
class EpisodeLog(EpisodeLinks):
    """Append-only raw conversation log, per user and thread."""

    def __init__(
        self, db: Database, dim: int | None = None, query_options: list[str] | None = None
    ) -> None:
        self.db = db
        self.dim = dim
        self.vector_table = f"episode_vectors_{dim}" if dim else None
        self.query_options = query_options or []
        self.entities = EntityLinks(db, self.vector_table) if self.vector_table else None

    @classmethod
    async def open(cls, db: Database, dim: int | None = None) -> EpisodeLog:
        """Create the log (and, given the embedding ``dim``, its vector table) if needed."""
        await db.migrate("episodes", SCHEMA_VERSION, *_SCHEMA)
        if dim:
            table = f"episode_vectors_{dim}"
            await db.migrate(table, VECTOR_SCHEMA_VERSION, *_vector_schema(table, dim))
            await db.migrate(f"{table}_speaker", SPEAKER_SCHEMA_VERSION, *_speaker_schema(table))
            await db.migrate(
                f"{table}_neighbours", NEIGHBOURS_SCHEMA_VERSION, *neighbours_function(table)
            )
            await EntityLinks(db, table).migrate()
        iterative = dim and await db.iterative_scans()
        return cls(db, dim, ["hnsw.iterative_scan = relaxed_order"] if iterative else [])

    async def append(
        self, user_id: str, thread_id: str, messages: list[StoredMessage], *, durable: bool = True
    ) -> int:
        """Log messages (each once) and return how many of the thread are not summarized yet."""
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
        # not durable: no wait for the WAL flush, fine while the window still holds them
        statements: list = [] if durable else ["SET LOCAL synchronous_commit = off"]
        if messages:
            statements.append((_LOG, params))
        statements.append((f"SELECT count(*) AS n FROM episodes {_OPEN}", params))
        rows = await self.db.run(*statements)
        return int(rows[0]["n"])

    async def mark_summarized(self, user_id: str, thread_id: str, ids: list[str]) -> int:
        """Advance the extracted-up-to marker over these messages."""
        if not ids:
            return 0
        rows = await self.db.query(
            "UPDATE episodes SET summarized = true WHERE user_id = :user_id "
            "AND thread_id = :thread_id AND message_id = ANY(CAST(:ids AS text[])) RETURNING 1",
            {"user_id": user_id, "thread_id": thread_id, "ids": ids},
        )
        return len(rows)

    async def unsummarized(self, user_id: str, thread_id: str) -> list[StoredMessage]:
        """Logged messages whose summary is not stored yet, oldest first."""
        validate_id(user_id, "user_id")
        params = {"user_id": user_id, "thread_id": thread_id}
        return await self._select(f"{_OPEN} ORDER BY seq", params)

    async def idle_threads(self, user_id: str, before: datetime) -> dict[str, datetime]:
        """The user's threads whose newest message was logged before ``before``, and when.

        Every turn logs its new messages, so that is the thread's last turn.
        """
        rows = await self.db.query(
            "SELECT thread_id, max(logged_at) AS last FROM episodes WHERE user_id = :user_id "
            "GROUP BY thread_id HAVING max(logged_at) < :before ORDER BY thread_id",
            {"user_id": validate_id(user_id, "user_id"), "before": before},
        )
        return {r["thread_id"]: r["last"] for r in rows}

    async def summarized(self, user_id: str, thread_id: str, ids: list[str]) -> set[str]:
        """Those of ``ids`` logged for the thread and already in a stored summary."""
        if not ids:
            return set()
        rows = await self.db.query(
            "SELECT message_id FROM episodes WHERE user_id = :user_id AND thread_id = :thread_id "
            "AND message_id = ANY(CAST(:ids AS text[])) AND summarized",
            {
                "user_id": validate_id(user_id, "user_id"),
                "thread_id": validate_id(thread_id, "thread_id"),
                "ids": list(ids),
            },
        )
        return {r["message_id"] for r in rows}

    async def history(self, user_id: str, thread_id: str | None = None) -> list[StoredMessage]:
        """The raw conversation(s) of a user, oldest first (audit and replay)."""
        validate_id(user_id, "user_id")
        where = "WHERE user_id = :user_id" + (" AND thread_id = :thread_id" if thread_id else "")
        params = {"user_id": user_id, "thread_id": thread_id}
        return await self._select(f"{where} ORDER BY thread_id, seq", params)

    async def messages(self, user_id: str, thread_id: str, ids: list[str]) -> list[StoredMessage]:
        """Logged messages of the thread with these ids, in log order."""
        if not ids:
            return []
        validate_id(user_id, "user_id")
        validate_id(thread_id, "thread_id")
        return await self._select(
            "WHERE user_id = :user_id AND thread_id = :thread_id "
            "AND message_id = ANY(CAST(:ids AS text[])) ORDER BY seq",
            {"user_id": user_id, "thread_id": thread_id, "ids": list(ids)},
        )

    async def recent(
        self,
        user_id: str,
        thread_id: str,
        chars: int,
        limit: int = RECENT_TURNS,
        *,
        elsewhere: bool = False,
    ) -> list[EpisodeHit]:
        """The thread's newest turns with text, newest first, as `EpisodeHit` (``Speaker: text``).

        At most ``limit``; a turn is returned while the turns newer than it hold fewer than
        ``chars`` characters together (so the first one past ``chars`` is the last). With
        ``elsewhere``: the user's newest turns of every other thread than ``thread_id``.
        """
        which = "<>" if elsewhere else "="
        (rows,) = await self.db.pipeline(  # on a turn's read path: one round trip, no BEGIN
            (
                "SELECT thread_id, message_id, role, name, content, ts FROM (SELECT thread_id, "
                "message_id, role, name, content, ts, seq, sum(length(content)) OVER (ORDER BY seq "
                "DESC) - length(content) AS newer FROM episodes WHERE user_id = :user_id AND "
                f"thread_id {which} :thread_id AND role = ANY(CAST(:roles AS text[])) AND content "
                "<> '' ORDER BY seq DESC LIMIT :limit) AS turns WHERE newer < :chars "
                "ORDER BY seq DESC",
                {
                    "user_id": validate_id(user_id, "user_id"),
                    "thread_id": validate_id(thread_id, "thread_id"),
                    "roles": list(INDEXED_ROLES),
                    "limit": max(0, int(limit)),
                    "chars": max(0, int(chars)),
                },
            )
        )
        return _turn_hits(rows)

    async def asked(
        self,
        user_id: str,
        thread_id: str,
        from_start: Sequence[int] = (),
        back: Sequence[int] = (),
        every: bool = False,
        limit: int = RECENT_TURNS,
    ) -> list[EpisodeHit]:
        """The thread's turns at the places a question names, oldest first (`recall.positions`).

        A place is one of the user's questions of the thread: the nth counted ``from_start``
        (1: the first), or ``back`` from the newest logged one (1: the newest). Each comes
        with what followed it up to the next question (the reply). With ``every``: each of
        the user's questions. At most ``limit`` turns.
        """
        (rows,) = await self.db.pipeline(  # on a turn's read path: one round trip, no BEGIN
            (
                "SELECT thread_id, message_id, role, name, content, ts FROM (SELECT thread_id, "
                "message_id, role, name, content, ts, seq, count(*) FILTER (WHERE role = 'human') "
                "OVER (ORDER BY seq) AS q, count(*) FILTER (WHERE role = 'human') OVER () AS n "
                "FROM episodes WHERE user_id = :user_id AND thread_id = :thread_id AND role = "
                "ANY(CAST(:roles AS text[])) AND content <> '') AS turns WHERE q > 0 AND (q = "
                "ANY(CAST(:from_start AS int[])) OR n - q + 1 = ANY(CAST(:back AS int[])) OR "
                "(:every AND role = 'human')) ORDER BY seq LIMIT :limit",
                {
                    "user_id": validate_id(user_id, "user_id"),
                    "thread_id": validate_id(thread_id, "thread_id"),
                    "roles": list(INDEXED_ROLES),
                    "from_start": [int(n) for n in from_start],
                    "back": [int(n) for n in back],
                    "every": bool(every),
                    "limit": max(0, int(limit)),
                },
            )
        )
        return _turn_hits(rows)

    async def latest(self, user_id: str, limit: int) -> list[tuple[str, StoredMessage]]:
        """The user's ``limit`` newest logged messages of any thread, oldest first.

        Returns:
            ``(thread_id, message)`` pairs, in log order.
        """
        validate_id(user_id, "user_id")
        rows = await self.db.query(
            "SELECT * FROM (SELECT thread_id, message_id, role, name, content, ts, seq "
            "FROM episodes WHERE user_id = :user_id ORDER BY seq DESC LIMIT :limit) AS newest "
            "ORDER BY seq",
            {"user_id": user_id, "limit": max(0, int(limit))},
        )
        return [(r["thread_id"], _to_message(r)) for r in rows]

    async def counts(self, user_id: str) -> dict[str, int]:
        """How many messages of the user are logged, per thread."""
        rows = await self.db.query(
            "SELECT thread_id, count(*) AS n FROM episodes WHERE user_id = :user_id "
            "GROUP BY thread_id",
            {"user_id": validate_id(user_id, "user_id")},
        )
        return {r["thread_id"]: int(r["n"]) for r in rows}

    async def first_writer(self, thread_id: str) -> str | None:
        """The user who logged the first message of ``thread_id`` (its owner), if any.

        Scans by thread: for admission while Redis, which knows owners, is down.
        """
        rows = await self.db.query(
            "SELECT user_id FROM episodes WHERE thread_id = :thread_id ORDER BY seq LIMIT 1",
            {"thread_id": validate_id(thread_id, "thread_id")},
        )
        return rows[0]["user_id"] if rows else None

    async def _select(self, clauses: str, params: dict[str, Any]) -> list[StoredMessage]:
        sql = f"SELECT message_id, role, name, content, ts FROM episodes {clauses}"
        return [_to_message(r) for r in await self.db.query(sql, params)]

    def _table(self) -> str:
        if not self.vector_table:
            raise RuntimeError("EpisodeLog was opened without an embedding dimension")
        return self.vector_table

    def _entities(self) -> EntityLinks:
        if self.entities is None:
            raise RuntimeError("EpisodeLog was opened without an embedding dimension")
        return self.entities


__all__ = [
    "EpisodeHit",
    "EpisodeLog",
    "embedding_text",
    "episode_content",
    "keyword_terms",
    "speaker",
]
