"""A client of the server sets a run's `Context`; the deployment's `Settings` never travel.

Through a real `langgraph dev` with API keys: Bob may not raise ``max_message_chars`` (or
any other deployment setting: window, batches, budgets, timeouts, thresholds, modes, a
group such as ``recall``, the recall weights or any weight in them) for his runs, his
assistants or his crons, in ``context`` or in the legacy ``configurable``; the attempt is
refused with 403 naming the environment variable that sets it, and nothing of it runs or
is stored. Alice's same oversized message is rejected by the deployment's limit (read
once by the server, `Settings.from_env`), her thread goes on with her next turn (nothing
of the rejected one stored), and her run's context still works.
"""

from __future__ import annotations

import httpx
import psycopg
import pytest
import redis

from memory_graph_agent.settings import ENV_PATHS, Settings
from tests.integration_tests.dev_server import Credentials
from tests.integration_tests.test_auth_server import AGENT, keys_of, memory_formed, status, turn

pytestmark = pytest.mark.server

MODEL = "local:smollm2"
HUGE = "bees " * 40_000  # 200,000 characters: over the default limit of 32,000


async def test_a_client_cannot_raise_the_message_limit(
    bob, server_credentials: Credentials, memory_env: dict[str, str]
) -> None:
    thread = (await bob.threads.create())["thread_id"]
    raised = {"model": MODEL, "max_message_chars": 1_000_000}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.runs.wait(thread, AGENT, input=turn(HUGE), context=raised)
    assert refused.value.response.status_code == 403
    assert "max_message_chars" in refused.value.response.text  # says what and who sets it
    assert "MAX_MESSAGE_CHARS" in refused.value.response.text
    legacy = {"configurable": raised}
    assert await status(bob.runs.wait(thread, AGENT, input=turn(HUGE), config=legacy)) == 403
    assert await status(bob.assistants.create(AGENT, context=raised)) == 403
    cron = bob.crons.create(AGENT, schedule="0 3 * * *", input=turn(HUGE), context=raised)
    assert await status(cron) == 403
    # nothing of the message ran or was stored
    assert [k for k in keys_of(memory_env, server_credentials.bob) if thread in k] == []
    assert await bob.runs.list(thread) == []


async def test_every_deployment_setting_is_refused_and_the_context_passes(alice, bob) -> None:
    values = Settings().by_name()
    # every setting by its variable's name, even at its default value, and every group
    for name in sorted(env.lower() for env in ENV_PATHS):
        got = await status(bob.assistants.create(AGENT, context={name: values[name]}))
        assert got == 403, (name, got)
    for group in (*Settings.model_fields, "recall_weights"):
        got = await status(bob.assistants.create(AGENT, context={group: {}}))
        assert got == 403, (group, got)
    # the scheduler's memory_of, off its memory thread (the graph would skip the turn's checks)
    assert await status(bob.assistants.create(AGENT, context={"memory_of": "t1"})) == 403
    # the run's context stays the client's
    mine = await alice.assistants.create(AGENT, context={"model": MODEL, "recall_mode": "flat"})
    assert mine["context"]["recall_mode"] == "flat"
    raised = alice.assistants.update(mine["assistant_id"], context={"window_size": 10_000})
    assert await status(raised) == 403


async def test_a_client_cannot_retune_recall(bob, server_credentials: Credentials) -> None:
    """The tuned weights are the deployment's: a run setting them, a group or one weight by
    name is refused (403), naming what it set and the variables that set it."""
    thread = (await bob.threads.create())["thread_id"]
    for context, says in (
        (
            {"recall_weights": {"neighbour_weight": 0.0}},
            "NEIGHBOUR_WEIGHT, NEIGHBOUR_REACH, SUMMARY_TURN_WEIGHT",
        ),
        ({"recall": {}}, "RECALL_K"),
        ({"weight_recency": 1.0}, "WEIGHT_RECENCY"),
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await bob.runs.wait(
                thread, AGENT, input=turn("hi"), context={"model": MODEL, **context}
            )
        assert refused.value.response.status_code == 403, context
        assert f"sets {next(iter(context))}" in refused.value.response.text
        assert says in refused.value.response.text
    assert await bob.runs.list(thread) == []  # nothing ran


async def test_the_deployments_limit_rejects_the_message_and_the_thread_goes_on(
    alice, server_credentials: Credentials, memory_env: dict[str, str]
) -> None:
    """The rejected message is written into the thread's state before any node runs; it
    must neither fail the thread's next turns nor reach memory (window, queue, log)."""
    thread = (await alice.threads.create())["thread_id"]
    context = {"model": MODEL}
    for _ in range(2):  # twice: a second rejection before any valid turn
        with pytest.raises(Exception, match=r"200,000 characters long; the limit is 32,000"):
            await alice.runs.wait(thread, AGENT, input=turn(HUGE), context=context)
    for i in range(3):  # the same thread answers; the window (2) overflows into memory
        ok = await alice.runs.wait(thread, AGENT, input=turn(f"I keep bees, hive {i}."),
                                   context=context)  # fmt: skip
        assert "__error__" not in ok, ok
    await memory_formed(alice, thread)
    state = (await alice.threads.get_state(thread))["values"]
    assert not [m for m in state["messages"] if HUGE in str(m["content"])]
    stored = stored_text(memory_env, server_credentials.alice)
    assert "I keep bees, hive 0." in stored  # the valid turns went on into memory
    assert HUGE[:100] not in stored


def stored_text(memory_env: dict[str, str], user: str) -> str:
    """Every text the stores hold of ``user``: Redis lists, hashes, sets and strings,
    the episodic log and the memories' tables, as one string."""
    r = redis.Redis.from_url(memory_env["REDIS_URL"], decode_responses=True)
    parts = []
    try:
        for key in keys_of(memory_env, user):
            kind = r.type(key)
            if kind == "list":
                parts += r.lrange(key, 0, -1)
            elif kind == "hash":
                parts += r.hvals(key)
            elif kind == "set":
                parts += r.smembers(key)
            elif kind == "string":
                parts.append(r.get(key) or "")
    finally:
        r.close()
    with psycopg.connect(memory_env["DATABASE_URL"]) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND column_name = 'content' AND (table_name ~ '^memories_' OR table_name = 'episodes')"
        ).fetchall()
        for (table,) in tables:
            rows = conn.execute(
                f'SELECT content FROM "{table}" WHERE user_id = %s', (user,)
            ).fetchall()
            parts += [content for (content,) in rows]
    return "\n".join(parts)
