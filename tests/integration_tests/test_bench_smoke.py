"""The benchmarks at tiny sizes, in-process, against the real embedded Redis/Postgres.

No timing thresholds: only that the runs complete, write their JSON and PNG, and that
the numbers are sane (positive, p95 >= p50, nothing lost or duplicated).
"""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime, timedelta

import pytest

from bench import growth, peers, throughput
from bench.harness import args
from graph.context import Context
from memory_graph_agent.core.memory_threads import ALTERNATES

TINY = {"sizes": [200], "warmup": 2, "other_users": 2, "per_other_user": 100, "pool": 64}
"""A seeded benchmark at its smallest."""


def _sane(stats: dict, n: int | None = None) -> None:
    assert stats["n"] > 0, stats
    if n is not None:
        assert stats["n"] == n, stats
    assert stats["p50"] > 0 and stats["p95"] >= stats["p50"] and stats["max"] >= stats["p95"]


def _session_servers(memory_env: dict[str, str]) -> dict:
    """A benchmark's keyword arguments for the session's servers, quiet (kept afterwards)."""
    return {
        "database_url": memory_env["DATABASE_URL"],
        "redis_url": memory_env["REDIS_URL"],
        "key_prefix": memory_env["MEMORY_KEY_PREFIX"],
        "quiet": True,
    }


def _outputs(tmp_path, name: str) -> dict:
    png = tmp_path / f"{name}.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return json.loads((tmp_path / f"{name}.json").read_text())


@pytest.mark.server
async def test_throughput_benchmark_tiny(memory_env, tmp_path):
    # `langgraph dev`, and one Aegra replica where Aegra is installed (Python 3.12+)
    engines = ["dev"] + (["aegra:1"] if importlib.util.find_spec("aegra_api") else [])
    ok = await throughput.run(
        args("throughput", engines=engines, conversations=2, turns=5, reply_first_turns=2,
             window=4, out=tmp_path, **_session_servers(memory_env))
    )  # fmt: skip
    data = json.loads((tmp_path / "throughput.json").read_text())
    assert ok and [r["engine"] for r in data["engines"]] == engines
    for r in data["engines"]:
        assert r["errors"] == 0 and r["turns"] == 10 and r["turns_per_s"] > 0, r["error_samples"]
        for stats in (r["ttft"], r["reply"], r["end"]):
            _sane(stats, 10)
        _sane(r["reply_first"]["ttft"], 2)
        _sane(r["reply_first"]["baseline_ttft"], 2)
        assert r["cpu_s"]["servers"] > 0 and r["cpu_s"]["machine"] > 0
        v = r["verification"]  # 5 turns each, a window of 4: memory formed
        assert v["pushed"] == 20 and v["summarized"] > 0
        assert v["lost"] == 0 and v["duplicated"] == 0 and v["foreign"] == 0


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="bench.peers runs the peers' MiniLM on torch: the `torch` extra is not installed",
)
async def test_peer_benchmark_tiny(tmp_path):
    # its own database (the peers' tables copy every row of ours); Mem0 runs where the
    # `peers` extra is installed and is reported unavailable elsewhere
    await peers.run(
        args("peers", out=tmp_path, queries=10, checkpointer="memory", quiet=True, **TINY)
    )
    data = _outputs(tmp_path, "peers")
    assert data["machine"]["pgvector"] and data["versions"]["langchain-postgres"]
    (size,) = data["sizes"]
    systems = size["systems"]
    has_mem0 = importlib.util.find_spec("mem0") is not None
    expected = {
        "floor",
        "query embedding",
        "LangGraph AsyncPostgresStore",
        "langchain-postgres PGVectorStore",
        "ours: MemoryStore.search",
        "ours: read path",
    } | ({"Mem0"} if has_mem0 else set())
    assert set(systems) == expected
    assert ("mem0" in data["unavailable"]) is not has_mem0
    for name, system in systems.items():
        for mode in ("with_embedding", "pre_embedded"):
            if mode in system:
                _sane(system[mode]["latency"], 10)
                assert system[mode]["returned"]["k"] == 5
                assert system[mode]["returned"]["max"] > 0, name
    assert systems["floor"]["with_embedding"]["x_floor_p50"] == 1.0
    assert systems["floor"]["pre_embedded"]["returned"]["min"] == 5  # 200 memories, k = 5
    _sane(systems["query embedding"]["alone"]["latency"], 10)
    parts = systems["ours: read path"]["breakdown"]
    for key in ("read_path", "embed_query", "load_profile", "recall", "search"):
        _sane(parts[key], 10)
    assert parts["read_path"]["min"] > parts["embed_query"]["min"]
    assert data["layout_check"] and all(c["same"] for c in data["layout_check"].values())


@pytest.mark.slow  # kills and restarts its servers, then waits out the leases
async def test_soak_benchmark_tiny(private_home, tmp_path):
    # its own embedded servers (private_home): the soak kills Redis and stops Postgres
    from bench.soak import run_soak

    a = args(
        "soak",
        ["--users", "3", "--turns", "24", "--out", str(tmp_path), "--quiet"],
        window_size=4,
        summary_batch=2,
        worker_turns=8,
        worker_min_ok=4,
        lease_seconds=3.0,
        down_s=1.0,
        sample_s=2.0,
        redis_kills=1,
        postgres_restarts=1,
        maintain_every=1.0,  # retention runs through the turns and the faults
    )
    await run_soak(a, home=private_home)
    data = _outputs(tmp_path, "soak")
    assert data["machine"]["uptime_at_start"] and data["machine"]["loadavg_at_start"]
    t, v = data["totals"], data["verification"]
    assert t["turns"] == 72 and t["completed"] + t["failed"] == 72 and t["completed"] > 0
    assert t["settle_turns_failed"] <= 3  # the settling turns are retried until one completes
    kinds = sorted(f["kind"] for f in data["faults"])
    assert kinds == ["postgres_restart", "redis_kill", "worker_kill"], data["faults"]
    for f in data["faults"]:
        assert f["first_ok_turn_s"] is not None and f["first_ok_turn_s"] >= 0, f
    (worker,) = [f for f in data["faults"] if f["kind"] == "worker_kill"]
    assert worker["during_memory"] and worker["leased_messages"] > 0, worker
    assert v["logged"] > 100 and v["summarized"] > 0 and v["foreign"] == 0
    assert v["messages_lost"] == 0 and v["messages_duplicated"] == 0, v["samples"]
    growth = data["growth"]
    assert growth["final_rows"]["episodes"] == v["logged"]
    last = growth["samples"][-1]
    assert last["redis_keys"] > 0 and last["seen_total"] > 0 and last["pg_rows"]
    # retention ran, pruned, and lost or duplicated nothing (the check above)
    m, passes = t["maintenance"], data["maintenance_passes"]
    assert m["passes"] == len(passes) > 1 and m["completed"] > 0, passes
    assert m["checkpoints_pruned"] > 0 and m["modes"]["retention"] == ["keep_latest"], m
    assert passes[-1]["phase"] == "final" and passes[-1]["ok"], passes[-1]
    assert all(p["cause"] in ("redis", "postgres", "timeout") for p in passes if not p["ok"])
    assert m["pruned_by_kind"].get("conversation", 0) > 0, m
    by_thread = growth["checkpoints"]["by_thread"]
    assert by_thread["conversation"]["threads"] == 3, by_thread
    assert by_thread["memory"]["threads"] <= 3 * ALTERNATES, by_thread
    if not any(r.startswith("conversation") for r in passes[-1]["held_by_reason"]):
        assert by_thread["conversation"]["most"] == 1, by_thread  # each one its latest only


async def test_growth_benchmark_tiny(memory_env, tmp_path):
    flags = "--users 2 --turns 6 --every 3 --session-turns 2 --queries 3 --quiet"
    await growth.run(args("growth", flags.split(), out=tmp_path))
    data = _outputs(tmp_path, "growth")
    on, off = data["runs"]
    assert (on["retention"], off["retention"]) == ("keep_latest", "off")
    assert [s["turns_per_user"] for s in on["samples"]] == [3, 6]
    assert [s["day"] for s in on["samples"]] == [20, 40]  # the default simulated days
    for run in (on, off):
        _sane(run["read_path_ms"]["start"], 3)
        _sane(run["read_path_ms"]["end"], 3)
        for sample in run["samples"]:  # the read path at every sample, with its parts
            read = sample["read_path_ms"]
            _sane(read, 3)
            assert set(read["parts_p50"]) == {"embedding", "searches", "rest"}, read
            assert read["parts_p50"]["searches"] > 0 and read["candidates_p50"] >= 0, read
            # each channel's query, explained: what the server spent and the pages it read
            plans = sample["channels"]
            assert {"summaries", "dense_turns", "keyword_turns"} <= set(plans), plans
            assert all(p["server_ms"] > 0 and p["pages"] >= 0 for p in plans.values()), plans
        assert run["samples"][-1]["redis"]["window"] > 0
        assert run["samples"][-1]["postgres"]["episodes"] > 0
    # pruned to one checkpoint per thread: fewer checkpoint bytes than with retention off
    # (a turn writes one checkpoint, durability "exit"; the latest one holds the most)
    kept = [s["postgres"]["checkpoints"] for s in on["samples"]]
    assert kept[-1] < off["samples"][-1]["postgres"]["checkpoints"] * 3 / 4
    rates = data["per_user_per_1k_turns"]
    assert rates["keep_latest"]["postgres"]["checkpoints"] > 0


async def test_growth_clock_ages_what_maintenance_and_the_profile_read(memory_env):
    """`bench.growth.age_stores`: days go by for expiry, eviction, retention, facts and TTLs."""
    from bench.env import EMBEDDING, isolated_services
    from bench.growth import age_stores
    from graph.maintenance import build_maintenance_graph
    from memory_graph_agent.core.kinds import MemoryKind
    from memory_graph_agent.services.stores import services_session
    from memory_graph_agent.storage.decisions import Decision
    from memory_graph_agent.storage.memories import Memory
    from memory_graph_agent.storage.profile import Fact
    from memory_graph_agent.storage.window import parse_ts

    user = "clock-u1"
    async with isolated_services(tag="clock") as env, services_session(EMBEDDING) as services:
        now = datetime.now(UTC)

        def memory(text: str, importance: float, expires: datetime | None) -> Memory:
            kind = MemoryKind.SUMMARY
            return Memory(user, kind, text, importance, [text[-5:]], "t1", expires_at=expires)

        soon = memory("The user said: I sail in May.", 0.5, now + timedelta(days=5))
        faint = memory("The user said: it rained a bit.", 0.05, None)  # evictable at 180 days
        kept = memory("The user said: my name is Ada.", 0.95, None)
        for m in (soon, faint, kept):
            await services.memories.add(m)
        await services.decisions.record(Decision(user, "summary", soon.id, "created", None, "t1"))
        await services.profile.upsert(user, [Fact("city", "Lisbon", 0.8)], lambda i, p: 10.0)
        await services.profile.forget(user, "nickname")  # a tombstone, stamped now
        await services.runs.start("run-1", "respond")  # a key that lives 7 days
        run_key = services.keys.run("run-1", "respond")
        maintenance = build_maintenance_graph(services)

        async def removed() -> dict[str, int]:
            state = await maintenance.ainvoke({"all_users": True}, context=Context(user_id=user))
            return {k: state["report"][k] for k in ("expired", "evicted", "decisions_pruned")}

        async def age(days: float) -> dict:
            return await age_stores(services.redis, services.keys.prefix, env.database_url, days)

        assert await removed() == {"expired": 0, "evicted": 0, "decisions_pruned": 0}
        aged = await age(6)
        assert aged["postgres"] == {
            services.memories.table: 3,
            "memory_decisions": 1,
            "episodes": 0,
        }
        assert aged["redis"] == {"profile_facts": 1, "tombstones": 1, "ttl_shortened": 1}
        assert await removed() == {"expired": 1, "evicted": 0, "decisions_pruned": 0}
        assert "city" in await services.profile.get(user)  # 10 days: 4 left
        assert 0 < await services.redis.ttl(run_key) <= 86_400  # 7 days: 1 left
        forgotten = await services.redis.hget(services.profile.forgotten_key(user), "nickname")
        assert abs(parse_ts(forgotten) - (now - timedelta(days=6))) < timedelta(hours=1)

        aged = await age(5)
        assert aged["redis"]["ttl_expired"] == 1 and not await services.redis.exists(run_key)
        assert "city" not in await services.profile.get(user)  # expired on read, to the history
        assert [e["reason"] for e in await services.profile.history(user, "city")] == ["expired"]

        await age(170)  # 181 days in all: past eviction's and decision retention's 180
        assert await removed() == {"expired": 0, "evicted": 1, "decisions_pruned": 1}
        assert [m.id for m in await services.memories.list(user)] == [kept.id]
        (entry,) = await services.profile.history(user, "city")
        assert parse_ts(entry["valid_to"]) < now - timedelta(days=170)  # aged with the rest


async def test_growth_benchmark_days_go_by_and_maintenance_expires(
    memory_env, tmp_path, monkeypatch
):
    """With simulated days, passes expire memories: none would in a minute of real time."""
    # windows bounded by their count (20): the schedule of what forms when, counted below
    monkeypatch.setenv("WINDOW_TOKEN_SHARE", "1.0")

    flags = "--users 2 --turns 50 --every 20 --session-turns 25 --queries 2 --days-per-pass 30"
    await growth.run(args("growth", [*flags.split(), "--quiet"], out=tmp_path))
    data = _outputs(tmp_path, "growth")
    assert data["days_per_pass"] == 30
    for run in data["runs"]:
        samples = run["samples"]
        assert [s["day"] for s in samples] == [30, 60, 75]  # the last 10 turns: half a pass
        gone = [s["maintenance"]["expired"] for s in samples]
        assert all(gone), gone  # without the clock nothing is ever old enough to expire
        # none of these memories lives more than 30 days (summaries 30, raw ones 7): a full
        # pass expires them all; what is left is what the pass itself formed from the
        # windows of the threads it archived, and the last half pass's summaries
        active = [s["memories_per_user"]["active"] for s in samples]
        assert max(active) <= 2, active
        # 30 days without a turn: maintenance archives the thread (`idle_thread_days`)
        assert sum(s["maintenance"]["threads_archived"] for s in samples) > 0
