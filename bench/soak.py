"""Soak: many users, many turns, random faults; nothing may be lost or duplicated.

    python -m bench soak [--users 20] [--turns 300] [--concurrency 10] [--out bench/out]

Each user's thread runs through the compiled graph while the model fails at random, the
private Redis and PostgreSQL are killed and restarted, a worker is SIGKILLed inside a
memory run and maintenance runs on a timer (`bench.soak_faults`). Then every conversation
gets one more turn, memory is drained and each is checked (`bench.soak_report`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_faulty_model
from bench.harness import main, ms_stats, say, write_results
from bench.seeding import user_question
from bench.soak_faults import Servers, WorkerKill, inject, private_home, schedule
from bench.soak_report import (
    DEGRADED,
    Maintainer,
    checkpoint_storage,
    exact_rows,
    failure_causes,
    recovery,
    sample_growth,
    verify_soak,
)  # fmt: skip
from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings

RATES = {"reply_error": 0.02, "reply_timeout": 0.01, "memory_error": 0.05, "memory_timeout": 0.02}
SETTINGS = ("window_size", "summary_batch", "lease_seconds", "model_timeout_s", "retry_backoff_s")
"""The soak's flags that are settings of every turn (`Settings.override`; also the worker's)."""


class Soak:
    """One soak run: the conversations, the turn log, the faults."""

    def __init__(self, agent: Any, services: Any, a: argparse.Namespace):
        self.agent, self.services, self.a = agent, services, a
        self.convs = {f"soak-u{i}": f"soak-t{i}" for i in range(a.users)}
        self.records: list[dict] = []
        self.faults: list[dict] = []
        self.done, self.finished = 0, False
        self.sem = asyncio.Semaphore(a.concurrency)
        self.worker: WorkerKill | None = None
        # one fault at a time: a worker started while Redis is down schedules no memory run,
        # so it could not be killed during one (the fault it exists for)
        self.fault_lock = asyncio.Lock()

    def text(self, user: str, turn: int) -> str:
        """The user's message of a turn: deterministic and unique (found again by its text)."""
        return (
            f"{user_question(random.Random(f'{self.a.seed}:{user}:{turn}'))} [{user} turn {turn}]"
        )

    async def turn(self, ctx: Context, turn: int, phase: str = "soak") -> dict[str, Any]:
        """One turn, recorded: completed or failed (with why), degraded or not."""
        user = ctx.user_id
        rec = {"user": user, "turn": turn, "text": self.text(user, turn), "where": phase}
        rec["start"] = time.time()
        try:
            config = {"configurable": {"thread_id": self.convs[user]}}
            state = await asyncio.wait_for(
                self.agent.ainvoke({"messages": [HumanMessage(rec["text"])]}, config, context=ctx),
                self.a.turn_timeout,
            )
            kinds = {e["kind"] for e in state.get("memory_events", [])}
            rec.update(ok=True, degraded=sorted(kinds & DEGRADED), error="")
        except Exception as exc:  # noqa: BLE001 - counted and reported
            cause = exc.__cause__  # ModelUnavailableError: what the model raised
            why = f" ({type(cause).__name__}: {cause})" if cause else f": {exc}"
            rec.update(ok=False, degraded=["failed"], error=f"{type(exc).__name__}{why}"[:300])
        rec["end"] = time.time()
        self.records.append(rec)
        self.done += 1
        return rec

    async def settle(self, ctx: Context, turn: int, attempts: int = 10) -> None:
        """The returning user's turn: sent again until it completes (a model may fail)."""
        for t in range(turn, turn + attempts):
            if (await self.turn(ctx, t, "settle"))["ok"]:
                return

    async def conversation(self, ctx: Context) -> None:
        """The user's turns, in order; the worker's share is run by the worker."""
        t, user = 0, ctx.user_id
        while t < self.a.turns:
            w = self.worker
            if w and user in w.convs and user not in w.handed and t == w.at_turn:
                t = await w.hand_off(user)
                self.done += len([r for r in w.records if r["user"] == user])
                continue
            async with self.sem:
                await self.turn(ctx, t)
            t += 1

    async def inject_faults(self, servers: Servers, points: list[dict]) -> None:
        """Run each fault when its share of the turns is done (or, still due, at the end)."""
        total = self.a.users * self.a.turns
        for point in points:
            while self.done < point["at_share"] * total and not self.finished:
                await asyncio.sleep(0.1)
            async with self.fault_lock:
                say(self.a.quiet, f"[soak] {point['kind']} after {self.done} turns")
                self.faults.append(await inject(point["kind"], servers, self.a.down_s))

    async def watch_lease(self) -> None:
        """Seconds from the worker's death until its leased batch left ``processing``."""
        w = self.worker
        while w is not None and "at" not in w.report:
            await asyncio.sleep(0.2)
        if w is None:
            return

        async def held() -> set[str]:
            out: set[str] = set()
            for u, thread in w.convs.items():
                out |= {m.id for m in await self.services.queue.processing(u, thread)}
            return out

        leased: set[str] | None = None
        while leased is None:  # Redis may be down right now
            try:
                leased = await held()
            except Exception:  # noqa: BLE001
                await asyncio.sleep(0.2)
        w.report["leased_messages"] = len(leased)
        while leased:
            with contextlib.suppress(Exception):
                if not leased & await held():
                    w.report["reclaimed_s"] = round(time.time() - w.report["at"], 2)
                    return
            await asyncio.sleep(0.5)

    async def sample(self, t0: float, samples: list[dict]) -> None:
        """Memory growth every ``--sample-s`` seconds."""
        while not self.finished:
            samples.append(
                await sample_growth(self.services, self.services.database_url, t0, self.done)
            )
            failed = sum(not r["ok"] for r in self.records)
            say(
                self.a.quiet, f"[soak] {samples[-1]['t']:.0f} s: {self.done} turns, {failed} failed"
            )
            await asyncio.sleep(self.a.sample_s)


async def run_soak(a: argparse.Namespace, home: Path | None = None) -> dict[str, Any]:
    """Run the soak; write ``soak.json`` / ``soak.png`` to ``a.out`` (SIGTERM cancels it)."""
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        with private_home(home) as home:
            async with isolated_services(tag="bench_soak") as env:
                return await _run(a, home, env)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _run(a: argparse.Namespace, home: Path, env: Any) -> dict[str, Any]:
    rng, a.rates = random.Random(a.seed), {name: getattr(a, name) for name in RATES}
    say(a.quiet, f"[soak] private home {home}, database {env.database_url.split('?')[0]}")
    info = await machine_info(env.database_url)
    info["uptime_at_start"] = uptime()
    spec, model = register_faulty_model(
        rates=a.rates, seed=a.seed, memory_hang_s=a.model_timeout_s + 1
    )
    settings = {k: getattr(a, k) for k in SETTINGS}
    servers = Servers(home)
    async with (
        services_session(EMBEDDING) as services,
        open_checkpointer(env.database_url) as saver,
    ):
        memory = LocalScheduler()
        deployment = Settings.from_env().override(**settings)
        graph = build_graph(services, saver, scheduler=memory, settings=deployment)
        soak = Soak(memory.bind(graph), services, a)
        ctx = {u: Context(user_id=u, model=spec) for u in soak.convs}
        points = schedule(rng, a.redis_kills, a.postgres_restarts)
        if a.worker_users:
            at = rng.randint(a.turns // 5, max(a.turns // 5, a.turns // 2 - a.worker_turns))
            group = {u: soak.convs[u] for u in list(soak.convs)[-a.worker_users :]}
            worker_spec = {"context": settings, "model": {"seed": a.seed + 1}}
            soak.worker = WorkerKill(
                group, at, a.worker_turns, soak.text, worker_spec, a.worker_min_ok, soak.fault_lock
            )
        t0, done = time.time(), asyncio.Event()
        samples: list[dict] = []
        background = [
            asyncio.create_task(soak.sample(t0, samples)),
            asyncio.create_task(soak.inject_faults(servers, points)),
        ]
        upkeep = None  # the maintenance passes, as the CLI's `maintain --all-users` runs them
        if a.maintain_every > 0:
            upkeep = Maintainer(services, saver, Context(model=spec), deployment,
                                a.maintain_every, a.maintain_timeout, t0)  # fmt: skip
            background.append(asyncio.create_task(upkeep.loop(done, a.quiet)))
        # the dead worker's batch may wait for the settling turns: watched until the end
        watch = asyncio.create_task(soak.watch_lease())
        say(a.quiet, f"[soak] {a.users} users x {a.turns} turns, faults {points}")
        await asyncio.gather(*(soak.conversation(ctx[u]) for u in soak.convs))
        workload_s = time.time() - t0
        soak.finished = True
        done.set()
        await asyncio.gather(*background, return_exceptions=True)
        await asyncio.to_thread(servers.restart)  # nothing is left down
        # a batch leased by the dead worker (or restored by Redis' AOF) is claimed again
        # only once its lease has expired
        ends = [f["back_at"] for f in soak.faults]
        ends += [soak.worker.report.get("at", 0.0)] if soak.worker else []
        await asyncio.sleep(max(0.0, max(ends, default=0.0) + a.lease_seconds + 1 - time.time()))
        say(a.quiet, f"[soak] {soak.done} turns in {workload_s:.0f} s; settling")
        await asyncio.gather(*(soak.settle(ctx[u], a.turns) for u in soak.convs))
        await memory.drain()
        with contextlib.suppress(TimeoutError):  # not reclaimed: verification shows the loss
            await asyncio.wait_for(watch, a.lease_seconds + 30)
        if upkeep:  # retention after the last turn, on what the check then reads
            await upkeep.run_pass("final")
        settle_s = time.time() - t0 - workload_s
        records = sorted(soak.records + (soak.worker.records if soak.worker else []),
                         key=lambda r: r["start"])  # fmt: skip
        verification = await verify_soak(services, soak.convs, records)
        samples.append(await sample_growth(services, env.database_url, t0, soak.done))
        final_rows = await exact_rows(env.database_url)
        checkpoints = await checkpoint_storage(env.database_url, set(soak.convs.values()))
    w = soak.worker
    faults = sorted(
        soak.faults + ([w.report] if w and "at" in w.report else []), key=lambda f: f["at"]
    )
    workload = [r for r in records if r["where"] != "settle"]
    info["uptime_at_end"] = uptime()
    data = {
        "benchmark": "soak",
        "machine": info,
        "config": {
            **{k: v for k, v in vars(a).items() if k not in ("out", "quiet")},
            "schedule": points,
            "embedding_model": EMBEDDING,
            "chat_model": "FaultyChatModel (bench.fake_model)",
        },
        "totals": {
            "turns": len(workload),
            "completed": sum(r["ok"] for r in workload),
            "failed": sum(not r["ok"] for r in workload),
            "completed_degraded": sum(bool(r["ok"] and r["degraded"]) for r in workload),
            "degraded_by_kind": dict(
                Counter(k for r in workload if r["ok"] for k in r["degraded"])
            ),
            "failed_by_cause": failure_causes(workload),
            "settle_turns_failed": sum(not r["ok"] for r in records if r["where"] == "settle"),
            "workload_s": round(workload_s, 1),
            "settle_s": round(settle_s, 1),
            "turns_per_s": round(len(workload) / workload_s, 2),
            "latency_completed": ms_stats([r["end"] - r["start"] for r in workload if r["ok"]]),
            "model_faults_injected": model.injected,
            "memory_run_failures": memory.failures,
            "maintenance": upkeep.totals() if upkeep else None,
        },
        "maintenance_passes": upkeep.passes if upkeep else [],
        "faults": recovery(faults, records, set(w.convs) if w else set()),
        "verification": verification,
        "growth": {"samples": samples, "final_rows": final_rows, "checkpoints": checkpoints},
    }
    show = ("soak-summary", "soak-recovery")
    write_results(a.out, "soak", data, lambda d, plt: plot_soak(d, records, plt), 100, show)
    write_results(a.out, "soak_turns", records)  # every turn: when, ok, degraded by what
    return data


def uptime() -> str:
    """``uptime``'s line (load averages of the shared machine)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def plot_soak(data: dict[str, Any], records: list[dict], plt: Any) -> Any:
    """Turns completed and failed over time, with the faults."""
    fig, ax = plt.subplots(figsize=(10, 4))
    t0 = min(r["start"] for r in records)
    span = max(r["end"] for r in records) - t0
    width = max(5.0, span / 60)
    ends = [[r["end"] - t0 for r in records if r["ok"] is ok] for ok in (True, False)]
    bins = [i * width for i in range(int(span // width) + 2)]
    ax.hist(ends, bins=bins, stacked=True, color=["tab:blue", "tab:red"],
            label=["turns completed", "turns failed"])  # fmt: skip
    for f in data["faults"]:
        ax.axvline(f["at_s"], color="black", ls="--", lw=1)
        ax.text(f["at_s"], ax.get_ylim()[1], f["kind"], rotation=90, fontsize=7, va="top")
    v, c = data["verification"], data["config"]
    ax.set_title(f"soak: {c['users']} users x {c['turns']} turns, {v['messages_lost']} lost / "
                 f"{v['messages_duplicated']} duplicated")  # fmt: skip
    ax.set_xlabel("seconds since the first turn")
    ax.legend(fontsize=8)
    return fig


COMMON = ("out", "seed", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The soak's flags beside ``--out`` and ``--seed``."""
    p.set_defaults(seed=13)
    for flag, kind, default, text in (
        ("users", int, 20, "users, one thread each"),
        ("turns", int, 300, "turns per user"),
        ("concurrency", int, 10, "turns running at once"),
        ("redis-kills", int, 2, "kill -9 of Redis during the run"),
        ("postgres-restarts", int, 2, "PostgreSQL stops + starts"),
        ("down-s", float, 5.0, "seconds a killed server stays down"),
        ("worker-users", int, 2, "conversations handed to the killed worker"),
        ("worker-turns", int, 30, "turns of each of them in the worker"),
        ("worker-min-ok", int, 10, "worker turns done before the kill"),
        ("window-size", int, 20, None),
        ("summary-batch", int, 5, None),
        ("lease-seconds", float, 30.0, "lease of a claimed batch"),
        ("model-timeout-s", float, 1.0, "timeout of memory's model calls"),
        ("retry-backoff-s", float, 2.0, None),
        ("turn-timeout", float, 120.0, "a turn longer than this fails"),
        ("sample-s", float, 10.0, "seconds between growth samples"),
        ("maintain-every", float, 20.0, "seconds between maintenance passes (0: none)"),
        ("maintain-timeout", float, 120.0, "a pass longer than this fails"),
    ):
        p.add_argument(f"--{flag}", type=kind, default=default, help=text)
    for name, rate in RATES.items():
        p.add_argument(f"--{name.replace('_', '-')}-rate", type=float, default=rate, dest=name)


async def run(a: argparse.Namespace) -> bool:
    """Run the soak; true when no message was lost or duplicated."""
    return (await run_soak(a))["verification"]["ok"]


if __name__ == "__main__":
    raise SystemExit(main("soak"))
