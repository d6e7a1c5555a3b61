"""Time to first token, to the reply and to the next turn, with a model of realistic speed.

    python -m bench latency [--turns 120] [--modes respond_only,background,...]

``--turns`` LoCoMo turns through each agent of `MODES` (our ``respond`` node alone, our
graph with memory inline or in the background, ``create_agent`` without and with
`MemoryMiddleware`), each with a paced fake model. "Memory adds to TTFT" is each turn's
TTFT minus that of the same turn of the memory-less twin, whole and without what recall
waited for the query embedding. Then every message is checked to be in exactly one summary,
and ``--cost-conversations`` whole conversations replayed (memory inline) for its model cost.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model, register_paced_model
from bench.harness import main, ms_stats, write_results
from bench.locomo import DEFAULT_DATA
from bench.locomo_data import load_locomo
from bench.soak_report import verify_conversation
from bench.timing import CURRENT_TURN, TurnRecord, build_baseline_graph, instrument
from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from graph.middleware import MemoryMiddleware
from graph.prompts import ASSISTANT_PROMPT
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings

LOCOMO = Path(DEFAULT_DATA)
MODES = (
    "respond_only",
    "inline",
    "background",
    "agent_only",
    "middleware_background",
)
SPEED = {"first_token_s": 0.3, "tokens_per_s": 40.0}
"""The fake model's speed: seconds to the first token, then tokens per second."""
AGENTS = ("agent_only", "middleware_background")
"""The ``create_agent`` agents: their model node is ``model``, not ``respond``."""
REPLY_NODES = ("respond", "model")


def baseline_of(mode: str, modes: Sequence[str]) -> str | None:
    """The memory-less mode ``mode`` is compared with (``None`` for a baseline itself)."""
    if mode in ("respond_only", "agent_only"):
        return None
    if mode in AGENTS and "agent_only" in modes:
        return "agent_only"
    return "respond_only" if "respond_only" in modes else None


def parse_modes(text: str) -> tuple[str, ...]:
    """``--modes``: a comma-separated subset of `MODES`, run in `MODES`' order."""
    asked = [m.strip() for m in text.split(",") if m.strip()]
    if unknown := [m for m in asked if m not in MODES]:
        raise argparse.ArgumentTypeError(f"unknown modes {unknown}: choose from {list(MODES)}")
    if not asked:
        raise argparse.ArgumentTypeError("no mode given")
    return tuple(m for m in MODES if m in asked)


def _texts(path: Path, conversations: int) -> list[list[str]]:
    convs, _ = load_locomo(path, limit=conversations)
    return [[f"{t.speaker}: {t.text}" for t in c.turns] for c in convs]


async def _turn(graph: Any, ctx: Any, thread: str, text: str) -> dict[str, Any]:
    """One streamed turn: its timings (seconds from sending) and what memory did."""
    record = TurnRecord()
    CURRENT_TURN.set(record)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 500}
    sent = time.perf_counter()
    first = reply = None
    nodes: list[str] = []
    scheduled = False
    async for kind, payload in graph.astream(
        {"messages": [HumanMessage(text)]},
        config,
        context=ctx,
        stream_mode=["messages", "updates"],
    ):
        now = time.perf_counter() - sent
        if kind == "messages":
            chunk, meta = payload
            if first is None and meta["langgraph_node"] in REPLY_NODES and chunk.text:
                first = now
            continue
        for node, update in payload.items():
            nodes.append(node)
            reply = now if node in REPLY_NODES else reply
            update = update or {}
            scheduled = scheduled or bool(update.get("memory_scheduled"))
            ended = node.endswith(".after_agent")  # the middleware's turn end
            events = (update.get("memory_events") or []) if ended else []
            scheduled = scheduled or any(e.get("kind") == "scheduled" for e in events)
    end = time.perf_counter() - sent
    embed = record.parts.get("embed_query", [0.0])[0]  # recall's, started with the run
    waited = record.parts.get("embed_wait", [0.0])[0]  # what of it recall waited for
    memory = "summarize" in nodes or scheduled
    return {
        "ttft": first,
        "reply": reply,
        "end": end,
        "embed": embed,
        "waited": waited,
        "memory": memory,
    }


def _summary(turns: list[dict[str, Any]], baseline: list[dict[str, Any]] | None) -> dict:
    out: dict[str, Any] = {"turns": len(turns)}
    for name, subset in (
        ("all", turns),
        ("memory_turns", [t for t in turns if t["memory"]]),
        ("other_turns", [t for t in turns if not t["memory"]]),
    ):
        out[name] = {
            "n": len(subset),
            "ttft": ms_stats([t["ttft"] for t in subset]),
            "time_to_reply": ms_stats([t["reply"] for t in subset]),
            "run_end": ms_stats([t["end"] for t in subset]),
            "next_turn_waits": ms_stats([t["end"] - t["reply"] for t in subset]),
        }
    out["query_embedding"] = ms_stats([t["embed"] for t in turns if t["embed"]])
    if baseline is not None:
        pairs = list(zip(turns, baseline, strict=True))
        out["memory_adds_to_ttft"] = ms_stats([t["ttft"] - b["ttft"] for t, b in pairs])
        added = [t["ttft"] - t["waited"] - b["ttft"] for t, b in pairs]
        out["memory_adds_to_ttft_excluding_embedding"] = ms_stats(added)
    return out


async def _conversation(graph: Any, ctx: Any, texts: list[str]) -> list[dict[str, Any]]:
    thread = f"lat-{uuid.uuid4().hex[:8]}"
    turns = [await _turn(graph, ctx, thread, text) for text in texts]
    return [{**t, "thread": thread} for t in turns]


async def run(a: argparse.Namespace) -> bool:
    """Run the agents of ``--modes`` and the cost replay; write latency.json.

    True when no message was lost or duplicated.
    """
    (texts,) = _texts(a.locomo, 1)
    texts = (texts * (a.turns // len(texts) + 1))[: a.turns]
    results: dict[str, Any] = {}
    async with isolated_services(tag="latency") as env:
        info = await machine_info(env.database_url)
        async with (
            services_session(EMBEDDING) as services,
            open_checkpointer(services.database_url) as saver,
        ):
            memory = LocalScheduler()
            graphs = {
                "respond_only": build_baseline_graph(saver),
                "inline": build_graph(services, saver),
                "background": memory.bind(build_graph(services, saver, scheduler=memory)),
            }
            with instrument(services):
                raw: dict[str, list[dict[str, Any]]] = {}
                for mode in a.modes:
                    spec, model = register_paced_model(**SPEED)
                    user = f"lat-{mode.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
                    # the inline graph has no scheduler: its memory forms in the turn
                    ctx = Context(user_id=user, model=spec)
                    agent, context = graphs.get(mode), ctx
                    if mode in AGENTS:  # the middleware's knobs are its own; the user the run's
                        agent = _agent(services, saver, memory, mode, spec, model)
                        context = {"user_id": user}
                    print(f"[latency] {mode}: {a.turns} turns", flush=True)
                    raw[mode] = await _conversation(agent, context, texts)
                    started = time.perf_counter()
                    await memory.drain()
                    lag = time.perf_counter() - started
                    baseline = baseline_of(mode, a.modes)
                    results[mode] = _summary(raw[mode], raw.get(baseline or ""))
                    if baseline:
                        results[mode]["baseline"] = baseline
                    results[mode]["drain_after_last_turn_s"] = round(lag, 3)
                    results[mode]["memory_run_failures"] = memory.failures
                    if baseline_of(mode, MODES):  # a mode with memory
                        thread = raw[mode][0]["thread"]
                        check = await verify_conversation(services, user, thread)
                        check["ok"] = not (check["lost"] or check["duplicated"] or check["foreign"])
                        results[mode]["verification"] = check
                        results[mode]["memory_cost"] = await services.costs.get(user)
            results["memory_cost_per_turn"] = await _cost_replay(
                services, saver, a.locomo, a.cost_conversations
            )
    data = {
        "benchmark": "latency",
        "machine": info,
        "config": {"turns": a.turns, **SPEED, "reply_tokens": 40, "embedding_model": EMBEDDING},
        "modes": {m: results[m] for m in a.modes},
        "memory_cost_per_turn": results["memory_cost_per_turn"],
    }
    show = ("latency-table", "latency-adds", "latency-cost")
    write_results(a.out, "latency", data, show=show)
    return all(m["verification"]["ok"] for m in data["modes"].values() if "verification" in m)


def _agent(services: Any, saver: Any, memory: Any, mode: str, spec: str, model: Any) -> Any:
    """A ``create_agent`` agent with our assistant prompt, with the middleware or without."""
    middleware = []
    if mode == "middleware_background":
        middleware = [
            MemoryMiddleware(services, scheduler=memory, model=spec, settings=Settings.from_env())
        ]
    return create_agent(
        model, [], system_prompt=ASSISTANT_PROMPT, middleware=middleware, checkpointer=saver
    )


async def _cost_replay(services: Any, saver: Any, locomo: Path, conversations: int) -> dict:
    """Replay whole LoCoMo conversations (instant model); memory's cost per turn."""
    if conversations <= 0:
        return {}
    graph = build_graph(services, saver)  # memory inline: batch by batch
    per_conversation = []
    for texts in _texts(locomo, conversations):
        spec, _ = register_instant_model()
        ctx = Context(user_id=f"cost-{uuid.uuid4().hex[:8]}", model=spec)  # no scheduler: inline
        thread = f"cost-{uuid.uuid4().hex[:8]}"
        config = {"configurable": {"thread_id": thread}, "recursion_limit": 500}
        for text in texts:
            await graph.ainvoke({"messages": [HumanMessage(text)]}, config, context=ctx)
        cost = await services.costs.get(ctx.user_id)
        per_turn = {f"{k}_per_turn": sum(c[key] for c in cost.values()) / len(texts)
                    for k, key in (("calls", "calls"), ("input_tokens", "input"),
                                   ("output_tokens", "output"))}  # fmt: skip
        per_conversation.append({"turns": len(texts), **per_turn, "by_purpose": cost})
        print(f"[latency] cost replay: {per_conversation[-1]}", flush=True)
    model = "ScriptedChatModel (instant), memory inline"
    return {"conversations": per_conversation, "model": model}


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.latency` beside ``--out``."""
    p.add_argument("--turns", type=int, default=120, help="turns per agent (>= 100)")
    p.add_argument("--cost-conversations", type=int, default=2, help="LoCoMo replays for cost")
    p.add_argument("--locomo", type=Path, default=LOCOMO)
    p.add_argument("--modes", type=parse_modes, default=MODES, help=f"of {','.join(MODES)}")


if __name__ == "__main__":
    raise SystemExit(main("latency"))
