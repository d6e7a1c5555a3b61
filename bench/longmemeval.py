"""LongMemEval evidence recall of the memory pipeline, against raw-turn baselines.

python -m bench longmemeval [--per-type N] [--budget 1800] [--grid SPEC]

The data's fields: ``shared/data/longmemeval/README.md``. Sessions are sorted by date; a
turn's id is ``<session>:<n>``; the evidence is the ``has_answer`` turns and
``answer_session_ids``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench import joint_cv as cv
from bench import locomo_pipeline as pipe
from bench.harness import main, write_results
from bench.locomo import bars
from bench.locomo_data import Turn, safe_id
from bench.locomo_scoring import (
    RawIndex,
    Shown,
    evidence_recall,
    means,
    message_tokens,
    raw_index,
    rrf,
)
from bench.seeding import embed_batched

DEFAULT_DATA = os.environ.get(
    "LONGMEMEVAL_DATA", "/work/shared/data/longmemeval/longmemeval_s_dev60.json"
)
METHODS = {
    "memory_in_budget": "memory pipeline, the headline: the question opens a session of its "
    "own at question_date (the last one ended), recall within the budget",
    "memory_in_thread": "memory pipeline, the question asked in the last session's thread "
    "before it ends: its window (at least the newest two turns) + recall, within the budget",
    "hybrid": "RRF (k=60) of dense and BM25 over raw turns, budget-filled",
    "hybrid_in_thread": "a plain agent asked in the last session's thread: its newest two "
    "turns whole, then hybrid over the other raw turns in what they leave of the budget",
}
THREAD_TURNS = 2
"""The newest turns (user message and reply) a plain agent carries in its thread."""
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


def load_longmemeval(path: str | Path, per_type: int | None = None) -> list[Haystack]:
    """The questions of a LongMemEval file; the first ``per_type`` of each type."""
    items = [haystack(x) for x in json.loads(Path(path).read_text())]
    if per_type is None:
        return items
    by_type = ([h for h in items if h.question_type == kind] for kind in QUESTION_TYPES)
    return [h for same in by_type for h in same[:per_type]]


async def replay_haystack(graph: pipe.PerSettings, hay: Haystack, ctx: pipe.Run) -> int:
    """Feed every exchange as a live turn; end every session but the last. Turns fed."""
    fed = 0
    for n, session in enumerate(hay.sessions):
        for exchange in session.exchanges():
            messages = [t.message() for t in exchange]
            await graph.ainvoke({"messages": messages}, session.thread_id, ctx)
            fed += len(exchange)
        if n < len(hay.sessions) - 1:
            await graph.ainvoke({"messages": [], "end_session": True}, session.thread_id, ctx)
    return fed


def score(hay: Haystack, found: Shown) -> dict[str, Any]:
    """Turn and session recall of one context; for an update, where the newest evidence is."""
    ids, tokens = found
    held = set(ids)
    session_of = {t.dia_id: t.session_id for t in hay.turns}
    sessions = {session_of.get(i) for i in held}
    out: dict[str, Any] = {
        "turn_recall": evidence_recall(hay.evidence, held),
        "session_recall": evidence_recall(hay.answer_session_ids, sessions),
        "tokens": tokens,
    }
    update = hay.newest_and_stale() if hay.question_type == "knowledge-update" else None
    if update is not None:
        newest, stale = update
        rank = {i: n for n, i in enumerate(ids)}
        out["newest_in"] = newest in held
        out["newest_first"] = newest in held and all(
            rank[newest] < rank[s] for s in stale if s in held
        )
    return out


def hybrid_in_thread(
    index: RawIndex, hay: Haystack, question: str, qvec: np.ndarray, budget: int
) -> Shown:
    """A plain agent in the thread: the newest two turns as messages, then hybrid in the rest."""
    turns = hay.turns
    carried = [t for ex in hay.sessions[-1].exchanges()[-THREAD_TURNS:] for t in ex]
    carried_tokens = message_tokens([t.message() for t in carried])
    rest = [i for i in rrf(index.orders(question, qvec)) if turns[i] not in carried]
    ids, tokens = index.shown(rest, max(0, budget - carried_tokens))
    return [t.dia_id for t in reversed(carried)] + ids, carried_tokens + tokens


async def evaluate(
    b: pipe.Bench, hay: Haystack, budget: int, grid: dict[str, tuple[Any, ...]] = cv.GRID
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Replay one haystack, then score the question for every method and grid point."""
    await pipe.check_fresh(b.services, hay)
    ctx, fit = pipe.replay_context(hay, b.spec), pipe.recall_context(hay, b.spec, budget)
    question = (hay.question, "question")
    last = hay.sessions[-1].thread_id
    t0 = time.perf_counter()
    fed = await replay_haystack(b.replay, hay, ctx)
    replay_s = time.perf_counter() - t0
    # asked in the last session's thread, before it ends: its window is in the prompt
    window = await pipe.memory_state(b.services, hay.user_id, last)
    ids, tokens = await b.recalled(fit, last, question)
    contexts = {"memory_in_thread": (window.window_ids + ids, tokens + window.window_tokens)}
    # then the session ends, and the question opens a session of its own, at question_date
    t0 = time.perf_counter()
    await b.replay.ainvoke({"messages": [], "end_session": True}, last, ctx)
    replay_s += time.perf_counter() - t0
    mem = await pipe.memory_state(b.services, hay.user_id, hay.thread_id)
    found = await b.probe(cv.points(fit, grid), hay.thread_id, question)
    contexts["memory_in_budget"] = await b.recalled(fit, hay.thread_id, question, keep=True)
    turns = hay.turns
    index = await raw_index(b.services.embeddings, [t.dia_id for t in turns],
                            [t.line() for t in turns])  # fmt: skip
    qvec = (await embed_batched(b.services.embeddings, [hay.question]))[0]
    contexts["hybrid"] = index.hybrid(hay.question, qvec, budget)
    contexts["hybrid_in_thread"] = hybrid_in_thread(index, hay, hay.question, qvec, budget)
    record = {
        "question_id": hay.question_id,
        "question_type": hay.question_type,
        "evidence": list(hay.evidence),
        "methods": {m: score(hay, contexts[m]) for m in METHODS},
        "grid": {k: score(hay, v) for k, v in found.items()},
    }
    info = {
        "question_id": hay.question_id,
        "sessions": len(hay.sessions),
        "turns": fed,
        "last_window_messages": len(window.window_ids),
        "last_window_tokens": window.window_tokens,
        "summaries": mem.summaries,
        "memories": mem.counts,
        "replay_s": round(replay_s, 2),
        "turns_per_s": round(fed / replay_s, 2) if replay_s else None,
    }
    return record, info


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per method: each measure per question type and overall."""
    return {m: means((r["question_type"], r["methods"][m]) for r in records) for m in METHODS}


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; write ``longmemeval.json`` / ``longmemeval.png`` under ``--out``."""
    started, data = time.perf_counter(), Path(a.data)
    haystacks = load_longmemeval(data, a.per_type)
    records, infos = [], []
    async with pipe.pipeline(a, "lme") as b:
        for n, hay in enumerate(haystacks, start=1):
            record, info = await evaluate(b, hay, a.budget, a.grid)
            records.append(record)
            infos.append(info)
            if not a.quiet:
                got = record["methods"]["memory_in_budget"]["turn_recall"]
                hyb = record["methods"]["hybrid"]["turn_recall"]
                print(
                    f"[{n}/{len(haystacks)}] {hay.question_type:26} memory {got:.2f} "
                    f"hybrid {hyb:.2f} ({info['turns']} turns, {info['replay_s']:.0f} s)",
                    flush=True,
                )
    turns = sum(i["turns"] for i in infos)
    replay_s = sum(i["replay_s"] for i in infos)
    context = pipe.replay_context(haystacks[0], b.spec).by_name()
    types = [t for t in QUESTION_TYPES if any(h.question_type == t for h in haystacks)]
    report = {
        **pipe.header("longmemeval-evidence-recall", started),
        "data": {
            "path": data.name,
            "questions": len(haystacks),
            "per_type": a.per_type,
            "turns": turns,
        },
        "config": {
            "budget_tokens": a.budget,
            "grid": {k: list(v) for k, v in a.grid.items()},
            "question_types": types,
            "methods": METHODS,
            # flat, with the members of the recall weights' group
            "context": {k: v for k, v in context.items() if k not in ("user_id", "model")},
        },
        "machine": b.machine,
        "llm_calls": b.guard.calls,
        "ingestion": {
            "mode": "raw",
            "turns": turns,
            "replay_s": round(replay_s, 1),
            "turns_per_s": round(turns / replay_s, 2) if replay_s else None,
        },
        "results": aggregate(records),
        "haystacks": infos,
        "questions": records,
    }
    show = () if a.quiet else ("longmemeval-table",)
    write_results(a.out, "longmemeval", report, plot, show=show)
    return report


def plot(report: dict[str, Any], plt: Any) -> Any:
    """Turn-level recall per question type, one bar per method."""
    results = report["results"]
    groups = [t for t in QUESTION_TYPES if t in results["memory_in_budget"]["turn_recall"]]
    groups.append("overall")
    fig, ax = plt.subplots(figsize=(12, 4.5))
    bars(ax, groups, {m: [r["turn_recall"].get(g) for g in groups] for m, r in results.items()})
    ax.set(ylabel="turn-level evidence recall", title=f"LongMemEval @ "
           f"{report['config']['budget_tokens']} tokens")  # fmt: skip
    return fig


COMMON = ("out", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The data, which questions of it, the token budget and the grid."""
    p.add_argument("--data", default=DEFAULT_DATA, help="LongMemEval-format JSON file")
    p.add_argument("--per-type", type=int, default=None, help="N questions of each type")
    p.add_argument("--budget", type=int, default=1800, help="context token budget")
    p.add_argument(
        "--grid",
        type=cv.parse_grid,
        default=cv.GRID,
        help="knobs to probe, e.g. 'neighbour_weight=0,0.7;recall_rrf_k=5,60' "
        "(default: bench.joint_cv.GRID)",
    )


if __name__ == "__main__":
    raise SystemExit(main("longmemeval"))
