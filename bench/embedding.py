"""MiniLM on ONNX Runtime against torch: the same neighbours on LoCoMo, and a query's time.

    python -m bench embedding [--queries 300] [--out bench/out]   # needs the `torch` extra

Every LoCoMo turn and question is embedded by both local runtimes: are the top 20 turns
of each question the same (and with ONNX's int8 query model against torch's)? Then
``--queries`` questions one at a time per query model (torch, ONNX fp32, ONNX int8),
interleaved, and per ONNX thread count (``--threads``), alone and beside a thread
embedding batches, rotating every `BLOCK` queries.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.env import cpu_id, cpu_model
from bench.harness import bars, main, ms_stats, write_results
from bench.locomo import DEFAULT_DATA
from bench.locomo_data import load_locomo
from memory_graph_agent.services.models import OnnxEmbeddings, local_embeddings

RUNTIMES = ("torch", "onnx")
QUERY_MODELS = ("torch", "onnx fp32", "onnx int8")
"""The query models timed: torch, and ONNX Runtime's full-precision and int8 query models."""
TOP = 20
BLOCK = 20
"""Queries per thread count and setting before the next one takes its turn."""


def _same_top(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """Identical top lists, and shared members, of two score matrices (questions x turns)."""
    top_a = np.argsort(-a, axis=1)[:, :TOP]
    top_b = np.argsort(-b, axis=1)[:, :TOP]
    same = sum(bool((x == y).all()) for x, y in zip(top_a, top_b, strict=True))
    return same, sum(len(set(x) & set(y)) for x, y in zip(top_a, top_b, strict=True))


def neighbours(path: Path, runtimes: dict[str, Any], int8: Any) -> dict[str, Any]:
    """Top-20 turns per question under both runtimes, and with int8 queries against torch."""
    conversations, _ = load_locomo(path)
    identical = overlap = total = 0
    q_identical = q_overlap = 0
    worst = q_worst = 1.0
    rates: dict[str, list[float]] = {name: [] for name in RUNTIMES}
    for conv in conversations:
        texts = [f"{t.speaker}: {t.text}" for t in conv.turns]
        questions = [q.text for q in conv.questions]
        vectors = {}
        for name, model in runtimes.items():
            started = time.perf_counter()
            turns = np.array(model.embed_documents(texts))
            rates[name].append(len(texts) / (time.perf_counter() - started))
            vectors[name] = (turns, np.array(model.embed_documents(questions)))
        (t_turns, t_questions), (o_turns, o_questions) = vectors["torch"], vectors["onnx"]
        worst = min(worst, float((t_turns * o_turns).sum(axis=1).min()))
        same, shared = _same_top(t_questions @ t_turns.T, o_questions @ o_turns.T)
        identical, overlap, total = identical + same, overlap + shared, total + len(questions)
        queries = np.array([int8.embed_query(q) for q in questions])  # as recall embeds them
        q_worst = min(q_worst, float((queries * t_questions).sum(axis=1).min()))
        same, shared = _same_top(t_questions @ t_turns.T, queries @ o_turns.T)
        q_identical, q_overlap = q_identical + same, q_overlap + shared
    return {
        "questions": total,
        "identical_top20_lists": identical,
        "mean_top20_overlap": round(overlap / (total * TOP), 6),
        "min_cosine_torch_vs_onnx_over_turns": round(worst, 8),
        "batch_texts_per_s": {n: round(float(np.mean(r)), 1) for n, r in rates.items()},
        "int8_queries": {
            "identical_top20_lists": q_identical,
            "mean_top20_overlap": round(q_overlap / (total * TOP), 6),
            "min_cosine_vs_torch": round(q_worst, 6),
        },
    }


def query_latency(path: Path, queries: int, runtimes: dict[str, Any]) -> dict[str, Any]:
    """One question at a time, interleaved between the query models (after 10 warm-ups)."""
    conversations, _ = load_locomo(path)
    texts = [q.text for c in conversations for q in c.questions][: queries + 10]
    seconds: dict[str, list[float]] = {name: [] for name in runtimes}
    for i, text in enumerate(texts):
        order = list(runtimes) if i % 2 else list(runtimes)[::-1]
        for name in order:
            started = time.perf_counter()
            runtimes[name].embed_query(text)
            if i >= 10:
                seconds[name].append(time.perf_counter() - started)
    return {name: ms_stats(s) for name, s in seconds.items()}


def _beside_batches(model: Any, texts: list[str], stop: threading.Event, done: list[int]) -> None:
    """Embed ``texts`` in batches of 32, round and round, until ``stop``."""
    start = 0
    while not stop.is_set():
        batch = texts[start : start + 32]
        model.embed_documents(batch)
        done[0] += len(batch)
        start = (start + 32) % max(1, len(texts) - 32)


def thread_latency(path: Path, queries: int, threads: list[int]) -> dict[str, Any]:
    """One query at a time per thread count, alone and beside batches, rotating per `BLOCK`.

    Queries on the default (int8) query model; the batches at full precision.
    """
    conversations, _ = load_locomo(path)
    questions = [q.text for c in conversations for q in c.questions]
    turns = [f"{t.speaker}: {t.text}" for c in conversations for t in c.turns]
    models = {n: OnnxEmbeddings(threads=n) for n in threads}
    for model in models.values():
        for text in questions[:10]:
            model.embed_query(text)  # warm-up
    settings = [(n, beside) for beside in (False, True) for n in threads]
    seconds: dict[tuple[int, bool], list[float]] = {s: [] for s in settings}
    batch_rate: dict[int, list[float]] = {n: [] for n in threads}
    asked = 10
    for block in range(max(1, queries // BLOCK)):
        for n, beside in settings if block % 2 else settings[::-1]:
            stop, done = threading.Event(), [0]
            worker = threading.Thread(target=_beside_batches, args=(models[n], turns, stop, done))
            if beside:
                worker.start()
                time.sleep(0.1)  # the batches are under way
            started = time.perf_counter()
            for _ in range(BLOCK):
                text = questions[asked % len(questions)]
                asked += 1
                t0 = time.perf_counter()
                models[n].embed_query(text)
                seconds[(n, beside)].append(time.perf_counter() - t0)
                time.sleep(0.01)  # a turn's other work
            if beside:
                stop.set()
                worker.join()
                batch_rate[n].append(done[0] / (time.perf_counter() - started))
    return {
        str(n): {
            "query_alone_ms": ms_stats(seconds[(n, False)]),
            "query_beside_batches_ms": ms_stats(seconds[(n, True)]),
            "batch_texts_per_s_beside_queries": round(float(np.mean(batch_rate[n])), 1),
        }
        for n in threads
    }


def plot(data: dict[str, Any], plt: Any) -> Any:
    """Query latency per query model, then per ONNX thread count alone and beside batches."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.5))
    lat = data["query_ms"]
    names = ["torch\n(sentence-transformers)", *(f"ONNX Runtime\n{n[5:]}" for n in list(lat)[1:])]
    bars(ax, names, list(lat.values()), fontsize=7)
    ax.set_ylabel("one query, ms")
    same, q8 = data["neighbours"], data["neighbours"]["int8_queries"]
    ax.set_title(
        f"MiniLM query embedding; top-20 lists as torch's: ONNX {same['identical_top20_lists']}"
        f"/{same['questions']}, int8 queries {q8['identical_top20_lists']} "
        f"(overlap {q8['mean_top20_overlap']:.1%})",
        fontsize=8,
    )
    threads = data["onnx_threads"]
    cells = [(f"{n} thread{'s' * (n != '1')}\n{where}", threads[n][key]) for n in threads
             for where, key in (("alone", "query_alone_ms"),
                                ("beside batches", "query_beside_batches_ms"))]  # fmt: skip
    bars(bx, [label for label, _ in cells], [c for _, c in cells], fontsize=7)
    bx.set_title("ONNX Runtime query, by intra-op threads (spinning off)", fontsize=8)
    return fig


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.embedding` beside ``--out``."""
    p.add_argument("--queries", type=int, default=300, help="questions timed per runtime")
    p.add_argument("--locomo", type=Path, default=Path(DEFAULT_DATA))
    p.add_argument("--threads", default="1,2", help="ONNX intra-op thread counts compared")


def run(a: argparse.Namespace) -> None:
    """Time and compare the runtimes; write ``embedding.json`` / ``.png``."""
    runtimes = {name: local_embeddings(name) for name in RUNTIMES}  # each loaded once
    int8 = OnnxEmbeddings(query_precision="int8")
    query_models = {
        "torch": runtimes["torch"],
        "onnx fp32": OnnxEmbeddings(query_precision="fp32"),
        "onnx int8": int8,
    }
    data = {
        "benchmark": "embedding",
        "machine": {
            "cpu_model": cpu_model(),
            "cpu_id": cpu_id(),
            "cores": os.cpu_count(),
            "loadavg_at_start": list(os.getloadavg()),
        },
        "config": {
            "queries": a.queries,
            "onnx_threads": runtimes["onnx"].threads,
            "torch_threads": __import__("torch").get_num_threads(),
        },
        "neighbours": neighbours(a.locomo, runtimes, int8),
        "query_ms": query_latency(a.locomo, a.queries, query_models),
    }
    counts = [int(n) for n in a.threads.split(",")]
    data["onnx_threads"] = thread_latency(a.locomo, a.queries, counts)
    data["machine"]["loadavg_at_end"] = list(os.getloadavg())
    write_results(a.out, "embedding", data, plot, dpi=120, show=("embedding-table",))


if __name__ == "__main__":
    raise SystemExit(main("embedding"))
