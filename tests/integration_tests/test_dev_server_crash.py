"""A run that kills `langgraph dev` is retried by the restarted server once, then refused.

The server runs from a throw-away directory (its own ``.langgraph_api`` state) with a graph
module whose chat model kills the server process, as the local model's segfault did. The
first attempt waits until the server has saved the run as running; every later one dies at
once. Without the breaker the restarted server re-runs the run and dies, again and again.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.integration_tests.dev_server import (
    LANGGRAPH,
    OFFLINE_ENV,
    READY_TIMEOUT,
    _free_port,
)

pytestmark = [pytest.mark.server, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
CRASHING_GRAPH = """
import os, signal, sys, time
from pathlib import Path

sys.path.insert(0, {repo!r})
from graph.builder import make_graph as _make_graph
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.testing import ScriptedChatModel

HERE = Path(__file__).parent


def _die(messages):
    first = HERE / "first-attempt"
    if not first.exists():
        first.touch()
        time.sleep(12)  # the dev server saves its runs every 10 s: this one as running
    # (a blocking sleep: the server runs with --allow-blocking)
    os.kill(os.getpid(), signal.SIGKILL)


crashing = ScriptedChatModel(handlers={{"reply": _die}})
os.environ["MODEL"] = register_chat_model("segfaulting", crashing)


async def make_graph(config):
    return await _make_graph(config)
"""


class DevServer:
    """`langgraph dev` in ``workdir``; restartable, always killed at the end."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir, self.env = workdir, env
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cmd = [str(LANGGRAPH), "dev", "--port", str(self.port), "--host", "127.0.0.1",
               "--no-browser", "--no-reload", "--allow-blocking"]  # fmt: skip
        log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 (the child keeps it)
        self.proc = subprocess.Popen(
            cmd, cwd=self.workdir, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self) -> bool:
        """True once it serves; False if it died first."""
        deadline = time.monotonic() + READY_TIMEOUT
        while self.alive() and time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        return False

    def wait_death(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)

    def log(self) -> str:
        return (self.workdir / "server.log").read_text(errors="replace")[-4000:]


@pytest.fixture
def server(memory_env: dict[str, str]) -> Iterator[DevServer]:
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} not found (install langgraph-cli[inmem])")
    workdir = Path(tempfile.mkdtemp(prefix="ma-devcrash-"))
    (workdir / "crashing_graph.py").write_text(CRASHING_GRAPH.format(repo=str(REPO_ROOT)))
    spec = {"graphs": {"memory_agent": "./crashing_graph.py:make_graph"}, "dependencies": ["."]}
    (workdir / "langgraph.json").write_text(json.dumps(spec))
    env = {**os.environ, **OFFLINE_ENV, **memory_env, "PYTHONPATH": str(REPO_ROOT)}
    dev = DevServer(workdir, env)
    try:
        yield dev
    finally:
        dev.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_run_that_kills_the_server_twice_is_not_retried_again(server: DevServer) -> None:
    server.start()
    assert server.wait_ready(), server.log()

    async def start_run() -> tuple[str, str]:
        client = get_client(url=server.url)
        thread = await client.threads.create()
        user = f"u-crash-{uuid.uuid4().hex[:8]}"
        run = await client.runs.create(
            thread["thread_id"], "memory_agent",
            input={"messages": [{"role": "human", "content": "this input kills the model"}]},
            context={"user_id": user},
        )  # fmt: skip
        return thread["thread_id"], run["run_id"]

    thread_id, run_id = asyncio.run(start_run())
    assert server.wait_death(90), "the model did not kill the server"

    deaths = 1
    for _ in range(3):  # restarts: the run is retried each time
        server.start()
        if server.wait_ready() and not server.wait_death(45):
            break  # survived the retried run
        deaths += 1
    assert server.alive(), f"the server died {deaths} times on one run:\n{server.log()}"
    assert deaths == 2, server.log()

    async def run_status() -> dict:
        client = get_client(url=server.url)
        for _ in range(60):
            run = await client.runs.get(thread_id, run_id)
            if run["status"] not in ("pending", "running"):
                return run
            await asyncio.sleep(1)
        return run

    assert asyncio.run(run_status())["status"] == "error"
    assert "RepeatedCrashError" in server.log() or "not retried again" in server.log()
