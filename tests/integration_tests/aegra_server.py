"""Start an Aegra server process (uvicorn) for the Aegra tests, wait for it, kill it whole.

Each server runs in a process group of its own, so killing it (``SIGTERM`` at the end,
``SIGKILL`` for a crash) takes whatever it started along, and the test reaps it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """``uvicorn aegra_api.main:app`` on ``port`` from the repository root, logging to ``log``."""
    command = [sys.executable, "-m", "uvicorn", "aegra_api.main:app",
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: killed whole
        )  # fmt: skip


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float = 90) -> None:
    """Wait for ``/health`` (Aegra's; not ``/ok``); fail with the log if it exits or hangs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"Aegra did not answer on {url}: {log.read_text()[-3000:]}")


def kill(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Signal the server's whole process group and reap it (``SIGKILL`` if it lingers)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def summary_sources(database_url: str, user_id: str, thread_id: str) -> list[list[str]]:
    """The source message ids of each summary of a thread, as the server stored them."""
    query = (
        "SELECT source_ids FROM memories_384 "
        "WHERE user_id = %s AND thread_id = %s AND kind = 'summary' ORDER BY created_at"
    )
    with psycopg.connect(database_url) as conn:
        return [row[0] for row in conn.execute(query, (user_id, thread_id)).fetchall()]
