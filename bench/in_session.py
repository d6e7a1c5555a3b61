"""Questions about the conversation in progress: is their evidence in the context?

    python -m bench.in_session [--limit N] [--exchanges 10] [--budget 1800]

Each LongMemEval dev haystack (`bench.longmemeval_data`) is its own user. From its middle
session on, the exchanges of one user message (at most 300 tokens) and one reply of
100-400 tokens are taken in order until there are ``--exchanges``: the conversation in
progress, replayed in a thread of its own after the sessions before it (the user's
history, each ended) as `bench.longmemeval` replays. In that thread, before it ends, come
questions made from templates whose evidence is known (the exchange N questions back is
the Nth newest; the question itself is not counted):

- ``n_back``: "what did you tell me N questions ago?" (that reply);
- ``order``: the first and the second question asked, the second option of a reply that
  gave a list;
- ``recap``: "recap everything we talked about" (every user message);
- ``pronoun``: "tell me more about it, the thing I asked N questions ago" (both messages).

Per method and kind, the share of the evidence in the context within ``--budget`` tokens:
``memory`` (the thread's window plus the recall node, as `bench.longmemeval`'s
memory_in_thread), ``full_window`` (the conversation's newest messages whole while they
fit), ``hybrid`` and ``hybrid_in_thread`` (`bench.longmemeval.baselines`). For ``memory``,
per question, the budget left unused while older messages of the conversation were left
out. Writes ``<out>/in_session.json``.
"""

from __future__ import annotations

import argparse
import re
import time
import uuid
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import main, write_results
from bench.joint_cv import grid_points, parse_grid, point_key
from bench.locomo_pipeline import (
    GuardChatModel,
    accesses_rolled_back,
    build_recall_graph,
    build_replay_graph,
    check_fresh,
    header,
    recall_context,
    recalled,
    replay_context,
)
from bench.locomo_scoring import message_tokens, raw_index
from bench.longmemeval import DEFAULT_DATA, hybrid_in_thread, replay_haystack
from bench.longmemeval_data import Haystack, Session, Turn, load_longmemeval
from bench.seeding import embed_batched
from memory_graph_agent.core.tokens import text_tokens
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import services_session
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


def conversation(hay: Haystack, exchanges: int) -> tuple[Haystack, list[list[Turn]]] | None:
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
    now = Session(sid, at.isoformat(), turns)
    cut = replace(hay, sessions=(*hay.sessions[:start], now), answer_session_ids=(sid,))
    return cut, [list(turns[i : i + 2]) for i in range(0, len(turns), 2)]


def _qualifies(ex: list[Turn]) -> bool:
    low, high = REPLY_TOKENS
    return text_tokens(ex[0].text) <= USER_TOKENS and low <= text_tokens(ex[1].text) <= high


def questions(exchanges: list[list[Turn]]) -> list[dict[str, Any]]:
    """Each kind's questions for a conversation: text and evidence ids."""
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


async def evaluate(hay: Haystack, exchanges: list[list[Turn]], services: Any, graphs: Any,
                   spec: str, budget: int, grid: dict[str, tuple[Any, ...]]
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """Replay the history and the conversation, then ask every question in its thread."""
    replay_graph, recall_graph = graphs
    await check_fresh(services, hay)
    ctx = replay_context(hay, spec)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    fed = await replay_haystack(replay_graph, hay, ctx)
    replay_s = time.perf_counter() - t0
    fit = recall_context(hay, spec, budget)
    thread = hay.sessions[-1].thread_id
    window = await services.window.window(hay.user_id, thread)
    window_ids = [m.id for m in reversed(window)]
    window_tokens = message_tokens([m.to_message() for m in window])
    said = [t.dia_id for ex in exchanges for t in ex]
    index = await raw_index(services.embeddings, [t.dia_id for t in hay.turns],
                            [t.line() for t in hay.turns], embed_chunks=False)  # fmt: skip
    records = []
    points = {point_key(p): fit.override(**p) for p in grid_points(grid)} if grid else {}
    for q in questions(exchanges):
        asked = (q["text"], "question")
        probes = {}
        for key, run in points.items():  # the grid's points, then the run's settings
            async with accesses_rolled_back(services, hay.user_id):
                probes[key] = await recalled(recall_graph, run, thread, asked)
        async with accesses_rolled_back(services, hay.user_id):
            ids, tokens = await recalled(recall_graph, fit, thread, asked)
        qvec = (await embed_batched(services.embeddings, [q["text"]]))[0]
        contexts = {
            "memory": (window_ids + ids, window_tokens + tokens),
            "full_window": full_window(exchanges, budget),
            "hybrid": index.baselines(q["text"], qvec, budget)["hybrid"],
            "hybrid_in_thread": hybrid_in_thread(index, hay, q["text"], qvec, budget),
        }
        held = set(contexts["memory"][0])
        unused = max(0, budget - contexts["memory"][1])
        records.append({
            **q,
            "question_id": hay.question_id,
            "recall": {m: found(q["evidence"], contexts[m][0]) for m in METHODS},
            "tokens": {m: contexts[m][1] for m in METHODS},
            "grid": {k: found(q["evidence"], window_ids + p[0]) for k, p in probes.items()},
            "unused": unused,
            "left_out": sum(i not in held for i in said),
        })  # fmt: skip
    info = {"question_id": hay.question_id, "history_sessions": len(hay.sessions) - 1,
            "turns": fed, "conversation_tokens": message_tokens([t.message() for ex in exchanges
                                                                 for t in ex]),
            "window_messages": len(window), "window_tokens": window_tokens,
            "replay_s": round(replay_s, 1)}  # fmt: skip
    return records, info


def found(evidence: list[str], ids: list[str]) -> float:
    """The share of ``evidence`` in a context of ``ids``."""
    return sum(e in set(ids) for e in evidence) / len(evidence)


def idles(r: dict[str, Any], budget: int) -> bool:
    """More than `IDLE_SHARE` of the budget unused while older messages were left out."""
    return r["unused"] > IDLE_SHARE * budget and r["left_out"] > 0


def aggregate(records: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    """Per method and kind (and overall): mean evidence recall and tokens."""
    out: dict[str, Any] = {}
    for method in METHODS:
        by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in records:
            for group in (r["kind"], "overall"):
                by["recall"][group].append(r["recall"][method])
                by["tokens"][group].append(r["tokens"][method])
        out[method] = {m: {g: round(float(np.mean(v)), 4) for g, v in groups.items()}
                       for m, groups in by.items()}  # fmt: skip
    for key in records[0]["grid"] if records else ():
        by_kind = defaultdict(list)
        for r in records:
            for group in (r["kind"], "overall"):
                by_kind[group].append(r["grid"][key])
        out.setdefault("grid", {})[key] = {g: round(float(np.mean(v)), 4)
                                           for g, v in by_kind.items()}  # fmt: skip
    idle = [r for r in records if idles(r, budget)]
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
    for hay in load_longmemeval(Path(a.data)):
        cut = conversation(hay, a.exchanges)
        if cut is not None and len(picked) < a.limit:
            picked.append(cut)
    guard = GuardChatModel()
    spec = register_chat_model(f"ins-guard-{uuid.uuid4().hex[:8]}", guard)
    records, infos = [], []
    async with (
        isolated_services(a.database_url, a.redis_url, a.key_prefix, tag="bench_ins") as env,
        services_session(EMBEDDING) as services,
    ):
        graphs = build_replay_graph(services), build_recall_graph(services)
        machine = await machine_info(env.database_url)
        for n, (hay, exchanges) in enumerate(picked, start=1):
            recs, info = await evaluate(hay, exchanges, services, graphs, spec, a.budget, a.grid)
            records += recs
            infos.append(info)
            if not a.quiet:
                got = np.mean([r["recall"]["memory"] for r in recs])
                full = np.mean([r["recall"]["full_window"] for r in recs])
                print(f"[{n}/{len(picked)}] {hay.question_id} memory {got:.2f} full window "
                      f"{full:.2f} ({info['replay_s']:.0f} s)", flush=True)  # fmt: skip
    report = {
        **header("in-session-evidence-recall", started),
        "data": {"path": Path(a.data).name, "conversations": len(picked),
                 "exchanges": a.exchanges, "questions": len(records)},
        "config": {"budget_tokens": a.budget, "methods": METHODS, "kinds": list(KINDS),
                   "reply_tokens": list(REPLY_TOKENS), "idle_share": IDLE_SHARE,
                   "grid": {k: list(v) for k, v in a.grid.items()},
                   "conversation_similarity": Settings.from_env().recall.conversation_similarity},
        "machine": machine,
        "llm_calls": guard.calls,
        "results": aggregate(records, a.budget),
        "conversations": infos,
        "questions": records,
    }  # fmt: skip
    write_results(a.out, "in_session", report, show=() if a.quiet else ("in-session-table",))
    return report


COMMON = ("out", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.in_session` beside the common ones."""
    p.add_argument("--data", default=DEFAULT_DATA, help="LongMemEval-format JSON file")
    p.add_argument("--limit", type=int, default=12, help="conversations (haystacks) at most")
    p.add_argument("--exchanges", type=int, default=10, help="exchanges of each conversation")
    p.add_argument("--budget", type=int, default=1800, help="context token budget")
    p.add_argument("--grid", type=parse_grid, default={},
                   help="recall knobs to probe, e.g. 'conversation_similarity=0,0.4'")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main("in_session"))
