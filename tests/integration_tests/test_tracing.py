"""LangSmith tracing: on with ``LANGSMITH_TRACING=true`` + a key, off (and silent) otherwise.

A tiny local HTTP server stands in for LangSmith: it answers ``GET /info`` and accepts
the ingest endpoints (``POST /runs``, ``/runs/batch``, ``/runs/multipart``,
``PATCH /runs/<id>``), recording every request. The client is configured only through
the environment, exactly as a user would; langsmith caches its env lookups and its
client, so the fixture clears both before and after.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import langsmith.run_trees as rt
import langsmith.utils as ls_utils
import pytest
from langchain_core.tracers.langchain import wait_for_all_tracers

from tests.conftest import say

NODES = {"load_profile", "recall", "respond", "trim_window"}
_NAME = re.compile(rb'"name"\s*:\s*"([^"]+)"')


class _Recorder(BaseHTTPRequestHandler):
    requests: list[tuple[str, str, bytes]]  # set per server

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self.requests.append(("GET", self.path, b""))
        self._reply(200, {"version": "0.0.0-test"} if self.path.startswith("/info") else {})

    def do_POST(self) -> None:  # noqa: N802
        self.requests.append(("POST", self.path, self._body()))
        self._reply(202 if self.path.startswith("/runs") else 404, {})

    def do_PATCH(self) -> None:  # noqa: N802
        self.requests.append(("PATCH", self.path, self._body()))
        self._reply(202 if self.path.startswith("/runs") else 404, {})

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass


@pytest.fixture
def fake_langsmith() -> Iterator[tuple[str, list]]:
    """A local LangSmith stand-in on a free port: ``(url, recorded requests)``."""
    recorded: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (_Recorder,), {"requests": recorded})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", recorded
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _reset_langsmith_caches() -> None:
    ls_utils.get_env_var.cache_clear()
    ls_utils.get_tracer_project.cache_clear()


@pytest.fixture
def langsmith_env(monkeypatch, fake_langsmith):
    """Point LangSmith at the stand-in; return a setter for ``LANGSMITH_TRACING``."""
    url, recorded = fake_langsmith
    for var in ("LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING", "LANGCHAIN_ENDPOINT",
                "LANGCHAIN_API_KEY", "LANGCHAIN_PROJECT", "LANGSMITH_OTEL_ENABLED"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANGSMITH_ENDPOINT", url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "test")
    monkeypatch.setenv("LANGSMITH_PROJECT", "memory-agent-tests")
    monkeypatch.setattr(rt, "_CLIENT", None)  # a fresh client reads the env above

    def tracing(value: str | None) -> list[tuple[str, str, bytes]]:
        if value is None:
            monkeypatch.delenv("LANGSMITH_TRACING", raising=False)
        else:
            monkeypatch.setenv("LANGSMITH_TRACING", value)
        _reset_langsmith_caches()
        return recorded

    yield tracing
    client = rt._CLIENT
    if client is not None:
        client.cleanup(timeout=10)
    _reset_langsmith_caches()


async def test_tracing_sends_one_named_run_per_node(agent, make_context, langsmith_env):
    recorded = langsmith_env("true")
    await say(agent, make_context(), f"t-{uuid.uuid4().hex[:8]}", "Hello, I keep bees.")
    assert rt._CLIENT is not None, "tracing on but no LangSmith client was created"
    wait_for_all_tracers()

    ingest = [(m, p, b) for m, p, b in recorded if p.startswith("/runs")]
    assert ingest, f"no run reached the stand-in server; saw {[(m, p) for m, p, _ in recorded]}"
    names = {n.decode() for _, _, body in ingest for n in _NAME.findall(body)}
    assert NODES <= names, f"missing node runs: {NODES - names} (got {sorted(names)})"
    assert "memory_agent" in names  # the graph itself is the root run


@pytest.mark.parametrize("setting", [None, "false"])
async def test_tracing_off_sends_nothing(agent, make_context, langsmith_env, setting):
    recorded = langsmith_env(setting)
    await say(agent, make_context(), f"t-{uuid.uuid4().hex[:8]}", "Hello, I keep bees.")
    wait_for_all_tracers()
    assert rt._CLIENT is None
    assert recorded == []
