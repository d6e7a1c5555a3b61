"""Prometheus metrics after real turns through the compiled graph.

Values are read from the default registry before and after (`get_sample_value`) and
the deltas compared with what the turns did; the same values must come out of
`generate_latest()`, the CLI's HTTP endpoint and ``memory-agent metrics``. Redis
failures come from a real refused connection, not a mock.
"""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
import uuid

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from memory_graph_agent.cli.main import _serve_metrics, main
from memory_graph_agent.core.metrics import REDIS_OPS, TIERS
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.storage.profile import Fact, ProfileStore
from memory_graph_agent.storage.threads import ThreadOwners
from memory_graph_agent.storage.window import StoredMessage, WindowStore
from memory_graph_agent.testing import ScriptedChatModel, block, default_handler, prompt_text
from tests.builders import keep_last
from tests.conftest import say

NAMES = (
    "agent_memory_retrieval_seconds",
    "agent_memory_hit_total",
    "agent_memory_pending_queue_size",
    "agent_memory_vector_similarity",
    "agent_memory_redis_failures_total",
    "agent_memory_summaries_total",
    "agent_memory_llm_calls_total",
    "agent_memory_llm_tokens_total",
    "agent_memory_model_server_deaths_total",
)

# (sample name, labels) read before/after and compared across the scrape paths
KEY_SAMPLES = [
    ("agent_memory_retrieval_seconds_count", {}),
    ("agent_memory_retrieval_seconds_sum", {}),
    *[("agent_memory_hit_total", {"tier": t}) for t in TIERS],
    ("agent_memory_pending_queue_size", {}),
    ("agent_memory_vector_similarity_count", {}),
    ("agent_memory_vector_similarity_sum", {}),
    *[("agent_memory_summaries_total", {"outcome": o}) for o in ("llm", "fallback", "raw")],
    ("agent_memory_redis_failures_total", {"op": "push"}),
]


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def value(name: str, **labels: str) -> float:
    got = REGISTRY.get_sample_value(name, labels)
    assert got is not None, f"sample {name}{labels} missing from the registry"
    return got


def snapshot() -> dict[tuple[str, tuple], float]:
    return {(n, tuple(sorted(lb.items()))): value(n, **lb) for n, lb in KEY_SAMPLES}


def parse(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def respond_prompts(model: ScriptedChatModel) -> list[list]:
    return [p for p in model.prompts if p and p[0].type == "system"]


def count_lines(prompt: str, tag: str, prefix: str) -> int:
    return sum(1 for line in block(prompt, tag).splitlines() if line.startswith(prefix))


async def test_a_conversation_moves_the_metrics_by_what_it_did(
    graph_for, make_context, fake_model, services, capsys
):
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    before = snapshot()
    turns = [
        "Hi! My name is Zhang San and I live in Berlin.",
        "What is a haiku?",
        "Remind me: what is my name and where do I live?",
    ]
    states = [await say(agent, ctx, thread, text) for text in turns]
    after = snapshot()

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after[key] - before[key]

    # one retrieval per turn
    assert delta("agent_memory_retrieval_seconds_count") == len(turns)
    assert delta("agent_memory_retrieval_seconds_sum") > 0

    # hits: exactly what the respond prompts carried
    prompts = respond_prompts(fake_model)
    assert len(prompts) == len(turns)
    systems = [str(p[0].content) for p in prompts]
    window_hits = sum(len(p) - 1 for p in prompts)
    summary_hits = sum(count_lines(s, "memories", "- [summary") for s in systems)
    profile_hits = sum(len(s["profile"]) for s in states)
    assert delta("agent_memory_hit_total", tier="window") == window_hits > 0
    assert delta("agent_memory_hit_total", tier="summary") == summary_hits >= 1
    assert delta("agent_memory_hit_total", tier="profile") == profile_hits >= 1
    assert delta("agent_memory_hit_total", tier="reflection") == 0
    assert "Zhang San" in block(systems[-1], "profile")  # the profile reached turn 3

    # similarity of every recalled item
    recalled = [m for s in states for m in s["recalled"]]
    assert recalled and any(m["kind"] == "summary" for m in states[-1]["recalled"])
    assert delta("agent_memory_vector_similarity_count") == len(recalled)
    assert delta("agent_memory_vector_similarity_sum") == pytest.approx(
        sum(m["similarity"] for m in recalled), abs=1e-3
    )

    # summaries: turn 2 and turn 3 each evicted a turn and summarized it with the model
    stored = await services.memories.count(ctx.user_id)
    assert stored == {"summary": 2}
    assert delta("agent_memory_summaries_total", outcome="llm") == stored["summary"]
    assert delta("agent_memory_summaries_total", outcome="fallback") == 0

    # the pending gauge follows the thread after its last turn
    pending = await services.window.pending_len(ctx.user_id, thread)
    assert value("agent_memory_pending_queue_size") == pending == 0

    # the same numbers through every exposition path
    current = snapshot()
    scraped = parse(generate_latest().decode())
    server = _serve_metrics(0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
            over_http = parse(resp.read().decode())
    finally:
        server.shutdown()
        server.server_close()
    capsys.readouterr()  # drop the "metrics on http://..." line of _serve_metrics
    assert main(["metrics"]) == 0
    printed = parse(capsys.readouterr().out)
    for key, expected in current.items():
        assert scraped[key] == expected, key
        assert over_http[key] == expected, key
        assert printed[key] == expected, key


async def test_summary_outcomes_and_pending_gauge(graph_for, make_context, services):
    def broken_summarizer(messages):
        if prompt_text(messages).startswith("Summarize"):
            raise RuntimeError("provider down")
        return default_handler(messages)

    outcomes = ("llm", "fallback", "raw")
    before = {o: value("agent_memory_summaries_total", outcome=o) for o in outcomes}

    settings = Settings().override(window_size=2, summary_batch=2)
    broken = make_context(model_obj=ScriptedChatModel(handler=broken_summarizer))
    thread = _thread()
    for text in ["I live in Lisbon.", "I have two cats."]:
        await say(graph_for(settings), broken, thread, text)
    settings_raw = Settings().override(window_size=2, summary_batch=2, summary_mode="raw")
    raw = make_context()
    thread = _thread()
    for text in ["I play the cello.", "I like rainy days."]:
        await say(graph_for(settings_raw), raw, thread, text)

    got = {o: value("agent_memory_summaries_total", outcome=o) - before[o] for o in outcomes}
    assert got == {"llm": 0, "fallback": 1, "raw": 1}

    # pending left non-empty: the gauge shows this thread's pending length
    settings_ctx = Settings().override(window_size=2, summary_batch=4)
    ctx = make_context()
    thread = _thread()
    for text in ["first message", "second message"]:
        await say(graph_for(settings_ctx), ctx, thread, text)
    pending = await services.window.pending_len(ctx.user_id, thread)
    assert pending == 2
    assert value("agent_memory_pending_queue_size") == pending


async def test_memory_model_calls_and_tokens_are_counted_by_purpose(graph_for, make_context):
    from memory_graph_agent.core.metrics import LLM_PURPOSES

    def snap() -> dict[tuple[str, str], float]:
        out = {(p, "calls"): value("agent_memory_llm_calls_total", purpose=p) for p in LLM_PURPOSES}
        for p in LLM_PURPOSES:
            for d in ("input", "output"):
                out[(p, d)] = value("agent_memory_llm_tokens_total", purpose=p, direction=d)
        return out

    model = ScriptedChatModel()
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    before = snap()
    thread = _thread()
    for text in ["I live in Lisbon.", "I have two cats.", "I play the cello.", "I like tea."]:
        await say(agent, ctx, thread, text)
    got = {k: v - before[k] for k, v in snap().items()}
    memory_prompts = [p for p in model.prompts if p and p[0].type != "system"]
    summaries = [p for p in memory_prompts if prompt_text(p).startswith("Summarize")]
    # every memory call is counted, the replies' calls are not
    assert sum(got[(p, "calls")] for p in LLM_PURPOSES) == len(memory_prompts) > 0
    assert got[("summarize", "calls")] == len(summaries) > 0
    assert got[("summarize", "input")] > 0 and got[("summarize", "output")] > 0
    scraped = parse(generate_latest().decode())
    assert scraped[("agent_memory_llm_calls_total", (("purpose", "summarize"),))] == value(
        "agent_memory_llm_calls_total", purpose="summarize"
    )


async def test_memory_cost_is_reported_per_turn_and_kept_per_user(
    graph_for, make_context, services, fake_model, capsys
):
    model = ScriptedChatModel()
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context(model_obj=model)
    settings_other = Settings().override(window_size=2, summary_batch=2)
    other = make_context(user_id=f"u-{uuid.uuid4().hex[:10]}")
    thread, other_thread, per_turn = _thread(), _thread(), []
    for text in ["I live in Lisbon.", "I have two cats.", "I play the cello.", "I like tea."]:
        state = await say(graph_for(settings), ctx, thread, text)
        per_turn.append(state.get("memory_cost") or {})
        await say(graph_for(settings_other), other, other_thread, text)
    memory_calls = len([p for p in model.prompts if p and p[0].type != "system"])
    # each turn reports only its own memory calls; together they are all of them
    assert (
        per_turn[0] == {}
        and sum(c["calls"] for turn in per_turn for c in turn.values()) == memory_calls > 0
    )
    assert all(c["input"] > 0 for turn in per_turn for c in turn.values())
    # the user's running totals are the sum of the turns, apart from other users'
    totals: dict = {}
    for turn in per_turn:
        for purpose, counts in turn.items():
            into = totals.setdefault(purpose, {"calls": 0, "input": 0, "output": 0})
            for k, v in counts.items():
                into[k] += v
    assert await services.costs.get(ctx.user_id) == totals
    other_calls = len([p for p in fake_model.prompts if p and p[0].type != "system"])
    other_cost = await services.costs.get(other.user_id)
    assert sum(c["calls"] for c in other_cost.values()) == other_calls > 0
    code = await asyncio.to_thread(main, ["memory", "show", "--user", ctx.user_id, "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["memory_cost"] == totals


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


async def test_redis_failures_are_counted_per_op_and_reraised():
    client = Redis.from_url(
        f"redis://127.0.0.1:{_closed_port()}",
        retry=Retry(NoBackoff(), 0),
        socket_connect_timeout=2,
    )
    window, profile = WindowStore(client, "metrics-test"), ProfileStore(client, "metrics-test")
    owners = ThreadOwners(client, RedisKeys("metrics-test"))
    message = StoredMessage(id="m1", role="human", content="hi", ts="2026-01-01T00:00:00")
    calls = {
        "push": lambda: window.push("u1", "t1", [message]),
        "window": lambda: window.window("u1", "t1"),
        "overflow": lambda: window.overflow("u1", "t1", keep_last(2)),
        "pending": lambda: window.pending("u1", "t1"),
        "pending_len": lambda: window.pending_len("u1", "t1"),
        "ack": lambda: window.ack("u1", "t1", ["m1"]),  # calls pending() inside: one count
        "threads": lambda: window.threads("u1"),
        "profile_get": lambda: profile.get("u1"),
        "profile_upsert": lambda: profile.upsert(
            "u1", [Fact("city", "Rome", 0.9)], lambda importance, pinned: 30
        ),
        # a turn's start: the admission, with the profile and running summary it carries
        "admit": lambda: owners.admit("u1", "t1", ["m1"], also=profile.reads("u1")),
    }
    assert set(calls) == set(REDIS_OPS)
    try:
        for op, call in calls.items():
            before = {o: value("agent_memory_redis_failures_total", op=o) for o in REDIS_OPS}
            with pytest.raises(StoreUnavailable):
                await call()
            after = {o: value("agent_memory_redis_failures_total", op=o) for o in REDIS_OPS}
            changed = {o: after[o] - before[o] for o in REDIS_OPS if after[o] != before[o]}
            assert changed == {op: 1}, op
    finally:
        await client.aclose()


def test_webapp_serves_metrics(webapp):
    from starlette.testclient import TestClient

    with TestClient(webapp) as client:
        full = client.get("/metrics")
        only = client.get("/memory/metrics")
    assert full.status_code == only.status_code == 200
    assert full.headers["content-type"].startswith("text/plain")
    for name in NAMES:
        assert f"# TYPE {name.removesuffix('_total')}" in full.text
        assert f"# TYPE {name.removesuffix('_total')}" in only.text
    families = {f.name for f in text_string_to_metric_families(only.text)}
    assert families and all(f.startswith("agent_memory_") for f in families)
