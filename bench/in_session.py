"""Questions about the conversation in progress: is their evidence in the context?

    python -m bench in_session [--limit N] [--exchanges 10] [--budget 1800] [--grid SPEC]

Each LongMemEval dev haystack is a user: from its middle session on, ``--exchanges``
exchanges (user message ≤ 300 tokens, reply 100-400) are the conversation in progress,
replayed in a thread after the sessions before them. In that thread come questions whose
evidence is known (`questions`). Per method and kind: the share of the evidence in the
context within ``--budget`` tokens, and for ``memory`` the questions whose budget idled
while older messages of the conversation were left out. Writes ``<out>/in_session.json``.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench import locomo_pipeline as pipe
from bench import longmemeval as lme
from bench.harness import main, write_results
from bench.joint_cv import parse_grid, points
from bench.locomo_data import Turn
from bench.locomo_scoring import evidence_recall, means, message_tokens, raw_index
from bench.seeding import embed_batched
from memory_graph_agent.core.tokens import text_tokens
from memory_graph_agent.settings import Settings

KINDS = ("n_back", "order", "recap", "pronoun")
METHODS = {
    "memory": "memory pipeline in the thread: its window + recall, within the budget",
    "full_window": "the conversation's newest messages whole, while they fit the budget",
    "hybrid": "hybrid (dense + BM25, RRF) over every raw turn, budget-filled",
    "hybrid_in_thread": "the newest two turns whole, then hybrid in what they leave",
}
REPLY_TOKENS = (100, 400)
USER_TOKENS = 300
IDLE_SHARE = 0.10
"""A context idles when more than this share of the budget is unused while older
messages of its conversation were left out."""
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S", re.M)


def conversation(hay: lme.Haystack, exchanges: int) -> tuple[lme.Haystack, list[list[Turn]]] | None:
    """The haystack cut to its history and the conversation in progress, its last session.

    None if the sessions from the middle on hold fewer than ``exchanges`` that qualify.
    """
    start = len(hay.sessions) // 2
    taken: list[list[Turn]] = []
    used = start
    for used, session in enumerate(hay.sessions[start:], start=start + 1):
        for ex in session.exchanges():
            if len(ex) == 2 and ex[0].role == "user" and _qualifies(ex):
                taken.append(ex)
            if len(taken) == exchanges:
                break
        if len(taken) == exchanges:
            break
    if len(taken) < exchanges:
        return None
    at = datetime.fromisoformat(hay.sessions[used - 1].date)
    sid = f"now-{hay.question_id}"
    turns = tuple(  # one sitting: its own session, one second apart
        replace(t, session_id=sid, timestamp=(at + timedelta(seconds=n)).isoformat())
        for n, t in enumerate(t for ex in taken for t in ex)
    )
    now = lme.Session(sid, at.isoformat(), turns)
    cut = replace(hay, sessions=(*hay.sessions[:start], now), answer_session_ids=(sid,))
    return cut, [list(turns[i : i + 2]) for i in range(0, len(turns), 2)]


def _qualifies(ex: list[Turn]) -> bool:
    low, high = REPLY_TOKENS
    return text_tokens(ex[0].text) <= USER_TOKENS and low <= text_tokens(ex[1].text) <= high


def questions(exchanges: list[list[Turn]]) -> list[dict[str, Any]]:
    """Each kind's questions for a conversation: text and evidence ids.

    ``n_back``: what the assistant said N questions ago (the exchange N questions back is
    the Nth newest); ``order``: what was asked first, second, and the second option of a
    reply that gave a list; ``recap``: every user message; ``pronoun``: "tell me more
    about it, the thing I asked N questions ago" (both messages).
    """
    e = len(exchanges)
    back = lambda n: exchanges[e - n]  # noqa: E731  (n questions ago: the nth newest)
    out = [
        {"kind": "n_back", "n": n, "text": f"What did you tell me {n} questions ago?",
         "evidence": [back(n)[1].dia_id]}
        for n in (3, 5, 8) if n <= e
    ]  # fmt: skip
    out += [
        {"kind": "order", "n": e, "text": "What did I ask first in this conversation?",
         "evidence": [exchanges[0][0].dia_id]},
        {"kind": "order", "n": e - 1, "text": "What was the second thing I asked you today?",
         "evidence": [exchanges[1][0].dia_id]},
    ]  # fmt: skip
    listed = [k for k in range(e - 2) if len(LIST_ITEM.findall(exchanges[k][1].text)) >= 2]
    if listed:
        k = listed[0]
        text = f"What was the second option you gave in your answer to my {ORDINALS[k]} question?"
        out.append({"kind": "order", "n": e - k, "text": text,
                    "evidence": [exchanges[k][1].dia_id]})  # fmt: skip
    out.append({"kind": "recap", "n": e,
                "text": "Can you recap everything we talked about in this conversation?",
                "evidence": [ex[0].dia_id for ex in exchanges]})  # fmt: skip
    out += [
        {"kind": "pronoun", "n": n,
         "text": f"Can you tell me more about it, the thing I asked you {n} questions ago?",
         "evidence": [t.dia_id for t in back(n)]}
        for n in (3, 6) if n <= e
    ]  # fmt: skip
    return out


def full_window(exchanges: list[list[Turn]], budget: int) -> tuple[list[str], int]:
    """The conversation's newest messages, whole, while they fit ``budget``."""
    ids, used = [], 0
    for turn in reversed([t for ex in exchanges for t in ex]):
        cost = message_tokens([turn.message()])
        if used + cost > budget:
            break
        ids.append(turn.dia_id)
        used += cost
    return ids, used


async def evaluate(
    b: pipe.Bench, hay: lme.Haystack, exchanges: list[list[Turn]], budget: int, grid: dict
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Replay the history and the conversation, then ask every question in its thread."""
    await pipe.check_fresh(b.services, hay)
    ctx = pipe.replay_context(hay, b.spec)
    t0 = time.perf_counter()
    fed = await lme.replay_haystack(b.replay, hay, ctx)
    replay_s = time.perf_counter() - t0
    fit = pipe.recall_context(hay, b.spec, budget)
    thread = hay.sessions[-1].thread_id
    window = await pipe.memory_state(b.services, hay.user_id, thread)
    said = [t.dia_id for ex in exchanges for t in ex]
    index = await raw_index(b.services.embeddings, [t.dia_id for t in hay.turns],
                            [t.line() for t in hay.turns])  # fmt: skip
    records = []
    for q in questions(exchanges):
        asked = (q["text"], "question")
        probes = await b.probe(points(fit, grid) if grid else {}, thread, asked)
        ids, tokens = await b.recalled(fit, thread, asked)
        qvec = (await embed_batched(b.services.embeddings, [q["text"]]))[0]
        contexts = {
            "memory": (window.window_ids + ids, window.window_tokens + tokens),
            "full_window": full_window(exchanges, budget),
            "hybrid": index.hybrid(q["text"], qvec, budget),
            "hybrid_in_thread": lme.hybrid_in_thread(index, hay, q["text"], qvec, budget),
        }
        held = set(contexts["memory"][0])
        records.append({
            **q,
            "question_id": hay.question_id,
            "recall": {m: evidence_recall(q["evidence"], contexts[m][0]) for m in METHODS},
            "tokens": {m: contexts[m][1] for m in METHODS},
            "grid": {k: evidence_recall(q["evidence"], window.window_ids + p[0])
                     for k, p in probes.items()},
            "unused": max(0, budget - contexts["memory"][1]),
            "left_out": sum(i not in held for i in said),
        })  # fmt: skip
    conversation_tokens = message_tokens([t.message() for ex in exchanges for t in ex])
    info = {"question_id": hay.question_id, "history_sessions": len(hay.sessions) - 1,
            "turns": fed, "conversation_tokens": conversation_tokens,
            "window_messages": len(window.window_ids), "window_tokens": window.window_tokens,
            "replay_s": round(replay_s, 1)}  # fmt: skip
    return records, info


def aggregate(records: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    """Per method and kind (and overall): mean evidence recall and tokens."""
    out: dict[str, Any] = {
        m: means((r["kind"], {"recall": r["recall"][m], "tokens": r["tokens"][m]}) for r in records)
        for m in METHODS
    }
    for key in records[0]["grid"] if records else ():
        grid = means((r["kind"], {"recall": r["grid"][key]}) for r in records)["recall"]
        out.setdefault("grid", {})[key] = grid
    idle = [r for r in records if r["unused"] > IDLE_SHARE * budget and r["left_out"] > 0]
    out["memory"]["idle"] = {
        "questions": len(idle),
        "of": len(records),
        "max_unused_share": round(max((r["unused"] for r in idle), default=0) / budget, 3),
    }
    return out


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; write ``<out>/in_session.json``."""
    started = time.perf_counter()
    picked = []
    for hay in lme.load_longmemeval(Path(a.data)):
        cut = conversation(hay, a.exchanges)
        if cut is not None and len(picked) < a.limit:
            picked.append(cut)
    records, infos = [], []
    async with pipe.pipeline(a, "ins") as b:
        for n, (hay, exchanges) in enumerate(picked, start=1):
            recs, info = await evaluate(b, hay, exchanges, a.budget, a.grid)
            records += recs
            infos.append(info)
            if not a.quiet:
                got = np.mean([r["recall"]["memory"] for r in recs])
                full = np.mean([r["recall"]["full_window"] for r in recs])
                print(f"[{n}/{len(picked)}] {hay.question_id} memory {got:.2f} full window "
                      f"{full:.2f} ({info['replay_s']:.0f} s)", flush=True)  # fmt: skip
    report = {
        **pipe.header("in-session-evidence-recall", started),
        "data": {"path": Path(a.data).name, "conversations": len(picked),
                 "exchanges": a.exchanges, "questions": len(records)},
        "config": {"budget_tokens": a.budget, "methods": METHODS, "kinds": list(KINDS),
                   "reply_tokens": list(REPLY_TOKENS), "idle_share": IDLE_SHARE,
                   "grid": {k: list(v) for k, v in a.grid.items()},
                   "conversation_similarity": Settings.from_env().recall.conversation_similarity},
        "machine": b.machine,
        "llm_calls": b.guard.calls,
        "results": aggregate(records, a.budget),
        "conversations": infos,
        "questions": records,
    }  # fmt: skip
    write_results(a.out, "in_session", report, show=() if a.quiet else ("in-session-table",))
    return report


COMMON = ("out", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.in_session` beside the common ones."""
    p.add_argument("--data", default=lme.DEFAULT_DATA, help="LongMemEval-format JSON file")
    p.add_argument("--limit", type=int, default=12, help="conversations (haystacks) at most")
    p.add_argument("--exchanges", type=int, default=10, help="exchanges of each conversation")
    p.add_argument("--budget", type=int, default=1800, help="context token budget")
    p.add_argument("--grid", type=parse_grid, default={},
                   help="recall knobs to probe, e.g. 'conversation_similarity=0,0.4'")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main("in_session"))
