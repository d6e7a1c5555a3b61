"""LoCoMo data for `bench.locomo`: conversations and questions, evidence ids repaired.

Every defect met on the way (repaired, dropped or left unscored) is counted in `Defects`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from memory_graph_agent.storage.window import StoredMessage

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED_CATEGORIES = (1, 2, 3, 4)
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")
_ID = re.compile(r"D(\d+):(\d+)")
_REPAIRABLE_ID = re.compile(r"D\W*(\d+)\W+(\d+)")


@dataclass(frozen=True)
class Turn:
    """One turn of a LoCoMo dialog (a speaker's) or of a LongMemEval session (a role's)."""

    dia_id: str
    speaker: str | None
    text: str
    timestamp: str | None
    role: str = "user"
    session_id: str = ""
    has_answer: bool = False

    def message(self) -> BaseMessage:
        """The window message, tagged with the speaker and the session's date."""
        kind = HumanMessage if self.role == "user" else AIMessage
        extra = {"timestamp": self.timestamp} if self.timestamp else {}
        return kind(self.text, name=self.speaker, id=self.dia_id, additional_kwargs=extra)

    def line(self) -> str:
        """The transcript line the pipeline stores for this turn (``[ts] speaker: text``)."""
        return StoredMessage.from_message(self.message()).render()


@dataclass(frozen=True)
class Question:
    """One QA item; ``evidence`` holds the valid, canonical dialog ids only."""

    index: int
    text: str
    category: int
    evidence: tuple[str, ...]

    @property
    def scored(self) -> bool:
        """Whether the question enters the metric (known category, some evidence)."""
        return bool(self.evidence) and self.category in CATEGORIES


@dataclass
class Conversation:
    """One LoCoMo sample: turns in replay order and its questions; one user, one thread."""

    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    sessions: int

    @property
    def user_id(self) -> str:
        """One memory user per conversation."""
        return safe_id(f"locomo-{self.sample_id}")

    @property
    def thread_id(self) -> str:
        """One thread per conversation."""
        return safe_id(f"replay-{self.sample_id}")


@dataclass
class Defects:
    """How many data defects were met, and the first few of them."""

    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    max_examples: int = 20

    def add(self, kind: str, where: str, value: Any) -> None:
        """Count one defect of ``kind`` found at ``where``."""
        self.count += 1
        if len(self.examples) < self.max_examples:
            self.examples.append({"kind": kind, "where": where, "value": value})


def safe_id(text: str) -> str:
    """``text`` mapped to the project's id charset (1-64 of ``[A-Za-z0-9_.@-]``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.@-]+", "-", text).strip("_.@-")[:64]
    return cleaned or f"x{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def parse_session_date(text: str) -> str | None:
    """LoCoMo's ``'1:56 pm on 8 May, 2023'`` (or ISO) as ISO-8601, None if unparseable."""
    text = " ".join(str(text).split())
    for fmt in _DATE_FORMATS:
        with contextlib.suppress(ValueError):
            return datetime.strptime(text, fmt).isoformat()
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text).isoformat()
    return None


def canonical_id(piece: str) -> tuple[str | None, str | None]:
    """(canonical ``D<s>:<t>`` or None, defect kind or None) for one evidence token."""
    if m := _ID.fullmatch(piece):
        fixed = f"D{int(m[1])}:{int(m[2])}"
        return fixed, None if fixed == piece else "zero_padded"
    if m := _REPAIRABLE_ID.fullmatch(piece):
        return f"D{int(m[1])}:{int(m[2])}", "malformed_repaired"
    return None, "malformed_dropped"


class EvidenceParse(NamedTuple):
    """The valid evidence ids of a question and the defects met on the way."""

    ids: tuple[str, ...]
    defects: tuple[tuple[str, str], ...]


def parse_evidence(raw: Sequence[Any] | None, known_ids: Collection[str]) -> EvidenceParse:
    """Split, repair and check a question's evidence list against the conversation's ids."""
    ids: list[str] = []
    defects: list[tuple[str, str]] = []
    for entry in raw or []:
        pieces = [p for p in re.split(r"[;,\s]+", str(entry).strip()) if p]
        if len(pieces) > 1:
            defects.append(("joined", str(entry)))
        for piece in pieces:
            dia_id, kind = canonical_id(piece)
            if kind:
                defects.append((kind, piece))
            if dia_id is None:
                continue
            if dia_id not in known_ids:
                defects.append(("no_such_turn", piece))
            elif dia_id in ids:
                defects.append(("duplicate", piece))
            else:
                ids.append(dia_id)
    if not raw:
        defects.append(("empty_evidence", ""))
    elif not ids:
        defects.append(("no_valid_evidence", json.dumps(list(raw))))
    return EvidenceParse(tuple(ids), tuple(defects))


def _conversation(sample_id: str, sample: dict[str, Any], defects: Defects) -> Conversation:
    conversation = sample["conversation"]
    sessions = sorted(
        int(k.split("_")[1])
        for k, v in conversation.items()
        if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
    )
    turns = []
    for n in sessions:
        raw_date = conversation.get(f"session_{n}_date_time", "")
        stamp = parse_session_date(raw_date)
        if stamp is None:
            defects.add("unparsed_date", f"{sample_id} session_{n}", raw_date)
        for t in conversation[f"session_{n}"]:
            dia_id, kind = canonical_id(str(t["dia_id"]))
            if dia_id is None or kind:
                defects.add("bad_turn_id", sample_id, t["dia_id"])
            turns.append(Turn(dia_id or str(t["dia_id"]), str(t["speaker"]), str(t["text"]), stamp))
    known = {t.dia_id for t in turns}
    questions = []
    for i, item in enumerate(sample.get("qa", [])):
        parsed = parse_evidence(item.get("evidence"), known)
        for kind, value in parsed.defects:
            defects.add(kind, f"{sample_id} q{i}", value)
        category = int(item.get("category", 0))
        if category not in CATEGORIES:
            defects.add("bad_category", f"{sample_id} q{i}", item.get("category"))
        questions.append(Question(i, str(item["question"]), category, parsed.ids))
    return Conversation(sample_id, turns, questions, len(sessions))


def load_locomo(path: str | Path, limit: int | None = None) -> tuple[list[Conversation], Defects]:
    """Read a LoCoMo-format file (a list of samples); the first ``limit`` conversations."""
    samples = json.loads(Path(path).read_text())
    if isinstance(samples, dict):
        samples = [samples]
    defects, conversations = Defects(), []
    for sample in samples[:limit] if limit else samples:
        sample_id = str(sample.get("sample_id") or f"sample-{len(conversations)}")
        conversations.append(_conversation(sample_id, sample, defects))
    return conversations, defects
