"""Start `langgraph dev` from the repository root for the server tests, and talk to it.

`running_dev_server` starts it on a free port with the given environment (offline, no
reload), waits for ``/ok`` and kills its whole process group afterwards. `Credentials`
are the keys and the JWT secret a test server is started with; `client` builds a
`langgraph_sdk` client that sends one of them (or nothing: anonymous).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import jwt
import pytest
from langgraph_sdk import get_client

REPO_ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
READY_TIMEOUT = 120.0
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
}
# what the tests set themselves; a developer's shell must not leak into the server
AUTH_ENV = ("MEMORY_AGENT_AUTH", "MEMORY_AGENT_API_KEYS", "MEMORY_AGENT_API_KEYS_FILE",
            "MEMORY_AGENT_JWT_SECRET", "MEMORY_AGENT_JWT_AUDIENCE", "MEMORY_AGENT_JWT_ISSUER",
            "USER_ID")  # fmt: skip


@dataclass
class DevServer:
    url: str
    log_path: Path

    def log(self, chars: int = 4000) -> str:
        return _tail(self.log_path, chars)


@dataclass
class Credentials:
    """Two users and an admin with API keys, plus a JWT secret to mint tokens for anyone."""

    alice: str = field(default_factory=lambda: f"alice-{uuid.uuid4().hex[:8]}")
    bob: str = field(default_factory=lambda: f"bob-{uuid.uuid4().hex[:8]}")
    admin: str = field(default_factory=lambda: f"admin-{uuid.uuid4().hex[:8]}")
    keys: dict[str, str] = field(default_factory=dict)  # user id -> key
    jwt_secret: str = field(default_factory=lambda: secrets.token_urlsafe(48))

    def __post_init__(self) -> None:
        for user in (self.alice, self.bob, self.admin):
            self.keys[user] = f"sk-test-{secrets.token_urlsafe(24)}"

    def env(self) -> dict[str, str]:
        entries = [f"{self.keys[self.alice]}:{self.alice}", f"{self.keys[self.bob]}:{self.bob}",
                   f"{self.keys[self.admin]}:{self.admin}:admin"]  # fmt: skip
        return {"MEMORY_AGENT_API_KEYS": ",".join(entries),
                "MEMORY_AGENT_JWT_SECRET": self.jwt_secret}  # fmt: skip

    def token(self, user_id: str, *, roles: list[str] | None = None, ttl: float = 600,
              secret: str | None = None) -> str:  # fmt: skip
        claims = {"sub": user_id, "exp": int(time.time() + ttl), "roles": roles or []}
        return jwt.encode(claims, secret or self.jwt_secret, algorithm="HS256")


def client(url: str, *, key: str | None = None, token: str | None = None):
    """A `langgraph_sdk` client sending an API key, a bearer token, or nothing at all."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return get_client(url=url, api_key=key, headers=headers)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"(no server log: {exc})"


def _spawn(env: dict[str, str], config: Path | None = None) -> tuple[subprocess.Popen, str, Path]:
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} not found (install langgraph-cli[inmem])")
    port = _free_port()
    base = {k: v for k, v in os.environ.items() if k not in AUTH_ENV}
    log = tempfile.NamedTemporaryFile("w+b", prefix="langgraph-dev-", suffix=".log", delete=False)
    # --no-reload: other people edit the repo while tests run; a reload mid-run would
    # restart the server and drop the in-flight run.
    cmd = [str(LANGGRAPH), "dev", "--port", str(port), "--host", "127.0.0.1",
           "--no-browser", "--no-reload"]  # fmt: skip
    if config is not None:  # another langgraph.json than the repository's
        cmd += ["--config", str(config)]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env={**base, **OFFLINE_ENV, **env},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    return proc, f"http://127.0.0.1:{port}", Path(log.name)


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextmanager
def running_dev_server(env: dict[str, str], config: Path | None = None) -> Iterator[DevServer]:
    """`langgraph dev` with ``env`` on top of this process's; stopped (and its log removed).

    ``config``: a ``langgraph.json`` of the test's own (default: the repository's).
    """
    proc, url, log_path = _spawn(env, config)
    server = DevServer(url, log_path)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{server.log()}")
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev not ready on {url}/ok:\n{server.log()}")
            time.sleep(0.5)
        yield server
    finally:
        _stop(proc)
        if os.environ.get("KEEP_SERVER_LOG"):
            print(f"langgraph dev log kept at {log_path}")
        else:
            log_path.unlink(missing_ok=True)


def failed_start(env: dict[str, str], timeout: float = READY_TIMEOUT) -> tuple[int | None, str]:
    """Start `langgraph dev` expecting it to refuse: (exit code or None if it served, log)."""
    proc, url, log_path = _spawn(env)
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    return None, _tail(log_path)
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        return proc.poll(), _tail(log_path, 20000)
    finally:
        _stop(proc)
        log_path.unlink(missing_ok=True)
