"""Turns per second and reply latency through the HTTP API: `langgraph dev` beside Aegra.

    python -m bench throughput [--engines dev,aegra:1,aegra:2,aegra:4] [--server-python PY]

Each engine (``dev``: `langgraph dev`; ``aegra:N``: N Aegra replicas with the Redis broker)
serves the repository's graphs over one fresh database and key prefix, with the fake model
of `bench.fake_model.openai_app` in a process of its own and raw summaries. Per engine:
``--reply-first-turns`` turns one at a time to ``memory_agent`` and to ``respond_only``
(what memory adds to TTFT), then ``--conversations`` × ``--turns`` at once: turns/s, TTFT,
reply end, the memory drain, 0 lost / duplicated, and the CPU seconds of each process group.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from langgraph_sdk import get_client

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import main, ms_stats, say, write_results
from bench.seeding import user_question
from bench.soak_report import verify_conversation
from memory_graph_agent.core.memory_threads import memory_thread_id
from memory_graph_agent.core.server_token import server_token
from memory_graph_agent.services.stores import services_session

ROOT = Path(__file__).resolve().parents[1]
GROUPS = ("servers", "postgres", "redis", "model", "client")
"""The processes whose CPU is counted; ``machine`` is every core's busy time."""
PACE = {"first_token_s": 0.05, "tokens_per_s": 200.0, "reply_tokens": 20}
"""The fake model's speed: seconds to the first token, tokens per second, words per reply."""
MEMORY_DELAY_S = 1.0
CHECKS = ("pushed", "left_window", "summarized", "pending", "lost", "duplicated", "foreign")


def parse_engines(text: str) -> list[str]:
    """``--engines``: ``dev`` and ``aegra:<replicas>``, comma-separated, in the given order."""
    engines = [e.strip() for e in text.split(",") if e.strip()]
    for e in engines:
        name, _, n = e.partition(":")
        if not (e == "dev" or (name == "aegra" and n.isdigit() and int(n) >= 1)):
            raise argparse.ArgumentTypeError(f"engine {e!r}: expected dev or aegra:<replicas>")
    if not engines:
        raise argparse.ArgumentTypeError("no engine given")
    return engines


def cpu_used(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict:
    """CPU seconds of each group between two snapshots; a process new since counts from 0."""
    return {
        group: round(sum(s - before.get(group, {}).get(pid, 0.0) for pid, s in pids.items()), 2)
        for group, pids in after.items()
    }


def busiest(cpu: dict[str, float], elapsed_s: float) -> dict[str, Any]:
    """The group that used the most CPU, in cores, beside the machine's busy cores."""
    top = max(GROUPS, key=cpu.__getitem__)
    rest = cpu["machine"] - sum(cpu[g] for g in GROUPS)
    return {"group": top, "cores": round(cpu[top] / elapsed_s, 2),
            "machine_cores": round(cpu["machine"] / elapsed_s, 2),
            "others_cores": round(max(rest, 0.0) / elapsed_s, 2)}  # fmt: skip


def _cpu_s(pid: int) -> float:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system + t.children_user + t.children_system


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(cmd: list[str], env: dict[str, str], url: str, log: Path) -> subprocess.Popen:
    """``cmd`` in a process group of its own, once ``url`` answers (any status below 500)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return proc
        time.sleep(0.3)
    _stop(proc)
    raise RuntimeError(f"{url} not ready: {log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group; SIGKILL it if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(20)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _engine(spec: str, env: dict[str, str], python: str, folder: Path) -> list[tuple]:
    """``(process, url)`` of each server of ``spec``, one after the other."""
    servers, config = [], str(folder / "lg.json")
    for i in range(int(spec.partition(":")[2] or 1)):
        port = _free_port()
        url, log = f"http://127.0.0.1:{port}", folder / f"{spec.replace(':', '')}-{i}.log"
        where = ["--host", "127.0.0.1", "--port", str(port)]
        if spec == "dev":
            dev = [str(Path(python).parent / "langgraph"), "dev", "--no-browser", "--no-reload"]
            servers.append((_start([*dev, *where, "--config", config], env, f"{url}/ok", log), url))
        else:
            extra = {"AEGRA_CONFIG": config, "MEMORY_AGENT_SERVER_URL": url}
            aegra = [python, "-m", "uvicorn", "aegra_api.main:app", *where]
            servers.append((_start(aegra, {**env, **extra}, f"{url}/health", log), url))
    return servers


def _config(folder: Path) -> None:
    """The repository's langgraph.json with absolute paths, plus the ``respond_only`` graph."""
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["dependencies"] = [str(ROOT)]
    config["graphs"] = {k: str(ROOT / v) for k, v in config["graphs"].items()}
    config["graphs"]["respond_only"] = f"{ROOT}/bench/timing.py:respond_only"
    config["auth"]["path"] = str(ROOT / config["auth"]["path"])
    config["http"]["app"] = str(ROOT / config["http"]["app"])
    config.pop("env", None)
    (folder / "lg.json").write_text(json.dumps(config))


async def _turn(client: Any, thread: str, graph: str, text: str) -> dict[str, float]:
    """One streamed turn: seconds to the reply's first token, to its end, to the run's end."""
    sent, first, reply = time.perf_counter(), None, None
    message = {"role": "human", "content": text}
    async for part in client.runs.stream(
        thread, graph, input={"messages": [message]}, stream_mode=["messages-tuple", "updates"]
    ):
        now = time.perf_counter() - sent
        if part.event == "error":
            raise RuntimeError(str(part.data)[:300])
        if part.event == "messages" and first is None:
            chunk, meta = part.data
            first = now if meta.get("langgraph_node") == "respond" and chunk["content"] else None
        if part.event == "updates" and "respond" in (part.data or {}):
            reply = now
    if first is None or reply is None:
        raise RuntimeError(f"no reply streamed on {thread}")
    return {"ttft": first, "reply": reply, "end": time.perf_counter() - sent}


async def _reply_first(client: Any, turns: int, rng: random.Random) -> dict[str, Any]:
    """``turns`` pairs, one turn at a time: the memory agent's TTFT minus the baseline's."""
    graphs = ("memory_agent", "respond_only")
    threads = {g: (await client.threads.create())["thread_id"] for g in graphs}
    got: dict[str, list[float]] = {g: [] for g in graphs}
    for i in range(turns):
        text = user_question(rng)
        for graph in graphs[:: 1 if i % 2 else -1]:
            got[graph].append((await _turn(client, threads[graph], graph, text))["ttft"])
    added = [m - b for m, b in zip(*got.values(), strict=True)]
    return {"ttft": ms_stats(got["memory_agent"]), "baseline_ttft": ms_stats(got["respond_only"]),
            "memory_adds_to_ttft": ms_stats(added)}  # fmt: skip


async def _conversation(
    client: Any, thread: str, turns: int, seed: str, out: list[dict], errors: list[str]
) -> None:
    rng = random.Random(seed)
    for t in range(turns):
        try:
            out.append(await _turn(client, thread, "memory_agent", f"{user_question(rng)} ({t})"))
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(f"{thread} turn {t}: {type(exc).__name__}: {exc}"[:300])


async def _memory_drained(pairs: list[tuple[Any, str, str]], quiet_s: float) -> float:
    """Seconds until no memory run of these (client, user, thread) is due, for ``quiet_s``."""
    start, quiet_since = time.perf_counter(), None
    while time.perf_counter() - start < 600:
        busy = False
        for client, user, thread in pairs:
            try:
                runs = await client.runs.list(memory_thread_id(user, thread))
            except httpx.HTTPStatusError:  # no memory thread yet
                runs = []
            busy = busy or any(r["status"] in ("pending", "running") for r in runs)
        now = time.perf_counter()
        quiet_since = None if busy else (quiet_since or now)
        if quiet_since and now - quiet_since >= quiet_s:
            return round(quiet_since - start, 2)
        await asyncio.sleep(0.25)
    raise TimeoutError("memory runs still going after 600 s")


async def _snapshot(servers: list[tuple], conn: Any, redis_pid: int, model_pid: int) -> dict:
    """CPU seconds so far of each group's processes, and of the machine (``0``)."""
    query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    backends = [row[0] for row in await (await conn.execute(query)).fetchall()]
    own = []
    for proc, _ in servers:
        own += [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
    pids = {"servers": own, "postgres": backends, "redis": [redis_pid], "model": [model_pid],
            "client": [os.getpid()]}  # fmt: skip
    t = psutil.cpu_times()
    machine = t.user + t.system + t.nice + t.irq + t.softirq + t.steal
    return {**{g: {p: _cpu_s(p) for p in ps} for g, ps in pids.items()}, "machine": {0: machine}}


async def _engine_run(
    a: argparse.Namespace, spec: str, servers: list[tuple], services: Any, snap: Any, secret: str
) -> dict[str, Any]:
    tag = f"{spec.replace(':', '')}-{uuid.uuid4().hex[:6]}"
    users = [f"tp-{tag}-{i}" for i in range(a.conversations)]
    env = {"MEMORY_AGENT_JWT_SECRET": secret}
    tokens = [server_token(u, env, ttl_s=7200) for u in users]
    clients = [
        get_client(url=servers[i % len(servers)][1], headers={"Authorization": f"Bearer {t}"})
        for i, t in enumerate(tokens)
    ]
    threads = [(await c.threads.create())["thread_id"] for c in clients]

    async def warm(client: Any) -> None:  # each replica loads its graph and MiniLM at first
        await _conversation(client, (await client.threads.create())["thread_id"], 1, "", [], [])

    await asyncio.gather(*(warm(c) for c in clients * (1 + 6 * len(servers) // len(clients))))
    say(a.quiet, f"[throughput] {spec}: warm; {a.reply_first_turns} reply-first pairs")
    rng = random.Random(f"{a.seed}:{spec}")
    reply_first = await _reply_first(clients[0], a.reply_first_turns, rng)
    say(a.quiet, f"[throughput] {spec}: {a.conversations} x {a.turns} turns")
    before, turns, errors, start = await snap(), [], [], time.perf_counter()
    await asyncio.gather(*(
        _conversation(c, t, a.turns, f"{a.seed}:{i}", turns, errors)
        for i, (c, t) in enumerate(zip(clients, threads))
    ))  # fmt: skip
    replies_s = time.perf_counter() - start
    drain = await _memory_drained(list(zip(clients, users, threads)), MEMORY_DELAY_S + 1.0)
    elapsed = time.perf_counter() - start
    cpu = cpu_used(before, await snap())
    checks = [await verify_conversation(services, u, t) for u, t in zip(users, threads)]
    return {"engine": spec, "replicas": len(servers), "reply_first": reply_first,
            "turns": len(turns), "errors": len(errors), "error_samples": errors[:5],
            "turns_per_s": round(len(turns) / replies_s, 3), "replies_s": round(replies_s, 2),
            "memory_drain_s": drain, "elapsed_s": round(elapsed, 2),
            **{k: ms_stats([t[k] for t in turns]) for k in ("ttft", "reply", "end")},
            "cpu_s": cpu, "busiest": busiest(cpu, elapsed),
            "verification": {k: sum(c[k] for c in checks) for k in CHECKS}}  # fmt: skip


def _server_env(a: argparse.Namespace, env: Any, model_url: str, secret: str) -> dict[str, str]:
    """What every server gets: the run's stores, the fake model, raw summaries, one secret."""
    mine = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_AGENT_")}
    return {**mine, "PYTHONPATH": str(ROOT), "DATABASE_URL": env.database_url,
            "REDIS_URL": env.redis_url, "MEMORY_KEY_PREFIX": env.key_prefix,
            "OPENAI_API_KEY": "fake", "OPENAI_BASE_URL": model_url,
            "MODEL": "openai:gpt-4o-mini", "EMBEDDING_MODEL": EMBEDDING, "SUMMARY_MODE": "raw",
            "WINDOW_SIZE": str(a.window), "MEMORY_DELAY_S": str(MEMORY_DELAY_S),
            "MEMORY_AGENT_JWT_SECRET": secret,
            "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true", "CRON_ENABLED": "false",
            "REDIS_BROKER_ENABLED": "true", "WORKER_QUEUE_KEY": f"{env.key_prefix}:jobs",
            "REDIS_CHANNEL_PREFIX": f"{env.key_prefix}:run:"}  # fmt: skip


async def run(a: argparse.Namespace) -> bool:
    """Each engine in turn; true when no turn failed and nothing was lost or duplicated."""
    python = a.server_python or sys.executable
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    secret = uuid.uuid4().hex * 2
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        folder, port = Path(tmp), _free_port()
        _config(folder)
        cmd = [python, "-m", "bench.fake_model", str(port), *map(str, PACE.values())]
        model_url = f"http://127.0.0.1:{port}/v1"
        model = _start(cmd, dict(os.environ), f"{model_url}/chat/completions", folder / "m.log")
        try:
            async with (
                isolated_services(
                    a.database_url, a.redis_url, a.key_prefix, tag="throughput"
                ) as env,
                services_session(EMBEDDING) as services,
                await psycopg.AsyncConnection.connect(env.database_url, autocommit=True) as conn,
            ):
                info = {**await machine_info(env.database_url), "server_python": version}
                redis_pid = int((await services.redis.info("server"))["process_id"])
                for spec in a.engines:
                    say(a.quiet, f"[throughput] starting {spec}")
                    server_env = _server_env(a, env, model_url, secret)
                    servers = _engine(spec, server_env, python, folder)
                    try:
                        snap = functools.partial(_snapshot, servers, conn, redis_pid, model.pid)
                        results.append(await _engine_run(a, spec, servers, services, snap, secret))
                    finally:
                        for proc, _ in servers:
                            _stop(proc)
                    say(a.quiet, f"[throughput] {spec}: {results[-1]['turns_per_s']} turns/s")
        finally:
            _stop(model)
    data = {"benchmark": "throughput", "machine": info, "loadavg_at_end": list(os.getloadavg()),
            "config": {"conversations": a.conversations, "turns": a.turns,
                       "reply_first_turns": a.reply_first_turns, "window_size": a.window,
                       "memory_delay_s": MEMORY_DELAY_S, "summary_mode": "raw",
                       "model": {"api": "OpenAI-compatible (bench.fake_model)", **PACE},
                       "embedding_model": EMBEDDING, "seed": a.seed},
            "engines": results}  # fmt: skip
    write_results(a.out, "throughput", data, show=("throughput-table",))
    bad = ("lost", "duplicated", "foreign")
    return all(not r["errors"] and not any(r["verification"][k] for k in bad) for r in results)


COMMON = ("out", "seed", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.throughput` beside the common ones."""
    engines = "dev,aegra:1,aegra:2,aegra:4"
    p.add_argument("--engines", type=parse_engines, default=engines, help="aegra:N: N replicas")
    p.add_argument("--conversations", type=int, default=12, help="concurrent conversations")
    p.add_argument("--turns", type=int, default=12, help="turns per conversation")
    p.add_argument("--reply-first-turns", type=int, default=60, help="pairs, one at a time")
    p.add_argument("--window", type=int, default=8, help="WINDOW_SIZE: messages leave it soon")
    p.add_argument("--server-python", default=None, help="the servers' Python (default: this)")


if __name__ == "__main__":
    raise SystemExit(main("throughput"))
