"""The console script: memory show, services status, bad ids, and the demo itself."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import uuid

import pytest

from memory_graph_agent.cli.main import main
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel
from tests.conftest import say


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_graph_agent.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_memory_show_prints_profile_and_summaries_with_provenance(
    graph_for, make_context, capsys
):
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:6]}"
    await say(agent, ctx, thread, "Hi! My name is Zhang San and I live in Berlin.")
    await say(agent, ctx, thread, "What is a haiku?")
    code = await asyncio.to_thread(main, ["memory", "show", "--user", ctx.user_id, "--json"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["profile"]["name"]["value"] == "Zhang San"
    (summary,) = shown["memories"]
    assert summary["kind"] == "summary" and len(summary["source_ids"]) == 2
    assert shown["profile"]["name"]["source_ids"] == [summary["id"]]


def test_memory_show_rejects_a_hostile_user_id():
    result = _cli("memory", "show", "--user", "a:*")
    assert result.returncode == 2
    assert "invalid user_id" in result.stdout


def test_services_status_reports_both_servers():
    result = _cli("services", "status")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["redis"]["running"] and status["postgres"]["running"]


async def test_demo_keeps_identity_across_threads_and_users(monkeypatch, capsys):
    monkeypatch.setenv(
        "MODEL", register_chat_model(f"demo-{uuid.uuid4().hex[:6]}", ScriptedChatModel())
    )
    monkeypatch.setenv("FACT_RULES", "on")  # what the demo's local model runs with
    from memory_graph_agent.cli.demo import run_demo

    code = await run_demo()  # the script `memory-agent demo` runs
    out = capsys.readouterr().out
    assert code == 0, out
    assert "What this proves:" in out.split("turn  1")[0], "the plan comes before the turns"
    flat = " ".join(out.split())  # the console wraps long lines
    left = re.search(r">> after turn \d+ \(\d+ s\): the introduction left the window", flat)
    # in a summary at a later turn, or at /new when memory ran late (here: instant turns)
    landed = re.search(r">> after (turn \d+|/new) \(\d+ s\): the introduction now lives", flat)
    assert left and landed and left.start() < landed.start(), out
    assert "has Zhang San's identity in its prompt: YES" in out
    assert "notes the change Go → Rust: YES" in out
    assert "profile history: preferred_language was 'Go'" in out
    assert re.search(r"reflections written: [1-9]", out)
    assert "sees Zhang San's memory: NO" in out


@pytest.mark.local_model
@pytest.mark.slow
async def test_one_graph_turn_with_the_real_local_model(agent, make_context, services):
    ctx = make_context(model="local:smollm2")
    thread = f"t-{uuid.uuid4().hex[:6]}"
    state = await say(agent, ctx, thread, "Hello! Say hi back in a few words.")
    reply = state["messages"][-1]
    assert reply.type == "ai" and str(reply.content).strip()
    assert [m.id for m in await services.window.window(ctx.user_id, thread)] == [
        m.id for m in state["messages"]
    ]


@pytest.mark.local_model
@pytest.mark.slow
async def test_interactive_chat_runs_turns_and_rejects_empty_input(services):
    user, thread = f"u-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:6]}"
    result = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "memory_graph_agent.cli.main",
            "chat",
            "--user",
            user,
            "--thread",
            thread,
        ],
        input="Hello there!\n   \n/quit\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "agent>" in result.stdout and "empty message ignored" in result.stdout
    window = await services.window.window(user, thread)
    assert [m.role for m in window] == ["human", "ai"] and window[0].content == "Hello there!"
