"""The agent behind a real `langgraph dev` server, driven through `langgraph_sdk`.

The session's ``dev_server`` fixture (``conftest.py``, helpers in ``dev_server.py``)
starts ``langgraph dev`` with authentication on, pointed at the test session's
Redis/Postgres. Each test's user authenticates with a JWT minted for a fresh user id.
Turns use the real offline model (SmolLM2-135M) with a tiny window, so two turns are
enough to evict the first turn and store its summary in pgvector.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import httpx
import psycopg
import pytest
import redis

from tests.integration_tests.dev_server import Credentials, DevServer, client

pytestmark = pytest.mark.server

GRAPH_ID = "memory_agent"
MODEL = "local:smollm2"
NODES = {"load_profile", "recall", "respond", "trim_window", "summarize", "consolidate", "reflect"}


def _ai_reply(output: dict) -> str:
    msgs = output.get("messages") or []
    ai = [m for m in msgs if m.get("type") == "ai"]
    assert ai, f"no AI message in the run output: {output!r}"
    content = ai[-1]["content"]
    return content if isinstance(content, str) else str(content)


async def test_two_turns_through_the_server_reach_redis_and_pgvector(
    dev_server: DevServer, server_credentials: Credentials, memory_env: dict[str, str]
) -> None:
    user = f"u-srv-{uuid.uuid4().hex[:10]}"
    sdk = client(dev_server.url, token=server_credentials.token(user))
    context = {"user_id": user, "model": MODEL}  # window 2, batch 2: the server's SERVER_KNOBS

    # the deployed assistant exposes all seven memory nodes
    assistants = await sdk.assistants.search(graph_id=GRAPH_ID)
    assert assistants, f"no assistant for graph {GRAPH_ID!r}"
    assistant_id = assistants[0]["assistant_id"]
    drawn = await sdk.assistants.get_graph(assistant_id)
    node_ids = {n["id"] for n in drawn["nodes"]}
    assert NODES <= node_ids, f"missing nodes: {NODES - node_ids}"
    leads = {e["source"] for e in drawn["edges"]}  # Studio's drawing: no node ends in nothing
    assert node_ids - leads == {"__end__"}, node_ids - leads
    entry = [e for e in drawn["edges"] if (e["source"], e["target"]) == ("__start__", "backlog")]
    assert entry, "the memory run's entry is drawn"

    thread = await sdk.threads.create()
    thread_id = thread["thread_id"]
    out = await sdk.runs.wait(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "human", "content": "I keep bees in my garden."}]},
        context=context,
    )
    assert isinstance(out, dict) and "__error__" not in out, out
    assert _ai_reply(out).strip(), "the model produced an empty reply"
    first_turn_ids = [m["id"] for m in out["messages"][:2]]

    # turn 2 streams its reply token by token (only respond's tokens) and pushes the window
    # over 2 messages: turn 1 leaves it and a background memory run summarizes it
    tokens, nodes, final = [], set(), {}
    async for part in sdk.runs.stream(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "human", "content": "What is two plus two?"}]},
        context=context,
        stream_mode=["messages-tuple", "values"],
    ):
        if part.event == "messages":
            chunk, meta = part.data
            nodes.add(meta["langgraph_node"])
            tokens.append(chunk["content"] if isinstance(chunk["content"], str) else "")
        elif part.event == "values":
            final = part.data
    assert nodes == {"respond"} and len(tokens) > 1, (nodes, tokens)
    assert "".join(tokens).strip() == _ai_reply(final).strip()
    events = final.get("memory_events") or []
    trim = [e for e in events if e["node"] == "trim_window"]
    assert any(e["kind"] == "scheduled" for e in trim), trim
    assert not any(e["node"] == "summarize" for e in events), "memory ran in the turn's run"
    history = await sdk.threads.get_history(thread_id, limit=50)
    assert len(history) == 2, "a turn's one checkpoint each (the graph picks durability exit)"

    # the memory run: the same graph, on the thread's memory thread, enqueued by the server
    memory_threads = await sdk.threads.search(metadata={"memory_of": thread_id})
    assert len(memory_threads) == 1, memory_threads
    memory_thread = memory_threads[0]["thread_id"]
    runs = await sdk.runs.list(memory_thread)
    assert runs, "no memory run was created"
    memory_out = await sdk.runs.join(memory_thread, runs[-1]["run_id"])
    events = memory_out.get("memory_events") or []
    assert any(e["node"] == "summarize" for e in events), events
    assert any(e["node"] == "consolidate" and e["kind"] == "stored" for e in events), events

    # the server process exposes the agent's Prometheus metrics; its two runs counted
    scrape = httpx.get(f"{dev_server.url}/metrics", timeout=10)
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
    assert source_ids == first_turn_ids, (source_ids, first_turn_ids)


async def test_session_end_and_maintenance_graph_through_the_server(
    dev_server: DevServer, server_credentials: Credentials, memory_env: dict[str, str]
) -> None:
    user = f"u-srv-{uuid.uuid4().hex[:10]}"
    sdk = client(dev_server.url, token=server_credentials.token(user))
    # raw summaries: the archive needs no model call (the model's part is tested above)
    context = {"user_id": user, "model": MODEL}
    thread_id = first = (await sdk.threads.create())["thread_id"]
    await sdk.runs.wait(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "human", "content": "I keep bees in my garden."}]},
        context=context,
    )
    # {"end_session": true}: no answer, the whole thread is archived into memory
    out = await sdk.runs.wait(thread_id, GRAPH_ID, input={"end_session": True}, context=context)
    assert isinstance(out, dict) and "__error__" not in out, out
    assert out["messages"] == [] and out["pending_count"] == 0, out.get("memory_events")
    with psycopg.connect(memory_env["DATABASE_URL"]) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM memories_384 WHERE user_id = %s AND kind = 'summary'", (user,)
        ).fetchone()
    assert n == 1

    # the second graph of langgraph.json, as a cron would run it (here once, dry)
    assert await sdk.assistants.search(graph_id="maintenance")
    thread_id = (await sdk.threads.create())["thread_id"]
    report = await sdk.runs.wait(
        thread_id, "maintenance", input={"user_id": user, "dry_run": True}, context=context
    )
    assert isinstance(report, dict) and "__error__" not in report, report
    assert report["report"]["dry_run"] is True and report["users"] == [user]
    assert [e["id"] for e in report["pruned"]] == [first], report["pruned"]
    # langgraph dev's in-memory runtime cannot keep_latest: the run says so and goes on
    done = await sdk.runs.wait(
        thread_id, "maintenance", input={"user_id": user, "dry_run": False}, context=context
    )
    assert done["retention"].startswith("unsupported by the server's runtime"), done
    assert done["pruned"] == [] and done["report"]["dry_run"] is False


async def test_forget_deletes_the_users_server_threads_and_nothing_comes_back(
    dev_server: DevServer,
    server_credentials: Credentials,
    memory_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`forget` also deletes the threads `langgraph dev` keeps: a message sent again to an
    old thread id (which would re-push its whole checkpoint) brings nothing back."""
    from memory_graph_agent.cli.main import main

    user = f"u-srv-{uuid.uuid4().hex[:10]}"
    token = server_credentials.token(user)
    sdk = client(dev_server.url, token=token)
    context = {"user_id": user, "model": MODEL}
    said = ["My name is Zoltan Quimby.", "I live in Reykjavik and keep bees."]
    thread_id = (await sdk.threads.create())["thread_id"]  # found by its owner: key
    tagged = (await sdk.threads.create(metadata={"user_id": user}))["thread_id"]
    for text in said:
        await sdk.runs.wait(
            thread_id, GRAPH_ID, input={"messages": [{"role": "human", "content": text}]},
            context=context,
        )  # fmt: skip
    for memory_thread in await sdk.threads.search(metadata={"memory_of": thread_id}):
        for run in await sdk.runs.list(memory_thread["thread_id"]):  # memory is formed
            await sdk.runs.join(memory_thread["thread_id"], run["run_id"])
    monkeypatch.setenv("LANGGRAPH_SERVER_URL", dev_server.url)
    monkeypatch.setenv("LANGGRAPH_API_KEY", token)  # forget deletes as the user
    assert await asyncio.to_thread(main, ["forget", "--user", user, "--yes"]) == 0

    for gone in (thread_id, tagged):
        with pytest.raises(httpx.HTTPStatusError) as missing:
            await sdk.threads.get(gone)
        assert missing.value.response.status_code == 404
    out = await sdk.runs.wait(
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
