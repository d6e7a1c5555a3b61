"""The two engines that serve ``langgraph.json`` hand requests to our auth in two shapes.

The LangGraph server (``langgraph dev``) passes headers as bytes and a run's fields nested
in ``kwargs``, applies edits made in place and takes a returned dict as the owner filter.
Aegra passes headers as str and a run's fields flat (``metadata`` may be None), applies
only the ``context``/``config`` of a returned dict, and cannot take a rewritten input.
Each shape is adapted in one place (`auth.credentials._credential`, `auth.handlers.create_run`,
`auth.handlers.create_cron` and `update_cron`);
a deployment whose auth cannot load refuses to start on both (`memory_graph_agent.webapp`).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.routing import APIRoute

from memory_graph_agent.auth.credentials import Verifier, parse_api_keys

ROOT = Path(__file__).resolve().parents[2]
KEY_A = "alice-key-0123456789abcdef"
KEY_OPS = "ops-key-0123456789abcdefgh"


def test_headers_as_bytes_or_str_name_the_same_caller() -> None:
    verifier = Verifier(parse_api_keys(f"{KEY_A}:alice", "test"), None)
    langgraph = {b"x-api-key": KEY_A.encode()}
    aegra = {"X-Api-Key": KEY_A}
    bearer = {"authorization": f"Bearer {KEY_A}"}
    assert {verifier.identify(h).user_id for h in (langgraph, aegra, bearer)} == {"alice"}


@pytest.fixture
def handlers(monkeypatch: pytest.MonkeyPatch):
    keys = f"{KEY_A}:alice,{KEY_OPS}:ops:admin"
    monkeypatch.setenv("MEMORY_AGENT_API_KEYS", keys)  # read once, at the first import
    module = importlib.import_module("memory_graph_agent.auth.handlers")
    monkeypatch.setattr(module, "ENABLED", True)
    monkeypatch.setattr(module, "VERIFIER", Verifier(parse_api_keys(keys, "test"), None))
    return module


def _ctx(user: str, *permissions: str) -> SimpleNamespace:
    return SimpleNamespace(user=SimpleNamespace(identity=user), permissions=list(permissions))


def _run(handlers, ctx, value):
    return asyncio.run(handlers.create_run(ctx, value))


def test_a_langgraph_run_is_edited_in_place_and_filtered_by_owner(handlers) -> None:
    value = {
        "thread_id": "t-1",
        "assistant_id": "memory_agent",
        "metadata": {},
        "kwargs": {"input": {"messages": []}, "context": {}},
    }
    assert _run(handlers, _ctx("alice"), value) == {"owner": "alice"}
    assert value["kwargs"]["context"]["user_id"] == "alice"
    assert value["metadata"]["owner"] == "alice"


def test_an_aegra_run_returns_the_callers_context(handlers) -> None:
    value = {"thread_id": "t-1", "assistant_id": "memory_agent", "metadata": None,
             "input": {"messages": []}, "context": None}  # fmt: skip
    assert _run(handlers, _ctx("alice"), value) == {"context": {"user_id": "alice"}}


def test_an_aegra_run_cannot_claim_another_user(handlers) -> None:
    from langgraph_sdk import Auth

    value = {"thread_id": "t-1", "assistant_id": "memory_agent", "context": {"user_id": "bob"}}
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _run(handlers, _ctx("alice"), value)
    assert refused.value.status_code == 403


def test_an_aegra_maintenance_run_must_name_its_caller(handlers) -> None:
    """Aegra drops input edits, so the input the rules would write must be the one sent."""
    from langgraph_sdk import Auth

    loose = {"assistant_id": "maintenance", "input": {"dry_run": True}}
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _run(handlers, _ctx("alice"), loose)
    assert refused.value.status_code == 403 and "'user_id': 'alice'" in refused.value.detail
    exact = {"assistant_id": "maintenance",
             "input": {"dry_run": True, "user_id": "alice", "all_users": False}}  # fmt: skip
    assert _run(handlers, _ctx("alice"), exact) == {"context": {"user_id": "alice"}}
    admin = {"assistant_id": "maintenance", "input": {"all_users": True}}
    assert _run(handlers, _ctx("ops", "admin"), admin) == {"context": {"user_id": "ops"}}


def _status(handler, *args) -> int:
    from langgraph_sdk import Auth

    try:
        asyncio.run(handler(*args))
    except Auth.exceptions.HTTPException as exc:
        return exc.status_code
    return 200


def test_crons_of_both_shapes_follow_the_run_rules(handlers) -> None:
    """LangGraph nests a cron's run in ``payload`` and applies edits; Aegra passes it flat,
    fires it as sent without the run rules, and passes an update without its assistant."""
    nightly = {"dry_run": True, "user_id": "alice", "all_users": False}
    langgraph = {"metadata": {}, "payload": {"assistant_id": "maintenance", "input": {}}}
    assert _status(handlers.create_cron, _ctx("alice"), langgraph) == 200
    assert langgraph["payload"]["input"] == {"user_id": "alice", "all_users": False}
    aegra = {"assistant_id": "maintenance", "metadata": None, "input": nightly}
    assert _status(handlers.create_cron, _ctx("alice"), aegra) == 403  # no user in context
    assert _status(handlers.create_cron, _ctx("alice"),
                   {**aegra, "context": {"user_id": "alice"}}) == 200  # fmt: skip
    loose = {**aegra, "input": {"dry_run": True}, "context": {"user_id": "alice"}}
    assert _status(handlers.create_cron, _ctx("alice"), loose) == 403  # cannot be rewritten
    assert _status(handlers.update_cron, _ctx("alice"), {"cron_id": "c", "enabled": False}) == 200
    changed = {"cron_id": "c", "input": {"all_users": True}}
    assert _status(handlers.update_cron, _ctx("alice"), changed) == 403


def test_the_custom_routes_are_fastapi_routes() -> None:
    """Aegra takes only a FastAPI app, and authenticates only its FastAPI routes."""
    code = (
        "from fastapi import FastAPI; from memory_graph_agent.webapp import app; "
        "assert isinstance(app, FastAPI); "
        "print(sorted(r.path for r in app.routes if type(r).__name__ == 'APIRoute'))"
    )
    env = {**os.environ, "MEMORY_AGENT_API_KEYS": f"{KEY_A}:alice"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['/memory/metrics', '/memory/users/{user_id}', '/metrics']"
    assert APIRoute  # the type the engines check


def test_an_app_whose_auth_cannot_load_refuses_to_start() -> None:
    """Fail closed: Aegra loads the auth module at the first request and served everyone as
    'anonymous' when it raised; loading the app (at start, on every engine) raises first."""
    env = {**os.environ, "MEMORY_AGENT_API_KEYS": "short:alice"}
    env.pop("MEMORY_AGENT_AUTH", None)
    command = [sys.executable, "-c", "import memory_graph_agent.webapp"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert run.returncode != 0
    assert "AuthConfigError" in run.stderr and "16" in run.stderr, run.stderr[-500:]
