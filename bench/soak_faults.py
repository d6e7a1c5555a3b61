"""The soak's faults and upkeep: its own servers to kill, a worker to kill, maintenance passes.

``python -m bench.soak_faults SPEC.json`` is the worker process: it runs the spec's turns
(conversations concurrently) with in-process background memory; every memory model call
prints ``MEMORY-RUNNING`` and hangs, so a memory run holds its leased batch until the soak
SIGKILLs the process. It prints ``START``/``OK``/``FAIL <user> <turn> <unix time>`` per turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from bench.env import EMBEDDING
from bench.fake_model import register_faulty_model
from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.local import embedded
from memory_graph_agent.local.embedded.layout import data_home
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings

URL_VARS = ("REDIS_URL", "DATABASE_URL")
ROOT = Path(__file__).resolve().parent.parent


def schedule(rng: random.Random, redis_kills: int, postgres_restarts: int) -> list[dict]:
    """Fault points as shares of all turns: one per equal slice of 10-90 %, kinds shuffled."""
    kinds = ["redis_kill"] * redis_kills + ["postgres_restart"] * postgres_restarts
    rng.shuffle(kinds)
    n = len(kinds)
    return [
        {"kind": k, "at_share": round(0.1 + 0.8 * (i + rng.uniform(0.2, 0.8)) / n, 3)}
        for i, k in enumerate(kinds)
    ]


@contextlib.contextmanager
def private_home(home: Path | None = None) -> Iterator[Path]:
    """``MEMORY_AGENT_HOME`` = ``home`` (else a fresh folder, removed after), URLs unset."""
    saved = {k: os.environ.get(k) for k in ("MEMORY_AGENT_HOME", *URL_VARS, "MEMORY_KEY_PREFIX")}

    def restore() -> None:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.update({k: v})

    os.environ.pop("MEMORY_AGENT_HOME", None)
    try:
        default = data_home()  # the shared home, where no MEMORY_AGENT_HOME is set
    finally:
        restore()
    parent = None
    if home is None:
        parent = Path(tempfile.mkdtemp(prefix="ma-soak-", dir="/tmp"))
        parent.chmod(0o755)  # the unprivileged PostgreSQL user must reach it
        home = parent / "home"
    if Path(home).absolute() == default:
        raise RuntimeError(f"the soak kills its servers: {home} is the shared default home")

    def point_here() -> None:
        os.environ["MEMORY_AGENT_HOME"] = str(home)
        for k in URL_VARS:
            os.environ.pop(k, None)

    point_here()
    try:
        yield Path(home)
    finally:
        if parent is not None:
            point_here()
            embedded.stop_services()
            shutil.rmtree(parent, ignore_errors=True)
        restore()


class Servers:
    """The private home's embedded Redis and PostgreSQL, killed and restarted."""

    def __init__(self, home: Path) -> None:
        self.layout = embedded._Layout(home)

    def restart(self) -> None:
        """What the next CLI start does: `ensure_services` with no URL set (starts what is down)."""
        saved = {k: os.environ.pop(k) for k in URL_VARS if k in os.environ}
        try:
            embedded.ensure_services()
        finally:
            os.environ.update(saved)

    def kill_redis(self) -> None:
        """``kill -9`` the Redis server; wait (up to 10 s) until it is gone."""
        pid = int(self.layout.redis_pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop_postgres(self) -> None:
        """Stop PostgreSQL (``pg_ctl stop``, fast mode)."""
        embedded._stop_postgres(self.layout)


async def inject(kind: str, servers: Servers, down_s: float) -> dict[str, Any]:
    """Kill Redis / stop PostgreSQL, leave it down ``down_s``, restart it; the times."""
    t0 = time.time()
    await asyncio.to_thread(servers.kill_redis if kind == "redis_kill" else servers.stop_postgres)
    stopped = time.time()
    await asyncio.sleep(down_s)
    restarting = time.time()
    await asyncio.to_thread(servers.restart)
    back = time.time()
    return {"kind": kind, "at": t0, "stop_s": round(stopped - t0, 3),
            "down_s": round(restarting - t0, 3), "restart_s": round(back - restarting, 3),
            "back_at": back}  # fmt: skip


class WorkerKill:
    """Conversations handed at ``at_turn`` to a worker process, SIGKILLed in a memory run.

    When every conversation has called `hand_off`, the worker runs their next ``length``
    turns and is killed once a memory run hangs and ``min_ok`` turns are done.
    """

    def __init__(
        self,
        convs: dict[str, str],
        at_turn: int,
        length: int,
        text: Callable[[str, int], str],
        spec: dict[str, Any],
        min_ok: int,
        fault_lock: asyncio.Lock | None = None,
    ) -> None:
        self.convs, self.at_turn, self.length, self.text = convs, at_turn, length, text
        self.spec, self.min_ok = spec, min_ok
        # held from the worker's start to its kill: server faults wait (`Soak.fault_lock`)
        self.fault_lock = fault_lock or asyncio.Lock()
        self.records: list[dict[str, Any]] = []
        self.report: dict[str, Any] = {"kind": "worker_kill", "users": sorted(convs)}
        self._arrived, self._all_here = 0, asyncio.Event()
        self._next: dict[str, int] = {}
        self.handed: set[str] = set()
        self._ok, self._in_memory = 0, False

    async def hand_off(self, user: str) -> int:
        """Wait for the worker's turns of ``user``'s conversation; the next turn to run here."""
        self.handed.add(user)
        self._arrived += 1
        if self._arrived == len(self.convs):
            self._all_here.set()
            await self._run()
        else:
            await self._all_here.wait()
            while user not in self._next:
                await asyncio.sleep(0.1)
        return self._next[user]

    async def _run(self) -> None:
        convs = [
            {"user": u, "thread": t, "first_turn": self.at_turn,
             "texts": [self.text(u, self.at_turn + i) for i in range(self.length)]}
            for u, t in self.convs.items()
        ]  # fmt: skip
        started: dict[tuple[str, int], float] = {}
        async with self.fault_lock:  # no server fault while the worker lives
            killed_at = await self._start_and_kill(convs, started)
        for key, start in started.items():  # in flight when killed
            self._record(key, start, killed_at, False, "WorkerKilled: turn in flight")
        self.report.update(
            at=killed_at, during_memory=self._in_memory, worker_turns_ok=self._ok,
            in_flight=len(started),
        )  # fmt: skip
        for u in self.convs:
            done = [r["turn"] for r in self.records if r["user"] == u]
            self._next[u] = max(done, default=self.at_turn - 1) + 1

    async def _start_and_kill(self, convs: list[dict], started: dict) -> float:
        """Start the worker (again, if it could not start), kill it; when it was killed."""
        with tempfile.TemporaryDirectory(prefix="ma-soak-worker-") as folder:
            spec_path = Path(folder) / "spec.json"
            spec_path.write_text(json.dumps({**self.spec, "convs": convs}))
            for attempt in range(1, 4):  # a worker cannot start while Postgres is down
                self.report["worker_starts"] = attempt
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bench.soak_faults", str(spec_path),
                    cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                try:
                    lines = await self._follow(proc, started)
                finally:
                    killed_at = time.time()
                    if proc.returncode is None:
                        proc.kill()  # SIGKILL: no cleanup, its leased batch stays in processing
                    await proc.wait()
                if lines:
                    break
                await asyncio.sleep(3.0)
        return killed_at

    async def _follow(self, proc: Any, started: dict[tuple[str, int], float]) -> int:
        """Read the worker's lines until it is time to kill it; how many lines it wrote."""
        lines, done = 0, False
        while True:
            try:  # memory runs start memory_delay_s after a turn: after DONE, wait for one
                raw = await asyncio.wait_for(proc.stdout.readline(), 15.0 if done else None)
            except TimeoutError:
                return lines
            line = raw.decode().split()
            if not line or (line[0] == "DONE" and self._in_memory):
                return lines
            if line[0] == "DONE":
                done = True
                continue
            lines += 1
            if line[0] == "MEMORY-RUNNING":
                self._in_memory = True
            elif line[0] not in ("START", "OK", "FAIL") or len(line) != 4:
                continue  # not one of ours
            elif line[0] == "START":
                started[(line[1], int(line[2]))] = float(line[3])
            else:
                key = (line[1], int(line[2]))
                self._ok += line[0] == "OK"
                self._record(key, started.pop(key), float(line[3]), line[0] == "OK")
            if self._in_memory and self._ok >= self.min_ok:
                return lines

    def _record(self, key: tuple[str, int], start: float, end: float, ok: bool, error: str = ""):
        user, turn = key
        self.records.append(
            {"user": user, "turn": turn, "text": self.text(user, turn), "start": start,
             "end": end, "ok": ok, "degraded": [],
             "error": "" if ok else error or "failed in the worker", "where": "worker"}
        )  # fmt: skip


async def worker(spec_path: str) -> None:
    """The worker process: run the spec's turns, then wait to be killed."""
    spec = json.loads(Path(spec_path).read_text())
    model, _ = register_faulty_model(hang_memory=True, **spec["model"])

    def say(kind: str, user: str, turn: int) -> None:
        print(f"{kind} {user} {turn} {time.time():.3f}", flush=True)

    async def conversation(agent: Any, ctx: Context, conv: dict[str, Any]) -> None:
        for i, text in enumerate(conv["texts"]):
            turn = conv["first_turn"] + i
            say("START", ctx.user_id, turn)
            try:
                config = {"configurable": {"thread_id": conv["thread"]}}
                await agent.ainvoke({"messages": [HumanMessage(text)]}, config, context=ctx)
            except Exception:  # noqa: BLE001 - the parent counts it from the line
                say("FAIL", ctx.user_id, turn)
            else:
                say("OK", ctx.user_id, turn)

    async with (
        services_session(EMBEDDING) as services,
        open_checkpointer(services.database_url) as saver,
    ):
        memory = LocalScheduler()
        settings = Settings.from_env().override(**spec["context"])
        agent = memory.bind(build_graph(services, saver, scheduler=memory, settings=settings))
        await asyncio.gather(
            *(
                conversation(agent, Context(user_id=c["user"], model=model), c)
                for c in spec["convs"]
            )
        )
        print("DONE", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(worker(sys.argv[1]))
