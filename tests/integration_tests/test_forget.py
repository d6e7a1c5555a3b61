"""forget (forget-me): one user's Redis keys, memories, episodes and checkpoints go;
every other user's stay exactly as they were."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import sys
import uuid
from typing import Any

import psycopg
import pytest

from memory_graph_agent.cli.main import main
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.forget import CHECKPOINT_TABLES, forget_user
from tests.conftest import say


def _id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


async def _pg(database_url: str, query: str, params: tuple = ()) -> list[tuple]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall()


async def _user_tables(database_url: str) -> list[str]:
    rows = await _pg(
        database_url,
        "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
        "AND column_name = 'user_id' AND (table_name ~ '^memories_' "
        "OR table_name IN ('episodes', 'memory_decisions'))",
    )
    return sorted(r[0] for r in rows)


async def snapshot(services, database_url: str, user: str, threads: list[str]) -> dict[str, Any]:
    """Everything of one user: Redis keys with their values, rows per table, checkpoints."""
    redis = services.redis
    prefix = services.keys.prefix
    keys = sorted([k async for k in redis.scan_iter(match=f"{prefix}:*", count=1000) if user in k])
    # thread ownership marks carry the user in their value, not their name; a turn's mark
    # of the thread (``active``, no data) goes with them
    for thread in threads:
        if await redis.get(f"{prefix}:owner:{thread}") == user:
            keys.append(f"{prefix}:owner:{thread}")
            if await redis.exists(f"{prefix}:active:{thread}"):
                keys.append(f"{prefix}:active:{thread}")
    values = {}
    for key in keys:
        kind = await redis.type(key)
        if kind == "list":
            values[key] = await redis.lrange(key, 0, -1)
        elif kind == "set":
            values[key] = sorted(await redis.smembers(key))
        elif kind == "hash":
            values[key] = await redis.hgetall(key)
        else:
            values[key] = await redis.get(key)
    rows = {}
    for table in await _user_tables(database_url):
        rows[table] = (
            await _pg(database_url, f'SELECT count(*) FROM "{table}" WHERE user_id = %s', (user,))
        )[0][0]
    checkpoints = {}
    for table in CHECKPOINT_TABLES:
        checkpoints[table] = (
            await _pg(
                database_url,
                f"SELECT count(*) FROM {table} WHERE thread_id = ANY(%s)",
                (threads,),
            )
        )[0][0]
    return {"redis": values, "rows": rows, "checkpoints": checkpoints}


async def converse(graph_for, make_context, user: str, threads: list[str]) -> None:
    """Two threads: identity, then small talk (summaries, a reflection, a profile)."""
    settings = Settings().override(window_size=2, summary_batch=2, reflect_after=2)
    ctx = make_context(user_id=user)
    agent = graph_for(settings)
    await say(agent, ctx, threads[0], "Hi! My name is Zhang San and I live in Berlin.")
    for i in range(4):
        await say(agent, ctx, threads[0], f"Tell me one fact about volcano number {i}.")
    for i in range(3):
        await say(agent, ctx, threads[1], f"I prefer Go over Java, reason {i}.")


@pytest.fixture
async def two_users(graph_for, make_context, services, memory_env):
    db = memory_env["DATABASE_URL"]
    users = {_id("ua"): [_id("ta"), _id("ta")], _id("ub"): [_id("tb"), _id("tb")]}
    for user, threads in users.items():
        await converse(graph_for, make_context, user, threads)
    return db, users


async def test_forget_deletes_one_user_and_nothing_of_another(two_users, services):
    db, users = two_users
    (a, a_threads), (b, b_threads) = users.items()
    prefix = services.keys.prefix
    # extra keys of A of kinds the agent may add later, e.g. dead letters
    await services.redis.rpush(f"{prefix}:dead:{a}:{a_threads[0]}", "{}")
    await services.redis.set(f"{prefix}:custom:{a}", "x")
    assert await services.profile.forget(a, "city")  # the forgotten value stays in history

    before_a = await snapshot(services, db, a, a_threads)
    before_b = await snapshot(services, db, b, b_threads)
    assert before_a["redis"] and before_b["redis"]
    assert any(f"{prefix}:profile:{a}" == k for k in before_a["redis"]), "A has a profile"
    assert f"{prefix}:profile_history:{a}" in before_a["redis"], "A has a profile history"
    for snap in (before_a, before_b):
        memories = sum(n for t, n in snap["rows"].items() if t.startswith("memories_"))
        assert memories >= 3, snap["rows"]  # summaries and a reflection
        assert snap["checkpoints"]["checkpoints"] > 0
        assert snap["rows"]["memory_decisions"] >= 3  # a decision per summary and reflection

    report = await forget_user(a, redis=services.redis, db=services.db, prefix=prefix)

    assert report["user_id"] == a and set(report["threads"]) == set(a_threads)
    assert report["shared_threads"] == []
    assert report["redis_keys"] == len(before_a["redis"])
    assert sum(report["memories"].values()) == sum(
        n for t, n in before_a["rows"].items() if t.startswith("memories_")
    )
    if "episodes" in before_a["rows"]:
        assert report["episodes"] == before_a["rows"]["episodes"] > 0
    assert report["checkpoints"] == before_a["checkpoints"]
    assert report["decisions"] == before_a["rows"]["memory_decisions"]

    after_a = await snapshot(services, db, a, a_threads)
    assert after_a["redis"] == {}, "a Redis key containing A's id survived"
    assert set(after_a["rows"].values()) == {0}, after_a["rows"]
    assert set(after_a["checkpoints"].values()) == {0}
    assert await snapshot(services, db, b, b_threads) == before_b, "B was touched"

    again = await forget_user(a, redis=services.redis, db=services.db, prefix=prefix)
    assert again["redis_keys"] == 0 and sum(again["memories"].values()) == 0


async def test_forget_matches_the_user_segment_exactly(
    graph_for, make_context, services, memory_env
):
    """A thread of B named like A's user id, or a user id that extends A's, is not A's."""
    db, prefix = memory_env["DATABASE_URL"], services.keys.prefix
    a = _id("ua")
    b, longer = _id("ub"), f"{a}.x"
    await converse(graph_for, make_context, a, [_id("ta"), _id("ta")])
    await say(graph_for(), make_context(user_id=b), a, "my thread is named like user A")
    await say(graph_for(), make_context(user_id=longer), _id("tl"), "my id extends A's id")
    before_b = await snapshot(services, db, b, [a])
    before_longer = await snapshot(services, db, longer, [])

    report = await forget_user(a, redis=services.redis, db=services.db, prefix=prefix)

    assert a not in report["threads"]
    assert await snapshot(services, db, b, [a]) == before_b
    assert await snapshot(services, db, longer, []) == before_longer
    keys = [k async for k in services.redis.scan_iter(match=f"{prefix}:*:{a}*")]
    marks = (":owner:", ":active:")  # B's thread named like A: its owner and a turn's mark
    assert all(k.split(":")[-2] == b or longer in k or any(m in k for m in marks) for k in keys)
    assert await services.redis.get(f"{prefix}:owner:{a}") == b  # B's thread named like A


async def test_forget_reports_a_thread_another_user_also_used(
    agent, make_context, services, memory_env
):
    prefix = services.keys.prefix
    a, b, shared = _id("ua"), _id("ub"), _id("shared")
    await say(agent, make_context(user_id=a), shared, "A talks in the shared thread")
    # data from before thread ownership was enforced: hand the mark to B so B can write
    # (a free thread with history would go back to its first writer, A)
    await services.redis.set(f"{prefix}:owner:{shared}", b)
    await say(agent, make_context(user_id=b), shared, "B talks in the shared thread")
    b_keys = sorted([k async for k in services.redis.scan_iter(match=f"{prefix}:*:{b}:*")])

    report = await forget_user(a, redis=services.redis, db=services.db, prefix=prefix)

    assert report["shared_threads"] == [shared]
    assert report["checkpoints"]["checkpoints"] > 0  # erasure wins over the shared thread
    assert sorted([k async for k in services.redis.scan_iter(match=f"{prefix}:*:{b}:*")]) == (
        b_keys
    )


async def test_forget_user_rejects_a_pattern_as_user_id(services, memory_env):
    with pytest.raises(ValueError, match="invalid user_id"):
        await forget_user("*", redis=services.redis, db=services.db)


# ------------------------------------------------------------------ CLI


class _Stdin(io.StringIO):
    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


async def test_cli_forget_refuses_without_yes_when_stdin_is_not_a_terminal(
    two_users, services, capsys, monkeypatch
):
    db, users = two_users
    a, a_threads = next(iter(users.items()))
    before = await snapshot(services, db, a, a_threads)
    monkeypatch.setattr(sys, "stdin", _Stdin(f"{a}\n", tty=False))
    code = await asyncio.to_thread(main, ["forget", "--user", a])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2
    assert out.startswith("error: refusing to forget user") and "re-run with --yes" in out
    assert await snapshot(services, db, a, a_threads) == before


async def test_cli_forget_asks_for_the_user_id_on_a_terminal(
    two_users, services, capsys, monkeypatch
):
    db, users = two_users
    (a, a_threads), (b, b_threads) = users.items()
    before_a = await snapshot(services, db, a, a_threads)
    monkeypatch.setattr(sys, "stdin", _Stdin("yes\n", tty=True))
    assert await asyncio.to_thread(main, ["forget", "--user", a]) == 1
    assert "aborted; nothing was deleted" in capsys.readouterr().out
    assert await snapshot(services, db, a, a_threads) == before_a

    before_b = await snapshot(services, db, b, b_threads)
    monkeypatch.setattr(sys, "stdin", _Stdin(f"{a}\n", tty=True))
    assert await asyncio.to_thread(main, ["forget", "--user", a]) == 0
    assert f"forgot user {a}:" in " ".join(capsys.readouterr().out.split())
    after = await snapshot(services, db, a, a_threads)
    assert after["redis"] == {} and set(after["rows"].values()) == {0}
    assert await snapshot(services, db, b, b_threads) == before_b


async def test_cli_forget_yes_json(two_users, services, capsys):
    db, users = two_users
    (a, a_threads), (b, b_threads) = users.items()
    before_b = await snapshot(services, db, b, b_threads)
    assert await asyncio.to_thread(main, ["forget", "--user", a, "--yes", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["user_id"] == a and report["redis_keys"] > 0
    assert sorted(report["threads"]) == sorted(a_threads)
    after = await snapshot(services, db, a, a_threads)
    assert after["redis"] == {} and set(after["checkpoints"].values()) == {0}
    assert await snapshot(services, db, b, b_threads) == before_b
    # memory show of the forgotten user is empty
    assert await asyncio.to_thread(main, ["memory", "show", "--user", a, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["profile"] == {} and shown["memories"] == [] and shown["pending"] == {}


async def test_forget_empties_this_process_buffer_of_the_user(services, memory_env):
    """Degraded mode buffers messages in process while Redis is down; they must not be
    pushed back into Redis after the user was forgotten."""
    from memory_graph_agent.storage.failsafe import window_buffer
    from memory_graph_agent.storage.window import StoredMessage

    a, b, thread = _id("ua"), _id("ub"), _id("t")
    msg = StoredMessage(id=_id("m"), role="human", content="SECRET of A", ts="2026-01-01")
    other = StoredMessage(id=_id("m"), role="human", content="B's", ts="2026-01-01")
    window_buffer.add(a, thread, [msg])
    window_buffer.add(b, thread, [other])
    try:
        report = await forget_user(a, redis=services.redis, db=services.db)
        assert report["buffered_messages"] == 1 and thread in report["threads"]
        assert window_buffer.take(a, thread) == []
        assert window_buffer.take(b, thread) == [other]
    finally:
        window_buffer.take(a, thread)
        window_buffer.take(b, thread)


async def test_forget_finds_a_thread_whose_only_trace_is_its_owner_key(
    agent, make_context, services
):
    """A turn that failed at the model left only the thread's claim and its checkpoint:
    forget still finds the thread, so the message cannot come back with the next turn."""
    from memory_graph_agent.testing import ScriptedChatModel
    from nodes.respond import ModelUnavailableError

    def down(messages):
        raise RuntimeError("provider down")

    ctx = make_context(model_obj=ScriptedChatModel(handlers={"reply": down}))
    thread = _id("t")
    with pytest.raises(ModelUnavailableError):
        await say(agent, ctx, thread, "my PIN is 8812")
    prefix = services.keys.prefix
    report = await forget_user(ctx.user_id, redis=services.redis, db=services.db, prefix=prefix)
    assert thread in report["threads"] and report["checkpoints"]["checkpoints"] > 0
    assert not (await agent.aget_state({"configurable": {"thread_id": thread}})).values
    assert await services.redis.get(f"{prefix}:owner:{thread}") is None


async def test_forget_with_an_unreachable_server_fails_and_deletes_nothing(
    graph_for, make_context, services, memory_env, capsys
):
    db = memory_env["DATABASE_URL"]
    user, threads = _id("ua"), [_id("ta"), _id("ta")]
    await converse(graph_for, make_context, user, threads)
    before = await snapshot(services, db, user, threads)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    argv = ["forget", "--user", user, "--yes", "--server", closed]
    assert await asyncio.to_thread(main, argv) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("error: LangGraph server") and "run forget again" in out, out
    assert await snapshot(services, db, user, threads) == before


async def test_forget_deletes_the_checkpoints_of_the_users_memory_threads(
    services, checkpointer, make_context, memory_env
):
    """Memory runs keep their state on memory threads of their own: those go too."""
    settings = Settings().override(window_size=2, summary_batch=2, memory_delay_s=0)
    from graph.background import LocalScheduler, memory_thread_id
    from graph.builder import build_graph

    memory = LocalScheduler()
    agent = memory.bind(build_graph(services, checkpointer, scheduler=memory, settings=settings))
    user, thread = _id("u"), _id("t")
    ctx = make_context(user_id=user)
    for text in ("My name is Zhang San.", "I live in Berlin.", "I keep bees."):
        await say(agent, ctx, thread, text)
    await memory.drain()
    memory_thread = memory_thread_id(user, thread)
    query = "SELECT count(*) FROM checkpoints WHERE thread_id = %s"
    assert (await _pg(memory_env["DATABASE_URL"], query, (memory_thread,)))[0][0] > 0
    await forget_user(user, redis=services.redis, db=services.db, prefix=services.keys.prefix)
    for table in CHECKPOINT_TABLES:
        left = f"SELECT count(*) FROM {table} WHERE thread_id = ANY(%s)"
        assert (await _pg(memory_env["DATABASE_URL"], left, ([thread, memory_thread],)))[0][
            0
        ] == 0, table
