"""Two Aegra replicas over one Postgres and one Redis, one killed with ``kill -9`` mid-turn,
then another mid-memory-run.

Each replica is a server process with its own Redis-broker workers
(``REDIS_BROKER_ENABLED=true``, two workers), started from a ``langgraph.json`` of the
test's own: the repository's auth and routes, and the ``memory_agent`` graph with a fake
chat model whose first reply to a ``SLOW:`` message, and first summary of a ``SLOWMEM``
turn, take long (the only fake: Redis and Postgres are real). One user's thread is served
by both replicas in turn. A turn is started in the background, the replica whose worker
runs it is killed (its whole process group), and the other one's lease reaper hands the
run to its workers. A new replica takes the dead one's place; the replica running the
memory run that summarizes ``SLOWMEM`` is killed with that batch leased in the memory
queue; the survivor re-runs the memory run, finds the batch leased and asks for another
run when the lease ends, not at once, again and again.

Checked: the runs complete, their user goes on, nobody reads another user's thread, the
memory runs stay few, and every message of the thread is in exactly one place: a
summary, the pending list, the window, or a batch being summarized (0 lost, 0 duplicated).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import redis

from memory_graph_agent.core.memory_threads import memory_thread_id
from tests.integration_tests import aegra_server

pytest.importorskip("aegra_api")
pytestmark = [pytest.mark.slow, pytest.mark.server]

ROOT = aegra_server.ROOT
SLOW_S = 40  # the first slow call: far longer than the kill and the leases
LEASE = {"LEASE_DURATION_SECONDS": "6", "HEARTBEAT_INTERVAL_SECONDS": "2",
         "REAPER_INTERVAL_SECONDS": "2",  # Aegra's run leases, then the memory queue's:
         "LEASE_SECONDS": "20"}  # fmt: skip
KNOBS = {"WINDOW_SIZE": "2", "SUMMARY_BATCH": "2", "SUMMARY_MODE": "llm", "MEMORY_DELAY_S": "0.5"}
"""Each turn evicts the one before it into a memory run that summarizes it (the fake)."""
GRAPH = """
import asyncio, os, sys
from pathlib import Path

sys.path.insert(0, {root!r})
from graph.builder import make_graph as _make_graph
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.testing import ScriptedChatModel

TURN, MEMORY = Path({turn!r}), Path({memory!r})


class SlowOnce(ScriptedChatModel):
    \"\"\"The first reply to 'SLOW:...' and the first summary of 'SLOWMEM' take long.\"\"\"

    async def _slow_once(self, messages, run_manager):
        purpose = self._purpose(run_manager)
        text = "\\n".join(m.content for m in messages if isinstance(m.content, str))
        last = messages[-1].content if messages else ""
        if purpose == "reply" and isinstance(last, str) and last.startswith("SLOW:"):
            mark = TURN
        elif purpose == "summarize" and "SLOWMEM" in text:
            mark = MEMORY
        else:
            return
        if not mark.exists():
            mark.write_text(str(os.getpid()))  # this replica holds the run
            await asyncio.sleep({slow})

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        await self._slow_once(messages, run_manager)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        await self._slow_once(messages, run_manager)
        async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
            yield chunk


os.environ["MODEL"] = register_chat_model("slow-once", SlowOnce(record=False))


async def make_graph(config):
    return await _make_graph(config)
"""


class Replica:
    """One Aegra server process (uvicorn), in a process group of its own."""

    def __init__(self, name: str, env: dict[str, str], workdir: Path) -> None:
        port = aegra_server.free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = workdir / f"{name}.log"
        # the scheduler's URL: this replica's own (a load balancer's would do as well)
        env = {**env, "MEMORY_AGENT_SERVER_URL": self.url}
        self.proc = aegra_server.start(env, port, self.log)

    def ready(self) -> None:
        aegra_server.wait_healthy(self.proc, self.url, self.log)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """``kill -9`` (by default) the whole process group, then reap it."""
        aegra_server.kill(self.proc, sig)


class Cluster:
    """Replicas of the test's graph over the session's Postgres and Redis; two keys."""

    def __init__(self, workdir: Path, memory_env: dict[str, str]) -> None:
        self.workdir, self.memory_env = workdir, memory_env
        self.marks = {"turn": workdir / "slow-turn", "memory": workdir / "slow-memory"}
        graph = workdir / "replica_graph.py"
        marks = {name: str(path) for name, path in self.marks.items()}
        graph.write_text(GRAPH.format(root=str(ROOT), slow=SLOW_S, **marks))
        config = json.loads((ROOT / "langgraph.json").read_text())
        config["dependencies"] = [str(ROOT)]
        config["graphs"] = {"memory_agent": f"{graph}:make_graph",
                            "maintenance": f"{ROOT}/graph/maintenance.py:make_graph"}  # fmt: skip
        config["auth"]["path"] = f"{ROOT}/memory_graph_agent/auth/handlers.py:auth"
        config["http"]["app"] = f"{ROOT}/memory_graph_agent/webapp.py:app"
        config.pop("env", None)
        (workdir / "langgraph.json").write_text(json.dumps(config))
        run = uuid.uuid4().hex[:8]
        self.keys = {u: f"{u}-key-{uuid.uuid4().hex}" for u in ("alice", "bob")}
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMORY_AGENT_")},
            **memory_env,
            "MEMORY_AGENT_API_KEYS": ",".join(f"{k}:{u}" for u, k in self.keys.items()),
            "MEMORY_AGENT_JWT_SECRET": uuid.uuid4().hex * 2,
            "AEGRA_CONFIG": str(workdir / "langgraph.json"),
            "REDIS_BROKER_ENABLED": "true",
            "WORKER_COUNT": "2",
            "N_JOBS_PER_WORKER": "2",
            "WORKER_QUEUE_KEY": f"aegra-test-{run}:jobs",  # the shared Redis: our runs only
            "REDIS_CHANNEL_PREFIX": f"aegra-test-{run}:run:",
            "CRON_ENABLED": "false",
            "LANGSMITH_TRACING": "false",
            **KNOBS,
            **LEASE,
        }
        self.replicas: list[Replica] = []

    def start(self) -> Replica:
        replica = Replica(f"replica-{len(self.replicas)}", self.env, self.workdir)
        self.replicas.append(replica)
        replica.ready()  # one at a time: the first one migrates the database
        return replica

    def holder(self, mark: str, timeout: float = 60) -> Replica:
        """The replica whose model wrote ``mark``: it is running the slow call."""
        path = self.marks[mark]
        deadline = time.monotonic() + timeout
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert path.exists(), f"no replica started the slow {mark} call"
        pid = int(path.read_text())
        return next(r for r in self.replicas if r.proc.pid == pid)

    def alive(self) -> list[Replica]:
        return [r for r in self.replicas if r.proc.poll() is None]


@pytest.fixture
def cluster(tmp_path: Path, memory_env: dict[str, str]) -> Iterator[Cluster]:
    made = Cluster(tmp_path, memory_env)
    try:
        made.start()
        made.start()
        yield made
    finally:
        for replica in made.replicas:
            replica.kill(signal.SIGTERM)


def _http(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120, headers={"x-api-key": key})


def _turn(text: str) -> dict:
    message = {"role": "human", "content": text, "id": f"h-{uuid.uuid4().hex}"}
    return {"assistant_id": "memory_agent", "input": {"messages": [message]}}


def _say(client: httpx.Client, thread: str, text: str, sent: list[str]) -> None:
    turn = _turn(text)
    done = client.post(f"/threads/{thread}/runs/wait", json=turn)
    assert done.status_code == 200, done.text
    assert done.json()["messages"][-1]["type"] == "ai", done.json()
    sent.append(turn["input"]["messages"][0]["id"])


def _settled(client: httpx.Client, thread: str, timeout: float) -> list[dict]:
    """The thread's runs once none is pending or running."""
    deadline = time.monotonic() + timeout
    runs: list[dict] = []
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            runs = client.get(f"/threads/{thread}/runs").json()
            if runs and all(r["status"] in ("success", "error", "interrupted") for r in runs):
                return runs
        time.sleep(0.5)
    pytest.fail(f"runs of {thread} still going after {timeout} s: {runs}")


def _places(env: dict[str, str], thread: str) -> Counter:
    """Where each message of alice's thread is: summaries, pending, window, processing."""
    places: Counter = Counter()
    for ids in aegra_server.summary_sources(env["DATABASE_URL"], "alice", thread):
        places.update(ids)
    r = redis.Redis.from_url(env["REDIS_URL"], decode_responses=True)
    try:
        for kind in ("pending", "window", "processing"):
            key = f"{env['MEMORY_KEY_PREFIX']}:{kind}:alice:{thread}"
            if r.type(key) == "list":
                places.update(json.loads(raw)["id"] for raw in r.lrange(key, 0, -1))
    finally:
        r.close()
    return places


def test_replicas_killed_mid_turn_and_mid_memory_run_lose_nothing(cluster: Cluster) -> None:
    a, b = cluster.replicas
    env = cluster.memory_env
    alice_key, sent = cluster.keys["alice"], []
    with _http(a.url, alice_key) as alice_a, _http(b.url, alice_key) as alice_b:
        thread = alice_a.post("/threads", json={}).json()["thread_id"]
        for n, text in enumerate(["I keep bees.", "My sister is Ann.", "I live in Porto."]):
            _say((alice_a, alice_b)[n % 2], thread, text, sent)  # one thread, both replicas
        with _http(b.url, cluster.keys["bob"]) as bob:  # nobody reads another's thread
            assert bob.get(f"/threads/{thread}").status_code == 404
            assert bob.get(f"/threads/{memory_thread_id('alice', thread)}").status_code == 404
            his = bob.post("/threads", json={}).json()["thread_id"]
            assert alice_a.get(f"/threads/{his}").status_code == 404

        # 1. kill -9 the replica whose worker runs a turn, mid-reply
        slow = _turn("SLOW: tell me everything about bees.")
        run_id = alice_a.post(f"/threads/{thread}/runs", json=slow).json()["run_id"]
        sent.append(slow["input"]["messages"][0]["id"])
        holder = cluster.holder("turn")
        holder.kill()
        killed_at = time.monotonic()
        survivor = cluster.alive()[0]
        with _http(survivor.url, alice_key) as alice:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                done = alice.get(f"/threads/{thread}/runs/{run_id}").json()
                if done["status"] in ("success", "error", "interrupted"):
                    break
                time.sleep(0.5)
            turn_recovery_s = time.monotonic() - killed_at
            assert done["status"] == "success", done
            assert turn_recovery_s < SLOW_S, "the run waited for the dead replica's reply?"
            _say(alice, thread, "Thanks. SLOWMEM: I grow tomatoes.", sent)  # the user goes on

    # 2. a replica in its place; kill -9 the one whose worker runs a memory run, mid-summary
    cluster.start()
    c, d = cluster.alive()
    with _http(c.url, alice_key) as alice_c, _http(d.url, alice_key) as alice_d:
        _say(alice_c, thread, "And what do you know about me?", sent)  # evicts SLOWMEM's turn
        holder = cluster.holder("memory")
        holder.kill()
        killed_at, killed_wall = time.monotonic(), datetime.now(UTC)
        survivor = alice_c if holder is d else alice_d
        slowmem = sent[-2]  # its batch: leased by the dead worker for LEASE_SECONDS
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any(
            slowmem in ids
            for ids in aegra_server.summary_sources(env["DATABASE_URL"], "alice", thread)
        ):
            time.sleep(0.5)
        memory_recovery_s, summarized_wall = time.monotonic() - killed_at, datetime.now(UTC)
        _say(survivor, thread, "Good night.", sent)
        deadline, places = time.monotonic() + 60, Counter()
        while time.monotonic() < deadline:  # the last memory runs drain
            places = _places(env, thread)
            if set(sent) <= set(places) and len(places) >= 2 * len(sent):
                break
            time.sleep(0.5)
        memory_runs = _settled(survivor, memory_thread_id("alice", thread), timeout=60)
    created = [datetime.fromisoformat(r["created_at"]) for r in memory_runs]
    retries = [at for at in created if killed_wall < at < summarized_wall]
    print(f"\nkill -9 mid-turn: the run succeeded on the other replica {turn_recovery_s:.1f} s "
          f"later; mid-memory-run: the leased batch was summarized {memory_recovery_s:.1f} s "
          f"later (lease {LEASE['LEASE_SECONDS']} s), {len(retries)} memory run(s) "
          f"created meanwhile, {len(memory_runs)} in all")  # fmt: skip
    # while the dead worker's batch is leased, one run asks for it when the lease ends:
    # Aegra runs a run asked for later at once, so without the scheduler's wait it is a
    # hot loop (9 runs created meanwhile instead of 1, when this test was written)
    assert len(retries) <= 2 and len(memory_runs) <= len(sent) + 1, memory_runs
    assert {r["status"] for r in memory_runs} == {"success"}, memory_runs
    lost = [i for i in sent if i not in places]
    duplicated = {i: n for i, n in places.items() if n > 1}
    assert not lost and not duplicated, (lost, duplicated, places)
    assert len(places) == 2 * len(sent), places  # each human message and its one reply
