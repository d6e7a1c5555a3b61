"""Individual nodes run in a one-node graph on the real Redis/Postgres, plus routers."""

from __future__ import annotations

import json
import uuid
from functools import partial

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

from graph.context import Context
from graph.routing import route_after_consolidate, route_after_summarize, route_after_trim
from graph.state import State
from memory_graph_agent.formation.summaries import merge_thread_summary
from memory_graph_agent.prompting.rendering import render_memory, text_tokens
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.outages import guard
from memory_graph_agent.storage.profile import Fact
from memory_graph_agent.storage.window import StoredMessage
from memory_graph_agent.testing import ScriptedChatModel, default_handler, prompt_text
from nodes.consolidate import consolidate
from nodes.load_profile import load_profile
from nodes.recall import recall
from nodes.reflect import reflect
from nodes.summarize import summarize
from nodes.trim_window import trim_window
from tests.builders import keep_last, log_turns

TS = "2026-03-04T05:06:07+00:00"


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def run_node(
    services,
    node,
    state: dict,
    context: Context,
    thread_id: str | None = None,
    settings: Settings | None = None,
) -> dict:
    """Invoke one node through a tiny graph so `runtime` and `get_config` are real.

    The node gets ``settings`` (default: `Settings`' defaults) as `graph.builder` binds them.
    """
    builder = StateGraph(State, context_schema=Context)
    settings = Settings() if settings is None else settings
    builder.add_node(node.__name__, partial(node, services=services, settings=settings))
    builder.add_edge(START, node.__name__)
    builder.add_edge(node.__name__, END)
    config = {"configurable": {"thread_id": thread_id or _thread()}}
    return await builder.compile().ainvoke(state, config, context=context)


def stored(role: str, mid: str, content: str) -> StoredMessage:
    return StoredMessage(id=mid, role=role, content=content, ts=TS)


async def fill_pending(services, user_id: str, thread: str, n_pairs: int) -> list[str]:
    """Push n human/ai pairs plus one more pair, evict all but the last pair."""
    msgs = []
    for i in range(n_pairs + 1):
        msgs += [stored("human", f"h{i}", f"I like topic {i}"), stored("ai", f"a{i}", f"noted {i}")]
    await services.window.push(user_id, thread, msgs)
    moved = await services.window.overflow(user_id, thread, keep_last(2))
    return [m.id for m in moved]


def mem(user_id: str, text: str) -> Memory:
    return Memory(
        user_id=user_id,
        kind="summary",
        text=text,
        importance=0.5,
        source_ids=[uuid.uuid4().hex[:8]],
        thread_id="t0",
    )


# ---------------------------------------------------------------- load_profile


async def test_load_profile_reads_this_users_profile(settings, services, make_context, user_id):
    ctx = make_context()
    await services.profile.upsert(
        user_id, [Fact("name", "Ada", 0.9), Fact("city", "Oslo", 0.7)], settings.retention.ttl_days
    )
    await services.profile.upsert(
        f"{user_id}-b", [Fact("name", "Bob", 0.9)], settings.retention.ttl_days
    )
    out = await run_node(services, load_profile, {"messages": [HumanMessage("hi")]}, ctx)
    assert {k: v["value"] for k, v in out["profile"].items()} == {"name": "Ada", "city": "Oslo"}
    assert [(e["node"], e["kind"]) for e in out["memory_events"]] == [("load_profile", "loaded")]


@pytest.mark.parametrize(
    "messages", [[], [HumanMessage("q"), AIMessage("a")], [SystemMessage("s")]]
)
async def test_load_profile_requires_a_final_human_message(services, make_context, messages):
    with pytest.raises(ValueError, match="human message"):
        await run_node(services, load_profile, {"messages": messages}, make_context())


# ---------------------------------------------------------------- recall


async def _seed_memories(services, user_id: str) -> None:
    for text in [
        "The user's sister Anna works as a marine biologist in Oslo.",
        "The user's sister studied oceanography and loves whales.",
        "The user is learning to bake sourdough bread.",
    ]:
        await services.memories.add(mem(user_id, text))
    # a nearer memory of someone else must never show up
    await services.memories.add(
        mem(f"{user_id}-other", "What does my sister do? She is a marine biologist.")
    )


async def test_recall_keeps_hits_above_min_similarity_and_writes_nothing(
    services, make_context, user_id
):
    await _seed_memories(services, user_id)
    settings = Settings().override(min_similarity=0.3, recall_k=5, memory_token_budget=10_000)
    ctx = make_context()
    out = await run_node(
        services,
        recall,
        {"messages": [HumanMessage("What does my sister do for a living?")]},
        ctx,
        settings=settings,
    )
    recalled = out["recalled"]
    assert recalled, "the sister memories should be recalled"
    assert all(m["similarity"] >= 0.3 for m in recalled)
    assert "marine biologist" in recalled[0]["text"]
    assert not any("sourdough" in m["text"] for m in recalled)
    assert not any("She is a marine biologist" in m["text"] for m in recalled)  # other user
    assert [m["similarity"] for m in recalled] == sorted(
        (m["similarity"] for m in recalled), reverse=True
    )
    # access statistics are trim_window's, after the reply (test_reply_first.py)
    by_id = {m.id: m for m in await services.memories.list(user_id)}
    assert all(m.access_count == 0 for m in by_id.values())
    assert out["memory_events"][-1]["kind"] == "auto"
    assert out["memory_events"][-1]["text"].startswith(
        f"recall: {len(recalled)} of {len(recalled)} hits kept"
    )


async def test_recall_min_similarity_can_exclude_everything(services, make_context, user_id):
    await _seed_memories(services, user_id)
    settings = Settings().override(min_similarity=0.99)
    ctx = make_context()
    out = await run_node(
        services,
        recall,
        {"messages": [HumanMessage("What does my sister do?")]},
        ctx,
        settings=settings,
    )
    assert out["recalled"] == []
    assert all(m.access_count == 0 for m in await services.memories.list(user_id))


async def test_recall_respects_the_token_budget(services, make_context, user_id):
    await _seed_memories(services, user_id)
    question = {"messages": [HumanMessage("Tell me about my sister and bread")]}
    everything = (
        await run_node(
            services,
            recall,
            question,
            make_context(),
            settings=Settings().override(min_similarity=0.0, memory_token_budget=10_000),
        )
    )["recalled"]
    assert len(everything) == 3
    for m in everything:  # the cost recorded is the cost of the rendered line
        assert m["tokens"] == text_tokens(render_memory(m))

    for budget in [
        0,
        everything[0]["tokens"],
        everything[0]["tokens"] + everything[1]["tokens"],
        10_000,
    ]:
        out = await run_node(
            services,
            recall,
            question,
            make_context(),
            settings=Settings().override(min_similarity=0.0, memory_token_budget=budget),
        )
        kept = out["recalled"]
        assert sum(m["tokens"] for m in kept) <= budget
        assert [m["id"] for m in kept] == [
            m["id"] for m in everything if m["id"] in {k["id"] for k in kept}
        ]
        if budget == 0:
            assert kept == []
        elif budget == everything[0]["tokens"]:
            assert [m["id"] for m in kept] == [everything[0]["id"]]
        elif budget == 10_000:
            assert len(kept) == 3


async def test_recall_leaves_out_what_the_window_shows_and_finds_what_left_it(
    services, make_context, user_id
):
    """On screen: the state's messages the Redis window holds; the rest is recalled."""
    thread = _thread()
    said = "My sister is a marine biologist in Lisbon."
    ids = await log_turns(services, user_id, thread, said, "Nice!")
    settings = Settings().override(min_similarity=0.0, memory_token_budget=10_000)
    ctx = make_context()
    question = HumanMessage("What does my sister do?")
    shown = HumanMessage(said, id=ids[0])

    def recalled(out: dict) -> set[str]:
        return {s for m in out["recalled"] for s in m["source_ids"]}

    state = {"messages": [shown, question]}
    left = await run_node(services, recall, state, ctx, thread, settings=settings)
    assert ids[0] in recalled(left), "in the state but not in the window: off screen"
    await services.window.push(user_id, thread, [StoredMessage.from_message(shown)])
    held = await run_node(services, recall, state, ctx, thread, settings=settings)
    assert ids[0] not in recalled(held), "the window shows it: not again"


async def test_recall_k_caps_the_hits(services, make_context, user_id):
    await _seed_memories(services, user_id)
    out = await run_node(
        services,
        recall,
        {"messages": [HumanMessage("my sister")]},
        make_context(),
        settings=Settings().override(recall_k=1, min_similarity=0.0),
    )
    assert len(out["recalled"]) == 1


async def test_recall_for_user_without_memories(services, make_context):
    out = await run_node(
        services, recall, {"messages": [HumanMessage("anything?")]}, make_context()
    )
    assert out["recalled"] == []


# ---------------------------------------------------------------- trim_window


async def test_trim_window_pushes_evicts_and_removes_from_state(services, make_context, user_id):
    thread = _thread()
    settings = Settings().override(window_size=3)
    ctx = make_context()
    msgs = []
    for i in range(3):
        msgs += [HumanMessage(f"q{i}", id=f"q{i}"), AIMessage(f"a{i}", id=f"a{i}")]
    out = await run_node(services, trim_window, {"messages": msgs}, ctx, thread, settings=settings)
    assert [m.id for m in out["messages"]] == ["q2", "a2"]
    assert out["pending_count"] == 4
    assert [m.id for m in await services.window.window(user_id, thread)] == ["q2", "a2"]
    assert [m.id for _, m in await services.window.pending(user_id, thread)] == [
        "q0",
        "a0",
        "q1",
        "a1",
    ]
    # running again with the same messages is idempotent
    out = await run_node(services, trim_window, {"messages": msgs}, ctx, thread, settings=settings)
    assert out["pending_count"] == 4
    assert out["memory_events"][-1]["kind"] == "pushed"
    assert "+0 messages" in out["memory_events"][-1]["text"]


# ---------------------------------------------------------------- summarize


async def test_summarize_with_empty_pending_returns_none(services, make_context):
    out = await run_node(services, summarize, {"messages": []}, make_context(), _thread())
    assert out["summary"] is None


async def test_summarize_builds_summary_with_provenance_and_keeps_pending(
    services, make_context, user_id
):
    thread = _thread()
    moved = await fill_pending(services, user_id, thread, 2)
    out = await run_node(
        services,
        summarize,
        {"messages": []},
        make_context(),
        thread,
        settings=Settings().override(summary_batch=4),
    )
    s = out["summary"]
    assert s["source_ids"] == moved == ["h0", "a0", "h1", "a1"]
    assert (s["user_id"], s["thread_id"], s["mode"], s["importance"]) == (
        user_id,
        thread,
        "llm",
        0.5,
    )
    assert s["created_at"] == TS
    assert "topic 0" in s["text"] and "topic 1" in s["text"]
    # summarize only claims (leases) the batch: consolidate acknowledges it
    assert await services.queue.backlog(user_id, thread) == 4
    assert [m.id for m in await services.queue.processing(user_id, thread)] == moved


async def test_summarize_falls_back_to_raw_transcript(services, make_context, user_id):
    def broken(messages):
        raise TimeoutError("slow provider")

    thread = _thread()
    await fill_pending(services, user_id, thread, 1)
    out = await run_node(
        services,
        summarize,
        {"messages": []},
        make_context(model_obj=ScriptedChatModel(handler=broken)),
        thread,
        settings=Settings().override(summary_batch=2),
    )
    s = out["summary"]
    assert (s["mode"], s["importance"]) == ("fallback", 0.3)
    assert "human: I like topic 0" in s["text"] and "ai: noted 0" in s["text"]


# ---------------------------------------------------------------- consolidate


async def _summary_for(services, make_context, user_id, thread, mode="llm", text=None):
    await fill_pending(services, user_id, thread, 2)
    s = (
        await run_node(
            services,
            summarize,
            {"messages": []},
            make_context(),
            thread,
            settings=Settings().override(summary_batch=4),
        )
    )["summary"]
    s["mode"] = mode
    if text:  # as if the user had said it: facts are grounded in the user's own words
        s["text"] = s["user_text"] = text
    return s


async def test_consolidate_without_summary_is_a_no_op(services, make_context, user_id):
    out = await run_node(services, consolidate, {"messages": [], "summary": None}, make_context())
    assert out["summary"] is None
    assert await services.memories.count(user_id) == {}


async def test_consolidate_storage_failure_keeps_pending_then_retry_succeeds(
    services, make_context, user_id, monkeypatch
):
    thread = _thread()
    s = await _summary_for(services, make_context, user_id, thread)
    ctx = make_context()

    async def postgres_down(memory, vector=None):
        raise ConnectionError("connection refused")

    monkeypatch.setattr(services.memories, "add", guard("postgres", postgres_down))
    out = await run_node(services, consolidate, {"messages": [], "summary": s}, ctx, thread)
    assert out["summary_stored"] is False and out["summary"] is None
    assert out["memory_events"][-1]["kind"] == "storage_failed"
    assert await services.queue.backlog(user_id, thread) == 4  # nothing acked, nothing lost
    monkeypatch.undo()
    assert await services.memories.count(user_id) == {}

    out = await run_node(services, consolidate, {"messages": [], "summary": s}, ctx, thread)
    assert out["summary_stored"] is True
    assert out["pending_count"] == 0 and await services.queue.backlog(user_id, thread) == 0
    assert out["summaries_since_reflection"] == 1
    (stored_summary,) = await services.memories.list(user_id)
    assert stored_summary.source_ids == s["source_ids"] and stored_summary.thread_id == thread

    # replaying the same summary (e.g. a retried run) upserts, never duplicates
    out = await run_node(services, consolidate, {"messages": [], "summary": s}, ctx, thread)
    assert await services.memories.count(user_id) == {"summary": 1}
    (stored_event,) = [e for e in out["memory_events"] if e["kind"] == "stored"]
    assert stored_event["text"].endswith(", 0 acked")


async def test_consolidate_extracts_facts_above_importance_threshold(
    services, make_context, fake_model, user_id
):
    thread = _thread()
    text = "My name is Zhang San, I live in Berlin and I prefer Go."
    s = await _summary_for(services, make_context, user_id, thread, text=text)
    out = await run_node(
        services,
        consolidate,
        {"messages": [], "summary": s},
        make_context(),
        thread,
        settings=Settings().override(min_fact_importance=0.9),
    )
    profile = await services.profile.get(user_id)
    assert {k: v["value"] for k, v in profile.items()} == {
        "name": "Zhang San"
    }  # city 0.8, lang 0.7 dropped
    (memory,) = await services.memories.list(user_id)
    assert profile["name"]["source_ids"] == [memory.id]
    assert out["thread_summary"].endswith(text)


async def test_consolidate_drops_facts_not_grounded_in_the_summary(services, make_context, user_id):
    def inventive(messages):
        if prompt_text(messages).startswith("Extract durable facts"):
            return json.dumps(
                {
                    "facts": [
                        {"key": "name", "value": "Ada Lovelace", "importance": 0.95},
                        {"key": "city", "value": "Paris", "importance": 0.9},  # never said
                    ]
                }
            )
        return default_handler(messages)

    thread = _thread()
    s = await _summary_for(
        services, make_context, user_id, thread, text="The user is Ada Lovelace."
    )
    ctx = make_context(model_obj=ScriptedChatModel(handler=inventive))
    out = await run_node(services, consolidate, {"messages": [], "summary": s}, ctx, thread)
    assert out["summary_stored"] is True
    profile = await services.profile.get(user_id)
    assert {k: v["value"] for k, v in profile.items()} == {"name": "Ada Lovelace"}


async def test_consolidate_survives_broken_fact_extractor(services, make_context, user_id):
    def no_facts(messages):
        if prompt_text(messages).startswith("Extract durable facts"):
            return "this is not json"
        return default_handler(messages)

    thread = _thread()
    s = await _summary_for(services, make_context, user_id, thread, text="My name is Ada.")
    ctx = make_context(model_obj=ScriptedChatModel(handler=no_facts))
    out = await run_node(services, consolidate, {"messages": [], "summary": s}, ctx, thread)
    assert out["summary_stored"] is True and out["pending_count"] == 0
    assert await services.profile.get(user_id) == {}


def test_merge_thread_summary_keeps_newest_words():
    assert merge_thread_summary("", "a b") == "a b"
    merged = merge_thread_summary(" ".join(f"old{i}" for i in range(300)), "new1 new2")
    words = merged.split()
    assert len(words) == 250 and words[-2:] == ["new1", "new2"] and words[0] == "old52"


# ---------------------------------------------------------------- reflect


async def test_reflect_skips_below_threshold_without_model_call(
    services, make_context, fake_model, user_id
):
    await services.memories.add(mem(user_id, "one summary"))
    out = await run_node(
        services,
        reflect,
        {"messages": []},
        make_context(),
        settings=Settings().override(reflect_after=2),
    )
    assert out["summaries_since_reflection"] == 1
    assert out["memory_events"][-1]["kind"] == "not_due"
    assert fake_model.prompts == []
    assert await services.memories.count(user_id) == {"summary": 1}


# ---------------------------------------------------------------- routing


def rt(**values) -> Settings:
    return Settings().override(**values)


@pytest.mark.parametrize(
    ("pending", "batch", "expected"),
    [
        (None, 5, END),
        (0, 5, END),
        (4, 5, END),
        (5, 5, "summarize"),
        (12, 5, "summarize"),
        (1, 1, "summarize"),
    ],
)
def test_route_after_trim(pending, batch, expected):
    state = {} if pending is None else {"pending_count": pending}
    assert route_after_trim(state, settings=rt(summary_batch=batch)) == expected


@pytest.mark.parametrize(
    ("summary", "expected"), [(None, END), ({}, END), ({"text": "x"}, "consolidate")]
)
def test_route_after_summarize(summary, expected):
    assert route_after_summarize({"summary": summary}) == expected
    assert route_after_summarize({}) == END


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({}, END),
        ({"summaries_since_reflection": 3}, "reflect"),
        ({"summaries_since_reflection": 5, "summary_stored": True, "pending_count": 10}, "reflect"),
        (
            {"summaries_since_reflection": 2, "summary_stored": True, "pending_count": 2},
            "summarize",
        ),
        ({"summaries_since_reflection": 2, "summary_stored": True, "pending_count": 1}, END),
        # a storage failure must not loop back into summarize with the same backlog
        ({"summaries_since_reflection": 0, "summary_stored": False, "pending_count": 50}, END),
    ],
)
def test_route_after_consolidate(state, expected):
    assert route_after_consolidate(state, settings=rt(reflect_after=3, summary_batch=2)) == expected
