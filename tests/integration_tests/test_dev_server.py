"""The agent behind a real `langgraph dev` server, driven through `langgraph_sdk`.

A module-scoped fixture starts ``langgraph dev`` on a free port from the repository
root, pointed at the test session's Redis/Postgres (the ``memory_env`` fixture), and
kills its whole process group at the end. Turns use the real offline model
(SmolLM2-135M) with a tiny window, so two turns are enough to evict the first turn and
store its summary in pgvector.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import redis
from langgraph_sdk import get_client

pytestmark = pytest.mark.server

REPO_ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
GRAPH_ID = "memory_agent"
MODEL = "local:smollm2"
READY_TIMEOUT = 120.0
NODES = {"load_profile", "recall", "respond", "trim_window", "summarize", "consolidate", "reflect"}
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"(no server log: {exc})"


@pytest.fixture(scope="module")
def server_url(memory_env: dict[str, str]) -> Iterator[str]:
    """Start `langgraph dev` on a free port; yield its base URL; kill it afterwards."""
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} not found (install langgraph-cli[inmem])")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **OFFLINE_ENV, **memory_env}
    log_file = tempfile.NamedTemporaryFile(
        "w+b", prefix="langgraph-dev-", suffix=".log", delete=False
    )
    log_path = Path(log_file.name)
    # --no-reload: other people edit the repo while tests run; a reload mid-run would
    # restart the server and drop the in-flight run.
    cmd = [str(LANGGRAPH), "dev", "--port", str(port), "--host", "127.0.0.1",
           "--no-browser", "--no-reload"]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"langgraph dev exited with {proc.returncode} before serving:\n"
                    f"{_tail(log_path)}"
                )
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"langgraph dev not ready on {url}/ok after {READY_TIMEOUT:.0f}s:\n"
                    f"{_tail(log_path)}"
                )
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log_file.close()
        if os.environ.get("KEEP_SERVER_LOG"):
            print(f"langgraph dev log kept at {log_path}")
        else:
            log_path.unlink(missing_ok=True)


def _ai_reply(output: dict) -> str:
    msgs = output.get("messages") or []
    ai = [m for m in msgs if m.get("type") == "ai"]
    assert ai, f"no AI message in the run output: {output!r}"
    content = ai[-1]["content"]
    return content if isinstance(content, str) else str(content)


async def test_two_turns_through_the_server_reach_redis_and_pgvector(
    server_url: str, memory_env: dict[str, str]
) -> None:
    client = get_client(url=server_url)
    user = f"u-srv-{uuid.uuid4().hex[:10]}"
    context = {"user_id": user, "window_size": 2, "summary_batch": 2, "model": MODEL}

    # the deployed assistant exposes all seven memory nodes
    assistants = await client.assistants.search(graph_id=GRAPH_ID)
    assert assistants, f"no assistant for graph {GRAPH_ID!r}"
    assistant_id = assistants[0]["assistant_id"]
    drawn = await client.assistants.get_graph(assistant_id)
    node_ids = {n["id"] for n in drawn["nodes"]}
    assert NODES <= node_ids, f"missing nodes: {NODES - node_ids}"

    thread = await client.threads.create()
    thread_id = thread["thread_id"]
    outputs = []
    for text in ["I keep bees in my garden.", "What is two plus two?"]:
        out = await client.runs.wait(
            thread_id,
            GRAPH_ID,
            input={"messages": [{"role": "human", "content": text}]},
            context=context,
        )
        assert isinstance(out, dict) and "__error__" not in out, out
        assert _ai_reply(out).strip(), "the model produced an empty reply"
        outputs.append(out)

    # turn 2 pushed the window over 2 messages: turn 1 left it, was summarized
    events = outputs[-1].get("memory_events") or []
    assert any(e["node"] == "summarize" for e in events), events
    assert any(e["node"] == "consolidate" and e["kind"] == "stored" for e in events), events

    # the server process exposes the agent's Prometheus metrics; its two runs counted
    scrape = httpx.get(f"{server_url}/metrics", timeout=10)
    retrievals = re.search(r"^agent_memory_retrieval_seconds_count (\S+)$", scrape.text, re.M)
    assert scrape.status_code == 200 and retrievals and float(retrievals.group(1)) >= 2, (
        scrape.text[-3000:]
    )

    prefix = memory_env["MEMORY_KEY_PREFIX"]
    r = redis.Redis.from_url(memory_env["REDIS_URL"], decode_responses=True)
    try:
        window_key = f"{prefix}:window:{user}:{thread_id}"
        assert r.exists(window_key), f"{window_key} missing"
        assert r.llen(window_key) == 2  # turn 2 only
        assert r.llen(f"{prefix}:pending:{user}:{thread_id}") == 0  # turn 1 acked
    finally:
        r.close()

    with psycopg.connect(memory_env["DATABASE_URL"]) as conn:
        rows = conn.execute(
            "SELECT content, source_ids, thread_id FROM memories_384 "
            "WHERE user_id = %s AND kind = 'summary'",
            (user,),
        ).fetchall()
    assert len(rows) >= 1, "no summary stored in pgvector"
    content, source_ids, stored_thread = rows[0]
    assert content.strip() and stored_thread == thread_id
    first_turn_ids = [m["id"] for m in outputs[0]["messages"][:2]]
    assert source_ids == first_turn_ids, (source_ids, first_turn_ids)


async def test_session_end_and_maintenance_graph_through_the_server(
    server_url: str, memory_env: dict[str, str]
) -> None:
    client = get_client(url=server_url)
    user = f"u-srv-{uuid.uuid4().hex[:10]}"
    # raw summaries: the archive needs no model call (the model's part is tested above)
    context = {"user_id": user, "model": MODEL, "summary_mode": "raw"}
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "human", "content": "I keep bees in my garden."}]},
        context=context,
    )
    # {"end_session": true}: no answer, the whole thread is archived into memory
    out = await client.runs.wait(thread_id, GRAPH_ID, input={"end_session": True}, context=context)
    assert isinstance(out, dict) and "__error__" not in out, out
    assert out["messages"] == [] and out["pending_count"] == 0, out.get("memory_events")
    with psycopg.connect(memory_env["DATABASE_URL"]) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM memories_384 WHERE user_id = %s AND kind = 'summary'", (user,)
        ).fetchone()
    assert n == 1

    # the second graph of langgraph.json, as a cron would run it (here once, dry)
    assert await client.assistants.search(graph_id="maintenance")
    thread_id = (await client.threads.create())["thread_id"]
    report = await client.runs.wait(
        thread_id, "maintenance", input={"user_id": user, "dry_run": True}, context=context
    )
    assert isinstance(report, dict) and "__error__" not in report, report
    assert report["report"]["dry_run"] is True and report["users"] == [user]


async def test_forget_deletes_the_users_server_threads_and_nothing_comes_back(
    server_url: str, memory_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`forget` also deletes the threads `langgraph dev` keeps: a message sent again to an
    old thread id (which would re-push its whole checkpoint) brings nothing back."""
    from memory_graph_agent.cli.main import main

    client = get_client(url=server_url)
    user = f"u-srv-{uuid.uuid4().hex[:10]}"
    context = {"user_id": user, "model": MODEL, "window_size": 2, "summary_mode": "raw"}
    said = ["My name is Zoltan Quimby.", "I live in Reykjavik and keep bees."]
    thread_id = (await client.threads.create())["thread_id"]  # found by its owner: key
    tagged = (await client.threads.create(metadata={"user_id": user}))["thread_id"]
    for text in said:
        await client.runs.wait(
            thread_id, GRAPH_ID, input={"messages": [{"role": "human", "content": text}]},
            context=context,
        )  # fmt: skip
    monkeypatch.setenv("LANGGRAPH_SERVER_URL", server_url)
    assert await asyncio.to_thread(main, ["forget", "--user", user, "--yes"]) == 0

    for gone in (thread_id, tagged):
        with pytest.raises(httpx.HTTPStatusError) as missing:
            await client.threads.get(gone)
        assert missing.value.response.status_code == 404
    out = await client.runs.wait(
        thread_id, GRAPH_ID, input={"messages": [{"role": "human", "content": "Who am I?"}]},
        context=context, if_not_exists="create",
    )  # fmt: skip
    assert [m["content"] for m in out["messages"] if m["type"] == "human"] == ["Who am I?"]
    prefix = memory_env["MEMORY_KEY_PREFIX"]
    r = redis.Redis.from_url(memory_env["REDIS_URL"], decode_responses=True)
    try:
        kept = [v for k in r.scan_iter(match=f"{prefix}:*:{user}*") if r.type(k) == "list"
                for v in r.lrange(k, 0, -1)]  # fmt: skip
        kept.append(json.dumps(r.hgetall(f"{prefix}:profile:{user}")))
    finally:
        r.close()
    with psycopg.connect(memory_env["DATABASE_URL"]) as conn:
        for table in ("episodes", "memories_384"):
            rows = conn.execute(f"SELECT content FROM {table} WHERE user_id = %s", (user,))
            kept += [row[0] for row in rows.fetchall()]
    for word in ("Zoltan", "Reykjavik", "bees"):
        assert not any(word in text for text in kept), f"{word!r} came back after forget"
