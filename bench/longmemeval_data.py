"""LongMemEval data for `bench.longmemeval`: one user's dated sessions and their question.

Fields: ``shared/data/longmemeval/README.md``. Sessions are sorted by date; a turn's id is
``<session>:<n>``; the evidence is the ``has_answer`` turns and ``answer_session_ids``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.locomo_data import Turn, safe_id

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)


def parse_date(text: str) -> datetime:
    """LongMemEval's ``'2023/05/24 (Wed) 02:54'``."""
    return datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M")


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
        if len({t.session_id for t in dated}) < 2:
            return None
        newest = dated[-1]
        return newest.dia_id, tuple(t.dia_id for t in dated if t.session_id != newest.session_id)


def _session(session_id: str, date: str, raw: list[dict[str, Any]]) -> Session:
    start = parse_date(date)
    turns = tuple(
        # one second apart: the log keeps the order said, the date stays the session's
        Turn(safe_id(f"{session_id}:{n}"), None, str(t["content"]),
             (start + timedelta(seconds=n)).isoformat(),
             "user" if t["role"] == "user" else "assistant", session_id, bool(t.get("has_answer")))
        for n, t in enumerate(raw)
    )  # fmt: skip
    return Session(session_id, start.isoformat(), turns)


def haystack(item: dict[str, Any]) -> Haystack:
    """One question of the file; its sessions sorted by date (ties keep the file's order)."""
    raw = zip(item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"],
              strict=True)  # fmt: skip
    return Haystack(
        question_id=str(item["question_id"]),
        question_type=str(item["question_type"]),
        question=str(item["question"]),
        answer=str(item["answer"]),
        question_date=parse_date(item["question_date"]).isoformat(),
        sessions=tuple(sorted((_session(*s) for s in raw), key=lambda s: s.date)),
        answer_session_ids=tuple(item["answer_session_ids"]),
    )


def load_longmemeval(
    path: str | Path, per_type: int | None = None, offset: int = 0
) -> list[Haystack]:
    """The questions of a LongMemEval file; ``per_type`` of each type from ``offset`` on."""
    items = [haystack(x) for x in json.loads(Path(path).read_text())]
    if per_type is None:
        return items[offset:]
    by_type = ([h for h in items if h.question_type == kind] for kind in QUESTION_TYPES)
    return [h for same in by_type for h in same[offset : offset + per_type]]
