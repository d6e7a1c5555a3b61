"""Memory tools through the compiled graph: the scripted model calls search_memory,
remember, forget, pin and unpin; the tools run in the ``tools`` node on the real Redis and
Postgres, scoped to the run's user, and a tool turn is evicted from the window whole."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from graph.prompts import TOOL_LIMIT_REPLY
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.profile import Fact
from memory_graph_agent.testing import ScriptedChatModel, block, default_handler, tool_call
from tests.conftest import say

ALL_TOOLS = ["search_memory", "remember", "forget", "pin", "unpin"]
Step = str | AIMessage | Callable[[list[BaseMessage]], str | AIMessage]


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def scripted(*steps: Step) -> ScriptedChatModel:
    """A model whose respond calls follow ``steps`` in order ("done" after them);
    memory prompts (summaries, facts...) get the default answers."""
    queue = list(steps)

    def handler(messages: list[BaseMessage]) -> str | AIMessage:
        if not (messages and isinstance(messages[0], SystemMessage)):
            return default_handler(messages)
        step = queue.pop(0) if queue else "done"
        return step(messages) if callable(step) else step

    return ScriptedChatModel(handler=handler)


def respond_calls(model: ScriptedChatModel) -> list[tuple[list[BaseMessage], list[str]]]:
    """(prompt, bound tool names) of every respond call."""
    return [
        (prompt, tools)
        for prompt, tools in zip(model.prompts, model.tools_seen, strict=True)
        if prompt and isinstance(prompt[0], SystemMessage)
    ]


def tool_results(messages: list[BaseMessage]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}


def assert_no_orphans(messages: list) -> None:
    """Every tool call has its result after it, every result its call before it."""
    calls: set[str] = set()
    for m in messages:
        calls |= {c["id"] for c in getattr(m, "tool_calls", None) or []}
        answered = getattr(m, "tool_call_id", None)
        if getattr(m, "type", getattr(m, "role", None)) == "tool":
            assert answered in calls, f"orphaned tool result {answered}"
    results = {getattr(m, "tool_call_id", None) for m in messages}
    assert calls <= results, f"tool calls without results: {calls - results}"


async def _memory(services, user_id: str, text: str, importance: float = 0.7) -> Memory:
    memory = Memory(user_id, "summary", text, importance, [uuid.uuid4().hex])
    memory.expires_at = datetime.now(UTC) + timedelta(days=30)
    await services.memories.add(memory)
    return memory


async def test_remember_returns_the_previous_value_and_keeps_history(agent, make_context, services):
    model = scripted(
        tool_call("remember", "c-java", key="preferred_language", fact="Java", importance=0.7),
        "Noted.",
        tool_call("remember", "c-go", key="preferred_language", fact="Go", importance=0.8),
        lambda messages: f"Noted: {messages[-1].content}",
    )
    ctx = make_context(model_obj=model)
    thread = _thread()
    await say(agent, ctx, thread, "I write all my code in Java these days.")
    state = await say(agent, ctx, thread, "Actually I switched to Go last month.")

    results = tool_results(state["messages"])
    assert results["c-java"] == "created preferred_language: 'Java'"
    assert results["c-go"] == "updated preferred_language: was 'Java', now 'Go'"
    # the model saw the change in a ToolMessage answering its call
    prompt, tools = respond_calls(model)[3]
    assert isinstance(prompt[-1], ToolMessage) and prompt[-1].tool_call_id == "c-go"
    assert "was 'Java', now 'Go'" in prompt[-1].content
    assert tools == ALL_TOOLS
    assert state["messages"][-1].content == "Noted: " + results["c-go"]

    fact = (await services.profile.get(ctx.user_id))["preferred_language"]
    human_id = state["messages"][-4].id
    assert fact["value"] == "Go" and fact["importance"] == 0.8
    assert fact["source_ids"] == ["c-go", human_id]
    (old,) = await services.profile.history(ctx.user_id, "preferred_language")
    assert old["value"] == "Java" and old["reason"] == "updated" and old["replaced_by"] == "Go"


async def test_remember_rejects_bad_arguments_without_failing_the_turn(
    agent, make_context, services
):
    def call(call_id: str, **args) -> dict:
        return {"name": "remember", "args": args, "id": call_id}

    bad = AIMessage(
        content="",
        tool_calls=[
            call("a", key="city", fact="  ", importance=0.5),
            call("b", key="city", fact="Oslo", importance=1.5),
            call("c", key="!!", fact="Oslo", importance=0.5),
            call("d", key="bio", fact="x" * 501, importance=0.5),
            call("e", key="city", fact="Oslo"),
        ],
    )
    ctx = make_context(model_obj=scripted(bad, "Sorry, I could not store that."))
    state = await say(agent, ctx, _thread(), "Remember that I live in Oslo.")
    results = tool_results(state["messages"])
    assert results["a"].startswith("error: the fact for 'city' is empty")
    assert results["b"] == "error: importance must be between 0 and 1, got 1.5"
    assert results["c"].startswith("error: key is empty")
    assert results["d"] == "error: the fact is 501 characters; the limit is 500"
    assert "importance" in results["e"] and "Field required" in results["e"]
    assert state["messages"][-1].content == "Sorry, I could not store that."
    assert await services.profile.get(ctx.user_id) == {}


async def test_search_memory_in_tool_mode_replaces_the_recall_search(agent, make_context, services):
    model = scripted(
        tool_call("search_memory", "s-1", query="bees honey"),
        lambda messages: "From memory: " + messages[-1].content,
    )
    ctx = make_context(recall_mode="tool", model_obj=model)
    bees = await _memory(services, ctx.user_id, "The user keeps bees and sells honey in Lisbon.")
    other = await _memory(services, f"u-{uuid.uuid4().hex[:10]}", "The user keeps bees too.")

    state = await say(agent, ctx, _thread(), "What do you know about my hobby with bees?")

    assert state["recalled"] == []  # the recall node did not search ...
    (first, tools), (second, _) = respond_calls(model)
    assert block(str(first[0].content), "memories") == "(none)"
    assert "search_memory" in tools
    # ... the model did, and saw the memory in a ToolMessage, fenced as data, with its id
    result = second[-1]
    assert isinstance(result, ToolMessage) and result.tool_call_id == "s-1"
    assert result.content.startswith("<memories>\n") and result.content.endswith("\n</memories>")
    assert "keeps bees and sells honey" in result.content and f"(id: {bees.id})" in result.content
    assert other.id not in result.content
    (stored,) = await services.memories.get(ctx.user_id, [bees.id])
    assert stored.access_count == 1  # touched once: by the tool, not by recall


async def test_tool_mode_without_memory_tools_binds_only_search(agent, make_context):
    model = scripted(tool_call("remember", "r-1", key="city", fact="Oslo", importance=0.9))
    ctx = make_context(recall_mode="tool", memory_tools=False, model_obj=model)
    state = await say(agent, ctx, _thread(), "I live in Oslo.")
    assert [tools for _, tools in respond_calls(model)] == [["search_memory"], ["search_memory"]]
    assert tool_results(state["messages"])["r-1"].startswith("error: tool 'remember' is not")


async def test_forget_pin_and_unpin_touch_only_the_users_own_memory(
    settings, agent, make_context, services
):
    model = scripted()
    ctx = make_context(model_obj=model)
    stranger = f"u-{uuid.uuid4().hex[:10]}"
    mine = await _memory(services, ctx.user_id, "The user is training for a marathon.")
    theirs = await _memory(services, stranger, "The stranger collects stamps.")
    ttl = settings.retention.ttl_days
    await services.profile.upsert(ctx.user_id, [Fact("city", "Oslo", 0.7)], ttl)
    await services.profile.upsert(stranger, [Fact("city", "Rome", 0.7)], ttl)

    def calls(*pairs: tuple[str, str], start: int = 0) -> AIMessage:
        return AIMessage(
            content="",
            tool_calls=[
                {"name": name, "args": {"key_or_memory_id": ref}, "id": f"{name}-{i}"}
                for i, (name, ref) in enumerate(pairs, start)
            ],
        )

    model.handler = scripted(
        calls(("pin", mine.id), ("pin", "city"), ("pin", theirs.id), ("forget", theirs.id)),
        "Pinned.",
    ).handler
    state = await say(agent, ctx, _thread(), "Always remember my marathon and my city.")
    results = tool_results(state["messages"])
    assert results["pin-0"] == f"pinned memory {mine.id}"
    assert results["pin-1"] == "pinned city: it no longer expires"
    assert results["pin-2"] == results["forget-3"] == f"no memory with id {theirs.id!r}"
    (pinned,) = await services.memories.get(ctx.user_id, [mine.id])
    assert pinned.pinned and pinned.expires_at is None
    city = (await services.profile.get(ctx.user_id))["city"]
    assert city["pinned"] and city["expires_at"] is None
    (untouched,) = await services.memories.get(stranger, [theirs.id])
    assert not untouched.pinned and untouched.expires_at is not None

    # calls of one message run concurrently: unpin and forget of a key go in two rounds
    model.handler = scripted(
        calls(
            ("unpin", mine.id),
            ("unpin", "city"),
            (
                "forget",
                "nope",
            ),
            start=0,
        ),
        calls(("forget", "city"), ("forget", mine.id), ("forget", theirs.id), start=3),
        "Forgotten.",
    ).handler
    state = await say(agent, ctx, _thread(), "Actually, forget all that.")
    results = tool_results(state["messages"])
    assert results["unpin-0"] == f"unpinned memory {mine.id}"
    assert results["unpin-1"] == "unpinned city: it expires again"
    assert results["forget-2"].startswith("nothing matched 'nope'")
    assert results["forget-3"] == "forgot city: 'Oslo'"
    assert results["forget-4"] == f"forgot memory {mine.id}"
    assert results["forget-5"] == f"no memory with id {theirs.id!r}"
    assert await services.memories.get(ctx.user_id, [mine.id]) == []
    assert "city" not in await services.profile.get(ctx.user_id)
    assert await services.memories.get(stranger, [theirs.id])  # the stranger's data stays
    assert (await services.profile.get(stranger))["city"]["value"] == "Rome"


async def test_max_tool_rounds_ends_a_model_that_keeps_calling_tools(graph_for, make_context):
    model = ScriptedChatModel(
        handler=lambda messages: (
            tool_call("search_memory", query="again")
            if isinstance(messages[0], SystemMessage)
            else default_handler(messages)
        )
    )
    settings = Settings().override(max_tool_rounds=2)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    state = await say(agent, ctx, _thread(), "Look something up.")
    assert [tools for _, tools in respond_calls(model)] == [ALL_TOOLS, ALL_TOOLS, []]
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    final = state["messages"][-1]
    assert not final.tool_calls and final.content == TOOL_LIMIT_REPLY
    from nodes.respond import tool_rounds_this_turn

    assert tool_rounds_this_turn(state["messages"]) == 2
    # the next turn starts with a fresh allowance
    await say(agent, ctx, _thread(), "Once more.")
    assert [tools for _, tools in respond_calls(model)][3:] == [ALL_TOOLS, ALL_TOOLS, []]


class NoToolsModel(ScriptedChatModel):
    """Like the offline llama.cpp model: cannot bind tools."""

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN201
        raise NotImplementedError("this model cannot call tools")


async def test_a_model_without_tool_calling_answers_without_tools(agent, make_context):
    model = NoToolsModel()
    ctx = make_context(model_obj=model)
    state = await say(agent, ctx, _thread(), "Hello there.")
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    assert state["messages"][-1].content == "ok (2 messages seen)"
    assert "memory tools" not in model.system_prompts()[-1]

    switched_off = ScriptedChatModel()
    ctx = make_context(memory_tools=False, model_obj=switched_off)
    await say(agent, ctx, _thread(), "Hello again.")
    assert switched_off.tools_seen == [[]]
    assert "memory tools" not in switched_off.system_prompts()[-1]

    with_tools = ScriptedChatModel()
    await say(agent, make_context(model_obj=with_tools), _thread(), "Hello with tools.")
    assert with_tools.tools_seen == [ALL_TOOLS]
    assert "memory tools (search_memory, remember" in with_tools.system_prompts()[-1]


async def _tool_turn_then_filler(agent, ctx, services, model, thread: str, turns: int) -> list[str]:
    """One turn with two tool rounds, then plain turns; check every turn for orphans.

    Returns the ids of the tool turn's six messages.
    """
    state = await say(agent, ctx, thread, "Please note that I live in Oslo and check memory.")
    # the whole turn: what the model saw last, plus its answer (a tiny window already cut it)
    turn = [*respond_calls(model)[-1][0][1:], state["messages"][-1]]
    assert [m.type for m in turn] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert_no_orphans(state["messages"])
    calls = {m.id: {c["id"] for c in m.tool_calls} for m in turn if m.type == "ai" and m.tool_calls}
    results = {m.id: m.tool_call_id for m in turn if isinstance(m, ToolMessage)}
    for i in range(turns):
        state = await say(agent, ctx, thread, f"Plain question number {i}?")
        window = await services.window.window(ctx.user_id, thread)
        assert_no_orphans(state["messages"])
        assert_no_orphans(window)
        in_window = {m.id for m in window}
        in_state = {m.id for m in state["messages"]}
        for ai_id, call_ids in calls.items():  # a call and its results move together
            for tool_id, call_id in results.items():
                if call_id in call_ids:
                    assert (ai_id in in_window) == (tool_id in in_window)
                    assert (ai_id in in_state) == (tool_id in in_state)
    tool_turn = [m.id for m in turn]
    assert not set(tool_turn) & {m.id for m in state["messages"]}, "the tool turn must be evicted"
    return tool_turn


def _two_rounds() -> ScriptedChatModel:
    return scripted(
        tool_call("search_memory", "t-search", query="Oslo"),
        tool_call("remember", "t-city", key="city", fact="Oslo", importance=0.8),
        "Noted that you live in Oslo.",
    )


async def test_a_tool_turn_leaves_the_window_whole(graph_for, make_context, services):
    model = _two_rounds()
    settings = Settings().override(window_size=8, summary_batch=50)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()
    tool_turn = await _tool_turn_then_filler(agent, ctx, services, model, thread, turns=3)
    pending = [m for _, m in await services.window.pending(ctx.user_id, thread)]
    assert [m.id for m in pending[:6]] == tool_turn  # evicted in one cut, in order
    assert_no_orphans(pending)
    ai_call = pending[3].to_message()
    assert ai_call.tool_calls[0]["id"] == "t-city"  # the mirror keeps calls and results
    assert pending[4].to_message().tool_call_id == "t-city"


async def test_tool_messages_survive_a_tiny_window_and_summarization(
    graph_for, make_context, services
):
    model = _two_rounds()
    settings = Settings().override(window_size=3, summary_batch=2)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()
    tool_turn = await _tool_turn_then_filler(agent, ctx, services, model, thread, turns=4)
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    summarized = [sid for s in summaries for sid in s.source_ids]
    pending = [m.id for _, m in await services.window.pending(ctx.user_id, thread)]
    assert len(summarized) == len(set(summarized))
    assert set(tool_turn) <= set(summarized) | set(pending)  # nothing of the turn was lost
    assert any("I live in Oslo" in s.text for s in summaries)


def test_rounds_count_from_the_turns_human_message_and_routing_follows_calls():
    from langchain_core.messages import HumanMessage

    from graph.routing import route_after_respond
    from nodes.respond import tool_rounds_this_turn

    old = [HumanMessage("a", id="1"), tool_call("pin", "x", key_or_memory_id="k")]
    old.append(ToolMessage("pinned k", tool_call_id="x"))
    turn = [HumanMessage("b", id="2"), tool_call("search_memory", "y", query="q")]
    assert tool_rounds_this_turn([*old, AIMessage("ok")]) == 1
    assert tool_rounds_this_turn([*old, AIMessage("ok"), *turn]) == 1
    assert tool_rounds_this_turn([*old, AIMessage("ok"), turn[0]]) == 0
    assert route_after_respond({"messages": turn}) == "tools"
    assert route_after_respond({"messages": [*turn, AIMessage("done")]}) == "trim_window"
    assert route_after_respond({"messages": []}) == "trim_window"


def test_tools_offered_follow_memory_tools_and_recall_mode(settings, make_context, services):
    from graph.tools import memory_tools, tools_for

    tools = memory_tools(services, settings=settings)

    def names(**kw) -> list[str]:
        return [t.name for t in tools_for(make_context(**kw), tools)]

    assert names() == ALL_TOOLS
    assert names(memory_tools=False) == []
    assert names(memory_tools=False, recall_mode="tool") == ["search_memory"]
