"""LongMemEval data for `bench.longmemeval`: one user's dated sessions and their question.

`load_longmemeval` reads the benchmark's own format (a list of questions, each with its
``_s`` haystack; ``shared/data/longmemeval/README.md`` says what each field means) into
`Haystack` objects: sessions in date order, each a list of exchanges (a user message
and the assistant's replies that follow it), every turn with a stable id and its
session's date, and the evidence (``has_answer`` turns, ``answer_session_ids``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from bench.locomo_data import safe_id
from memory_graph_agent.storage.window import StoredMessage

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"


def parse_date(text: str) -> datetime:
    """LongMemEval's ``'2023/05/24 (Wed) 02:54'``."""
    return datetime.strptime(text.strip(), DATE_FORMAT)


@dataclass(frozen=True)
class Turn:
    """One message of a session: its id (``<session>:<n>``), role, text and time."""

    dia_id: str
    role: str
    text: str
    timestamp: str
    session_id: str
    has_answer: bool

    def message(self) -> BaseMessage:
        """The message a live assistant's thread holds: the user's or the assistant's."""
        kind = HumanMessage if self.role == "user" else AIMessage
        return kind(
            content=self.text, id=self.dia_id, additional_kwargs={"timestamp": self.timestamp}
        )

    def line(self) -> str:
        """The transcript line the pipeline stores for this turn (``[ts] role: text``)."""
        return StoredMessage.from_message(self.message()).render()


@dataclass(frozen=True)
class Session:
    """One dated session: a thread of its own."""

    session_id: str
    date: str
    turns: tuple[Turn, ...]

    @property
    def thread_id(self) -> str:
        """The session's thread."""
        return safe_id(f"s-{self.session_id}")

    def exchanges(self) -> list[list[Turn]]:
        """The session cut before each user message: what one live turn adds."""
        out: list[list[Turn]] = []
        for turn in self.turns:
            if turn.role == "user" or not out:
                out.append([])
            out[-1].append(turn)
        return out


@dataclass(frozen=True)
class Haystack:
    """One question and its user's whole history (its own user in the memory)."""

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    sessions: tuple[Session, ...]
    answer_session_ids: tuple[str, ...]

    @property
    def user_id(self) -> str:
        """One memory user per question."""
        return safe_id(f"lme-{self.question_id}")

    @property
    def thread_id(self) -> str:
        """The question's own thread: a session of its own, after every other one ended."""
        return safe_id(f"q-{self.question_id}")

    @property
    def turns(self) -> list[Turn]:
        """Every turn, in replay order."""
        return [t for s in self.sessions for t in s.turns]

    @property
    def evidence(self) -> tuple[str, ...]:
        """The ids of the ``has_answer`` turns."""
        return tuple(t.dia_id for t in self.turns if t.has_answer)

    def newest_and_stale(self) -> tuple[str, tuple[str, ...]] | None:
        """For an update: the newest evidence turn and the older ones (None if one session)."""
        dated = [t for t in self.turns if t.has_answer]
        sessions = {t.session_id for t in dated}
        if len(sessions) < 2:
            return None
        newest = dated[-1]
        return newest.dia_id, tuple(t.dia_id for t in dated if t.session_id != newest.session_id)


def _session(session_id: str, date: str, raw: list[dict[str, Any]]) -> Session:
    start = parse_date(date)
    turns = tuple(
        Turn(
            dia_id=safe_id(f"{session_id}:{n}"),
            role="user" if t["role"] == "user" else "assistant",
            text=str(t["content"]),
            # one second apart: the log keeps the order said, the date stays the session's
            timestamp=(start + timedelta(seconds=n)).isoformat(),
            session_id=session_id,
            has_answer=bool(t.get("has_answer")),
        )
        for n, t in enumerate(raw)
    )
    return Session(session_id, start.isoformat(), turns)


def haystack(item: dict[str, Any]) -> Haystack:
    """One question of the file; its sessions sorted by date (ties keep the file's order)."""
    sessions = [
        _session(sid, date, raw)
        for sid, date, raw in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        )
    ]
    sessions.sort(key=lambda s: s.date)
    return Haystack(
        question_id=str(item["question_id"]),
        question_type=str(item["question_type"]),
        question=str(item["question"]),
        answer=str(item["answer"]),
        question_date=parse_date(item["question_date"]).isoformat(),
        sessions=tuple(sessions),
        answer_session_ids=tuple(item["answer_session_ids"]),
    )


def load_longmemeval(
    path: str | Path, per_type: int | None = None, offset: int = 0
) -> list[Haystack]:
    """The questions of a LongMemEval file; ``per_type`` of each type from ``offset`` on."""
    items = [haystack(x) for x in json.loads(Path(path).read_text())]
    if per_type is None:
        return items[offset:] if offset else items
    out = []
    for kind in QUESTION_TYPES:
        out += [h for h in items if h.question_type == kind][offset : offset + per_type]
    return out
