"""Authentication and authorization through a real `langgraph dev`, with `langgraph_sdk`.

The session's ``dev_server`` accepts three API keys (alice, bob, an admin) and JWTs
signed with its secret (minted here for fresh users). Every refusal is paired with the
same request succeeding for the right caller, so no test passes because everything fails.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Awaitable

import httpx
import pytest
import redis

from memory_graph_agent.auth.policy import MAINTENANCE_ASSISTANT_ID
from tests.integration_tests.dev_server import (
    Credentials,
    DevServer,
    client,
    failed_start,
    running_dev_server,
)

pytestmark = pytest.mark.server

AGENT = "memory_agent"
MAINTENANCE = "maintenance"
MODEL = "local:smollm2"
RAW = {"model": MODEL}  # the server stores raw summaries (conftest.SERVER_KNOBS)


def turn(text: str) -> dict:
    return {"messages": [{"role": "human", "content": text}]}


async def status(call: Awaitable) -> int:
    """The HTTP status a `langgraph_sdk` call ends with (200 when it succeeds)."""
    try:
        await call
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return 200


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def keys_of(memory_env: dict[str, str], user: str) -> list[str]:
    r = redis.Redis.from_url(memory_env["REDIS_URL"], decode_responses=True)
    try:
        prefix = memory_env["MEMORY_KEY_PREFIX"]
        return sorted(k for k in r.scan_iter(match=f"{prefix}:*", count=1000) if f":{user}" in k)
    finally:
        r.close()


@pytest.fixture(scope="module")
def creds(server_credentials: Credentials) -> Credentials:
    return server_credentials


async def test_anonymous_unknown_and_forged_credentials_get_401(
    dev_server: DevServer, creds: Credentials, alice
) -> None:
    url = dev_server.url
    header, payload, signature = creds.token(creds.alice).split(".")
    other = creds.token(creds.bob).split(".")[1]
    callers = {
        "anonymous": client(url),
        "unknown_key": client(url, key=f"sk-test-{secrets.token_urlsafe(24)}"),
        "bad_signature": client(url, token=creds.token(creds.alice, secret="x" * 64)),
        "tampered_claims": client(url, token=f"{header}.{other}.{signature}"),
        "expired": client(url, token=creds.token(creds.alice, ttl=-60)),
    }
    for name, sdk in callers.items():
        got = {
            "threads.create": await status(sdk.threads.create()),
            "threads.search": await status(sdk.threads.search()),
            "assistants.search": await status(sdk.assistants.search()),
            "runs.wait": await status(sdk.runs.wait(None, AGENT, input=turn("hi"))),
            "crons.search": await status(sdk.crons.search()),
        }
        assert set(got.values()) == {401}, (name, got)
    # the same calls with a valid key succeed
    assert await status(alice.threads.search()) == 200
    assert (
        await status(client(url, token=f"{header}.{payload}.{signature}").threads.search()) == 200
    )

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        assert (await http.get("/memory/metrics")).status_code == 401
        assert (await http.delete(f"/memory/users/{creds.alice}")).status_code == 401
        # langgraph dev would let this header in as a Studio user: disable_studio_auth
        studio = {"x-auth-scheme": "langsmith"}
        assert (await http.post("/threads/search", json={}, headers=studio)).status_code == 401
        assert (await http.get("/ok")).status_code == 200  # health checks stay open


async def test_a_user_cannot_claim_another_id_nor_see_their_memory(
    dev_server: DevServer, creds: Credentials, memory_env: dict[str, str]
) -> None:
    a_id, b_id = fresh("ua"), fresh("ub")
    a = client(dev_server.url, token=creds.token(a_id))
    b = client(dev_server.url, token=creds.token(b_id))
    city = f"Quill{uuid.uuid4().hex[:6]}"
    # the server's window and batch are 2 (conftest.SERVER_KNOBS): two turns form memory
    b_thread = (await b.threads.create())["thread_id"]
    for text in [f"My name is Bertha. I live in {city}.", "What is two plus two?"]:
        out = await b.runs.wait(b_thread, AGENT, input=turn(text), context={**RAW, "user_id": b_id})
        assert "__error__" not in out, out
    await memory_formed(b, b_thread)
    seen_by_b = await b.runs.wait(None, AGENT, input=turn("Where do I live?"), context=RAW)
    assert city in json.dumps([seen_by_b["profile"], seen_by_b["recalled"]]), seen_by_b

    # A claims B's id: in the context, in the legacy configurable, on a new or no thread
    a_thread = (await a.threads.create())["thread_id"]
    claims = {
        "context": a.runs.wait(a_thread, AGENT, input=turn("Where do I live?"),
                               context={**RAW, "user_id": b_id}),
        "configurable": a.runs.wait(a_thread, AGENT, input=turn("Where do I live?"),
                                    config={"configurable": {**RAW, "user_id": b_id}}),
        "stateless": a.runs.wait(None, AGENT, input=turn("Where do I live?"),
                                 context={"user_id": b_id}),
        "stream": a.runs.stream(a_thread, AGENT, input=turn("x"), context={"user_id": b_id}),
        "assistant": a.assistants.create(AGENT, context={"user_id": b_id}),
    }  # fmt: skip
    for name, call in claims.items():
        if name == "stream":
            call = _drain(call)
        assert await status(call) == 403, name
    assert not [k for k in keys_of(memory_env, b_id) if a_thread in k]

    # without a user_id the run is A's (filled in from the identity), and sees nothing of B
    out = await a.runs.wait(a_thread, AGENT, input=turn("Where do I live? What is my name?"),
                            context=RAW)  # fmt: skip
    assert "__error__" not in out, out
    assert city not in json.dumps(out) and "Bertha" not in json.dumps(out)
    assert any(a_thread in k for k in keys_of(memory_env, a_id))
    assert not keys_of(memory_env, "default-user")


async def memory_formed(sdk, thread_id: str) -> None:
    """Wait for the background memory runs the server scheduled for ``thread_id``."""
    for memory_thread in await sdk.threads.search(metadata={"memory_of": thread_id}):
        for run in await sdk.runs.list(memory_thread["thread_id"]):
            await sdk.runs.join(memory_thread["thread_id"], run["run_id"])


async def _drain(stream) -> None:
    async for _ in stream:
        pass


async def test_a_user_cannot_read_list_stream_or_run_on_anothers_thread(alice, bob, creds) -> None:
    thread = (await bob.threads.create(metadata={"topic": "bees"}))["thread_id"]
    run = await bob.runs.create(thread, AGENT, input=turn("I keep bees."), context=RAW)
    await bob.runs.join(thread, run["run_id"])
    mine = (await alice.threads.create())["thread_id"]

    refused = {
        "threads.get": alice.threads.get(thread),
        "threads.get_state": alice.threads.get_state(thread),
        "threads.get_history": alice.threads.get_history(thread),
        "threads.update": alice.threads.update(thread, metadata={"x": "1"}),
        "threads.update_state": alice.threads.update_state(thread, {"messages": []}),
        "threads.delete": alice.threads.delete(thread),
        "runs.list": alice.runs.list(thread),
        "runs.get": alice.runs.get(thread, run["run_id"]),
        "runs.join": alice.runs.join(thread, run["run_id"]),
        "runs.stream": _drain(alice.runs.stream(thread, AGENT, input=turn("hi"), context=RAW)),
        "runs.wait": alice.runs.wait(thread, AGENT, input=turn("hi"), context=RAW),
        "runs.cancel": alice.runs.cancel(thread, run["run_id"]),
    }
    got = {name: await status(call) for name, call in refused.items()}
    assert {n: c for n, c in got.items() if c != 404} == {}
    # joining the stream of bob's run answers 200 with one error event and no data
    events = [(p.event, p.data) async for p in alice.runs.join_stream(thread, run["run_id"])]
    assert events == [("error", {"error": "HTTPException", "message": "404: Thread not found"})]
    assert await status(alice.threads.copy(thread)) == 409  # and nothing is copied
    # nor take it over, nor give a thread to someone else
    assert await status(alice.threads.create(thread_id=thread, if_exists="do_nothing")) == 409
    assert await status(alice.threads.create(metadata={"owner": creds.bob})) == 403
    assert await status(alice.threads.update(mine, metadata={"owner": creds.bob})) == 403

    listed = await alice.threads.search(limit=1000)
    assert mine in {t["thread_id"] for t in listed}
    assert [t for t in listed if t["thread_id"] == thread or t["metadata"].get("topic")] == []
    assert await alice.threads.search(metadata={"owner": creds.bob}) == []
    # bob's thread is intact and still his
    state = await bob.threads.get_state(thread)
    assert [m["content"] for m in state["values"]["messages"]][:1] == ["I keep bees."]
    assert (await bob.threads.get(thread))["metadata"]["owner"] == creds.bob
    assert len(await bob.runs.list(thread)) == 1


async def test_assistants_and_crons_belong_to_their_creator(alice, bob, admin, creds) -> None:
    own = await alice.assistants.create(AGENT, name="alice's", context=RAW)
    seen_by_bob = {a["assistant_id"] for a in await bob.assistants.search(limit=1000)}
    seen_by_alice = {a["assistant_id"] for a in await alice.assistants.search(limit=1000)}
    assert own["assistant_id"] in seen_by_alice and own["assistant_id"] not in seen_by_bob
    system = await bob.assistants.search(graph_id=MAINTENANCE)
    assert [a["assistant_id"] for a in system] == [str(MAINTENANCE_ASSISTANT_ID)]
    assert await status(bob.runs.wait(None, own["assistant_id"], input=turn("hi"))) == 404
    assert await status(bob.assistants.delete(own["assistant_id"])) == 404
    assert await status(bob.assistants.delete(str(MAINTENANCE_ASSISTANT_ID))) == 404  # system
    assert await status(alice.assistants.create(MAINTENANCE)) == 403
    assert await status(admin.assistants.create(MAINTENANCE, name="nightly")) == 200

    cron = await alice.crons.create(MAINTENANCE, schedule="0 3 * * *", input={"dry_run": True})
    assert cron["cron_id"] not in {c["cron_id"] for c in await bob.crons.search()}
    assert cron["cron_id"] in {c["cron_id"] for c in await alice.crons.search()}
    assert await status(bob.crons.delete(cron["cron_id"])) == 404
    everyone = alice.crons.create(MAINTENANCE, schedule="0 3 * * *", input={"all_users": True})
    assert await status(everyone) == 403
    as_bob = alice.crons.create(AGENT, schedule="0 3 * * *", input=turn("hi"),
                                context={"user_id": creds.bob})  # fmt: skip
    assert await status(as_bob) == 403
    await alice.crons.delete(cron["cron_id"])
    nightly = {"all_users": True, "dry_run": True}
    assert await status(admin.crons.create(MAINTENANCE, schedule="0 3 * * *", input=nightly)) == 200


async def test_only_an_admin_runs_maintenance_for_others(alice, admin, creds) -> None:
    for refused in ({"all_users": True, "dry_run": True}, {"user_id": creds.bob, "dry_run": True}):
        assert await status(alice.runs.wait(None, MAINTENANCE, input=refused)) == 403, refused
    own = await alice.runs.wait(None, MAINTENANCE, input={"dry_run": True})
    assert own["users"] == [creds.alice] and own["report"]["dry_run"] is True, own

    # a thread whose state says all_users cannot smuggle it into a non-admin run
    thread = (await alice.threads.create())["thread_id"]
    await alice.runs.wait(thread, MAINTENANCE, input={"dry_run": True})
    await alice.threads.update_state(thread, {"all_users": True})
    again = await alice.runs.wait(thread, MAINTENANCE, input={"dry_run": True})
    assert again["users"] == [creds.alice] and again["all_users"] is False, again
    command = {"update": {"all_users": True}, "goto": "select_users"}
    assert await status(alice.runs.wait(thread, MAINTENANCE, command=command)) == 403

    everyone = await admin.runs.wait(None, MAINTENANCE, input={"all_users": True, "dry_run": True})
    assert "__error__" not in everyone and everyone["report"]["dry_run"] is True, everyone
    other = await admin.runs.wait(None, MAINTENANCE, input={"user_id": creds.bob, "dry_run": True})
    assert other["users"] == [creds.bob], other


async def test_forgetting_another_user_needs_admin(
    dev_server: DevServer, creds: Credentials, memory_env: dict[str, str]
) -> None:
    c_id, d_id = fresh("uc"), fresh("ud")
    for user in (c_id, d_id):
        sdk = client(dev_server.url, token=creds.token(user))
        await sdk.runs.wait(None, AGENT, input=turn("I keep bees."), context=RAW)
        assert keys_of(memory_env, user)

    def as_(key: str | None = None, token: str | None = None) -> httpx.AsyncClient:
        auth = {"x-api-key": key} if key else {"Authorization": f"Bearer {token}"}
        return httpx.AsyncClient(base_url=dev_server.url, headers=auth, timeout=60)

    async with as_(key=creds.keys[creds.alice]) as alice:
        refused = await alice.delete(f"/memory/users/{c_id}")
        assert refused.status_code == 403, refused.text
        assert (await alice.delete("/memory/users/a:*")).status_code == 422
    assert keys_of(memory_env, c_id)
    async with as_(token=creds.token(c_id)) as himself:
        done = await himself.delete(f"/memory/users/{c_id}")
    assert done.status_code == 200 and done.json()["user_id"] == c_id, done.text
    assert done.json()["redis_keys"] >= 1 and keys_of(memory_env, c_id) == []
    async with as_(key=creds.keys[creds.admin]) as root:
        assert (await root.delete(f"/memory/users/{d_id}")).status_code == 200
    assert keys_of(memory_env, d_id) == []


async def test_memory_metrics_need_a_key_and_name_no_user(
    dev_server: DevServer, creds: Credentials, alice
) -> None:
    await alice.runs.wait(None, AGENT, input=turn("I keep bees."), context=RAW)
    headers = {"x-api-key": creds.keys[creds.alice]}
    scrape = httpx.get(f"{dev_server.url}/memory/metrics", headers=headers, timeout=30)
    assert scrape.status_code == 200 and "agent_memory_retrieval_seconds" in scrape.text
    for user in (creds.alice, creds.bob, creds.admin, "ua-", "ub-", "uc-", "u-srv-"):
        assert user not in scrape.text


def test_a_server_without_credentials_refuses_to_start(memory_env: dict[str, str]) -> None:
    code, log = failed_start(memory_env)
    assert code not in (None, 0), log
    assert "no credentials configured" in log, log


def test_auth_off_serves_anyone_and_says_so_at_start(memory_env: dict[str, str]) -> None:
    with running_dev_server({**memory_env, "MEMORY_AGENT_AUTH": "off"}) as server:
        assert "AUTHENTICATION IS DISABLED" in server.log(200_000)
        anyone = httpx.post(f"{server.url}/threads", json={}, timeout=30)
        assert anyone.status_code == 200, anyone.text


@pytest.mark.slow  # waits for the next minute, when a cron fires
async def test_cron_runs_fire_as_their_creator(
    alice, admin, creds: Credentials, memory_env: dict[str, str]
) -> None:
    """Fired runs go through the run rules again, as the cron's user (~1 minute)."""
    mine = (await alice.threads.create())["thread_id"]
    nightly = (await admin.threads.create())["thread_id"]
    every_minute = "* * * * *"
    crons = [
        await alice.crons.create_for_thread(mine, AGENT, schedule=every_minute,
                                            input=turn("I keep bees."), context=RAW),
        await admin.crons.create_for_thread(nightly, MAINTENANCE, schedule=every_minute,
                                            input={"all_users": True, "dry_run": True}),
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            runs = [await alice.runs.list(mine), await admin.runs.list(nightly)]
            if all(r and r[-1]["status"] in ("success", "error") for r in runs):
                break
            await asyncio.sleep(1)  # its end is seen within a second, not three
        assert [r[-1]["status"] if r else None for r in runs] == ["success", "success"], runs
    finally:
        await alice.crons.delete(crons[0]["cron_id"])
        await admin.crons.delete(crons[1]["cron_id"])
    # alice's run had no user_id: the cron's user is hers
    assert any(mine in k for k in keys_of(memory_env, creds.alice))
    # the admin's role came back from the keys when the cron fired
    state = (await admin.threads.get_state(nightly))["values"]
    assert state["all_users"] is True and state["report"]["dry_run"] is True, state


def test_the_forget_route_refuses_when_mounted_without_the_servers_auth(webapp) -> None:
    """Served without ``enable_custom_route_auth`` (no ``request.user``), it fails closed."""
    from starlette.testclient import TestClient

    with TestClient(webapp) as http:
        assert http.delete("/memory/users/someone").status_code == 401


async def test_nobody_occupies_another_users_memory_thread(alice, bob, creds) -> None:
    """Bob names the memory thread of Alice's thread before her memory runs (issue 33).

    The server must refuse him every way of creating it, and Alice's memory must still
    run in the background, on a memory thread that is hers, never inline in her turn.
    """
    from graph.background import memory_thread_id

    thread = (await alice.threads.create())["thread_id"]
    target = memory_thread_id(creds.alice, thread)
    squat = {
        "threads.create": bob.threads.create(thread_id=target),
        "threads.create do_nothing": bob.threads.create(thread_id=target, if_exists="do_nothing"),
        "runs.create if_not_exists": bob.runs.create(
            target, AGENT, input=turn("mine now"), context=RAW, if_not_exists="create"
        ),
        "memory_of metadata": bob.threads.create(metadata={"memory_of": thread}),
    }
    got = {name: await status(call) for name, call in squat.items()}
    assert got == dict.fromkeys(squat, 403), got
    # nor can Alice herself make a thread that poses as a memory thread
    assert await status(alice.threads.create(thread_id=target)) == 403

    events: list[dict] = []  # the server's window and batch are 2 (conftest.SERVER_KNOBS)
    for text in ["I keep bees in my garden.", "What is two plus two?"]:
        out = await alice.runs.wait(thread, AGENT, input=turn(text), context=RAW)
        assert "__error__" not in out, out
        events += out.get("memory_events") or []
    assert any(e["node"] == "trim_window" and e["kind"] == "scheduled" for e in events), events
    assert not any(e["node"] == "summarize" for e in events), "memory ran inline in the turn"
    found = await alice.threads.search(metadata={"memory_of": thread})
    assert [t["thread_id"] for t in found] == [target], found
    assert found[0]["metadata"]["owner"] == creds.alice
    runs = await alice.runs.list(target)
    done = await alice.runs.join(target, runs[-1]["run_id"])
    assert any(e["node"] == "consolidate" for e in done.get("memory_events") or []), done
    assert await status(bob.threads.get(target)) == 404
