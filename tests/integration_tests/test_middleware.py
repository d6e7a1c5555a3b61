"""`MemoryMiddleware` in a LangChain ``create_agent`` agent, on real Redis and Postgres.

The agent's model and memory's model are the purpose-keyed fake (`memory_graph_agent.testing`); the
agent is built through the public API (``from memory_graph_agent import ...``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool

from memory_graph_agent import MemoryMiddleware, MissingUserError, ProfileView
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, block, default_handler, tool_call
from memory_graph_agent.turn.validation import InvalidInputError, ThreadOwnershipError
from tests.integration_tests.memory_child import kill_inside_a_memory_run
from tests.integration_tests.test_durability import _assert_exactly_once

SECRET = "SECRET-MEMORY-TOKENS"


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _spec(model: ScriptedChatModel) -> str:
    return register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", model)


async def _say(agent: Any, user: Any, thread: str, text: str) -> dict:
    context = None if user is None else {"user_id": user}
    return await agent.ainvoke(
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=context
    )


def _agent(checkpointer: Any, model: ScriptedChatModel, memory: MemoryMiddleware, tools=()) -> Any:
    return create_agent(
        model,
        list(tools),
        system_prompt="You are Bob, a terse assistant.",
        middleware=[memory],
        checkpointer=checkpointer,
    )


@pytest.fixture
def model() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def memory(services, model) -> MemoryMiddleware:
    return MemoryMiddleware(
        services, model=_spec(model), settings=Settings().override(window_size=4, summary_batch=2)
    )


async def test_a_new_thread_recalls_what_an_old_one_said_and_another_user_gets_nothing(
    services, checkpointer, model, memory, user_id
):
    agent = _agent(checkpointer, model, memory)
    old = _thread()
    first = await _say(agent, user_id, old, "My name is Zhang San and I live in Berlin.")
    said = first["messages"][0].id
    for i in range(4):
        state = await _say(agent, user_id, old, f"unrelated question {i}")
    await memory.drain()
    # it left the window, and the agent's state: it is in memory now, exactly once
    assert said not in {m.id for m in await services.window.window(user_id, old)}
    assert said not in {m.id for m in state["messages"]}
    await _assert_exactly_once(services, user_id, old)
    await _say(agent, user_id, _thread(), "Where do I live?")
    system = model.system_prompts()[-1]
    assert system.startswith("You are Bob, a terse assistant.")  # the agent's own prompt
    assert "Berlin" in block(system, "memories") and "Berlin" in block(system, "profile")
    stranger = f"other-{uuid.uuid4().hex[:8]}"
    await _say(agent, stranger, _thread(), "Where do I live?")
    system = model.system_prompts()[-1]
    assert "Berlin" not in system and "Zhang" not in system
    assert block(system, "profile").strip() == "(none)" or "Berlin" not in block(system, "profile")


async def test_a_tool_call_never_leaves_the_window_without_its_result_and_all_is_summarized_once(
    services, checkpointer, user_id
):
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def reply(messages: list[BaseMessage]) -> str | AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "add" in last.text:
            return tool_call("add", a=2, b=3)
        return default_handler(messages)

    model = ScriptedChatModel(handlers={"reply": reply})
    memory = MemoryMiddleware(
        services, model=_spec(model), settings=Settings().override(window_size=3, summary_batch=2)
    )
    agent = _agent(checkpointer, model, memory, [add])
    thread = _thread()
    for i in range(6):
        await _say(agent, user_id, thread, f"please add {i}" if i % 2 else f"hello {i}")
        window = await services.window.window(user_id, thread)
        kept = {m.id for m in window}
        logged = await services.episodes.history(user_id, thread)
        for i, message in enumerate(logged):  # a tool call stays on its results' side
            if message.role == "tool":
                call = next(m for m in reversed(logged[:i]) if m.role == "ai")
                assert (message.id in kept) == (call.id in kept), [m.role for m in window]
        assert window[0].role != "tool"
    assert any(m.role == "tool" for m in logged) and len(kept) < len(logged)
    await memory.drain()
    await _assert_exactly_once(services, user_id, thread)


async def test_the_reply_streams_and_no_memory_token_reaches_the_stream(
    services, checkpointer, user_id
):
    model = ScriptedChatModel(handlers={"summarize": lambda _: f"{SECRET} summary"})
    for mode in ("inline", "background"):
        memory = MemoryMiddleware(
            services,
            model=_spec(model),
            settings=Settings().override(window_size=2, summary_batch=2, memory_mode=mode),
        )
        agent = _agent(checkpointer, model, memory)
        thread, streamed = _thread(), []
        for i in range(4):
            tokens = []
            async for chunk, meta in agent.astream(
                {"messages": [HumanMessage(f"number {i}")]},
                {"configurable": {"thread_id": thread}},
                context={"user_id": user_id},
                stream_mode="messages",
            ):
                tokens.append(chunk.text)
            streamed.append("".join(tokens))
        await memory.drain()
        assert all(s.startswith("ok (") for s in streamed), streamed
        assert not any(SECRET in s for s in streamed)
        summaries = await services.memories.list(user_id, kind="summary", limit=100)
        assert any(s.thread_id == thread for s in summaries), mode  # memory did run


class RecordingProvider:
    """A provider of one's own: a dict of facts per user, recall of what was remembered."""

    def __init__(self) -> None:
        self.facts: dict[str, dict[str, str]] = {}
        self.calls: list[tuple[str, str]] = []

    async def profile(self, settings: Any) -> ProfileView:
        self.calls.append(("profile", settings.user_id))
        facts = self.facts.get(settings.user_id, {})
        return ProfileView({k: {"value": v, "importance": 0.9} for k, v in facts.items()})

    async def recall(self, settings: Any, thread_id: str, query: str, budget: int) -> list:
        self.calls.append(("recall", settings.user_id))
        return [
            {"id": f"{settings.user_id}-{k}", "kind": "summary", "text": f"custom: {k} is {v}",
             "created_at": "2026-01-01T00:00:00+00:00", "source_ids": [], "thread_id": None}
            for k, v in self.facts.get(settings.user_id, {}).items()
        ]  # fmt: skip

    async def remember(self, settings: Any, key: str, fact: str, importance: float, ids) -> str:
        self.calls.append(("remember", settings.user_id))
        self.facts.setdefault(settings.user_id, {})[key] = fact
        return f"created {key}"

    async def forget(self, settings: Any, ref: str) -> str:
        self.calls.append(("forget", settings.user_id))
        return "forgot" if self.facts.get(settings.user_id, {}).pop(ref, None) else "nothing"


async def test_a_custom_provider_is_the_one_called_by_the_prompt_and_the_tools(
    services, checkpointer, user_id
):
    def reply(messages: list[BaseMessage]) -> str | AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.text.startswith("remember"):
            return tool_call("remember", key="pet", fact="a cat named Tom", importance=0.8)
        return default_handler(messages)

    model = ScriptedChatModel(handlers={"reply": reply})
    provider = RecordingProvider()
    memory = MemoryMiddleware(services, provider=provider, tools=True, model=_spec(model))
    agent = _agent(checkpointer, model, memory)
    await _say(agent, user_id, _thread(), "remember my pet")
    assert ("remember", user_id) in provider.calls
    assert provider.facts == {user_id: {"pet": "a cat named Tom"}}
    assert sorted(model.tools_seen[0]) == ["forget", "remember", "search_memory"]  # no pin
    await _say(agent, user_id, _thread(), "what pet do I have?")
    system = model.system_prompts()[-1]
    assert "custom: pet is a cat named Tom" in block(system, "memories")
    assert "pet: a cat named Tom" in block(system, "profile")
    assert {("profile", user_id), ("recall", user_id)} <= set(provider.calls)
    assert await services.profile.get(user_id) == {}  # our memory was not written


async def test_the_memory_tools_act_for_the_runs_own_user(services, checkpointer, user_id):
    def reply(messages: list[BaseMessage]) -> str | AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return tool_call("remember", key="city", fact="Turin", importance=0.9)
        return default_handler(messages)

    model = ScriptedChatModel(handlers={"reply": reply})
    memory = MemoryMiddleware(services, tools=True, model=_spec(model))
    await _say(_agent(checkpointer, model, memory), user_id, _thread(), "I moved")
    assert sorted(model.tools_seen[0]) == ["forget", "pin", "remember", "search_memory", "unpin"]
    assert (await services.profile.get(user_id))["city"]["value"] == "Turin"


async def test_bad_input_gets_a_clear_error_and_loses_nothing(
    services, checkpointer, model, memory, user_id
):
    agent = _agent(checkpointer, model, memory)
    thread = _thread()
    with pytest.raises(MissingUserError, match="user_id"):
        await _say(agent, None, thread, "I have no name")
    with pytest.raises(MissingUserError):  # Context's placeholder is no user either
        await _say(agent, "default-user", thread, "I have no name")
    with pytest.raises(InvalidInputError, match="invalid user_id"):
        await _say(agent, "../../etc/passwd", thread, "hostile")
    assert await services.window.window(user_id, thread) == []  # nothing was written
    assert await services.profile.get("default-user") == {}
    # the refused turn's message is kept in the thread: it is answered with the next turn
    await _say(agent, user_id, thread, "here I am")
    answered = [m.text for m in model.prompts[-1] if isinstance(m, HumanMessage)]
    assert "I have no name" in answered and "here I am" in answered
    logged = [m.content for m in await services.episodes.history(user_id, thread)]
    assert "here I am" in logged and "I have no name" in logged  # in the window or gone on
    # a thread of someone else's: refused, and the owner's thread is left as it was
    intruder = f"intruder-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ThreadOwnershipError, match="belongs to another user"):
        await _say(agent, intruder, thread, "let me read this")
    owners = [m.content for m in await services.episodes.history(user_id, thread)]
    assert "let me read this" not in owners
    state = await _say(agent, user_id, thread, "still mine")
    assert "let me read this" not in [m.text for m in state["messages"]]
    assert any(e["kind"] == "dropped_rejected" for e in state["memory_events"])
    owners = [m.content for m in await services.episodes.history(user_id, thread)]
    assert "let me read this" not in owners and "still mine" in owners
    assert await services.window.window(intruder, thread) == []


async def test_a_too_long_message_is_refused_and_the_thread_goes_on_without_it(
    services, checkpointer, model, memory, user_id
):
    """create_agent writes the input into the thread before ``before_agent`` refuses it:
    the next turn of the thread is answered, and the refused message is stored nowhere."""
    agent = _agent(checkpointer, model, memory)
    thread, huge = _thread(), "bees " * 40_000  # 200,000 characters
    await _say(agent, user_id, thread, "a valid first turn")
    with pytest.raises(InvalidInputError, match="200,000 characters long; the limit is 32,000"):
        await _say(agent, user_id, thread, huge)
    for i in range(3):  # the window (4) overflows into memory
        state = await _say(agent, user_id, thread, f"a valid turn {i}")
        assert isinstance(state["messages"][-1], AIMessage)
    await memory.drain()
    assert huge not in [m.text for m in state["messages"]]
    assert not any(huge in str(m.content) for prompt in model.prompts for m in prompt)
    stored = [m.content for m in await services.window.window(user_id, thread)]
    stored += [m.content for _, m in await services.window.pending(user_id, thread)]
    stored += [m.content for m in await services.episodes.history(user_id, thread)]
    stored += [m.text for m in await services.memories.list(user_id, limit=1000)]
    assert "a valid first turn" in "\n".join(stored)
    assert not [text for text in stored if huge in text]


async def test_every_evicted_message_is_summarized_once_when_the_process_dies_in_a_memory_run(
    services, checkpointer, model, user_id
):
    thread = _thread()
    held = await kill_inside_a_memory_run(services, user_id, thread, "middleware")
    memory = MemoryMiddleware(
        services, model=_spec(model), settings=Settings().override(window_size=2, summary_batch=2)
    )
    agent = _agent(checkpointer, model, memory)
    for i in range(4):
        await _say(agent, user_id, thread, f"number {i} after the crash")
    await memory.drain()
    await _assert_exactly_once(services, user_id, thread)
    summaries = await services.memories.list(user_id, kind="summary", limit=100)
    assert set(held) <= {i for s in summaries for i in s.source_ids}  # the dead run's batch


def test_the_middleware_refuses_bad_configuration(services) -> None:
    with pytest.raises(TypeError, match="user_id"):
        MemoryMiddleware(services, user_id="ada")  # the user comes from each run
    with pytest.raises(ValueError, match="unknown memory provider"):
        MemoryMiddleware(services, provider="deep")
    with pytest.raises(TypeError):
        MemoryMiddleware(services, window_sise=3)


async def test_the_runs_recall_mode_and_memory_tools_mean_what_they_mean_in_our_graph(
    services, checkpointer, user_id
):
    model = ScriptedChatModel()
    settings = Settings().override(window_size=2, summary_batch=2)
    memory = MemoryMiddleware(services, model=_spec(model), settings=settings, tools=True)
    agent = _agent(checkpointer, model, memory)
    thread, config = _thread(), {"configurable": {"thread_id": _thread()}}
    for text in ("I keep bees on my roof.", "one", "two", "three"):
        await _say(agent, user_id, thread, text)
    await memory.drain()

    flat = {"user_id": user_id, "recall_mode": "flat", "memory_tools": False}
    ask = {"messages": [HumanMessage("completely unrelated words")]}
    state = await agent.ainvoke(ask, config, context=flat)
    assert "bees" in block(model.system_prompts()[-1], "memories"), "no search: the hottest"
    assert model.tools_seen[-1] == [], "memory_tools=False: the model sees no memory tool"
    assert any("(flat)" in e["text"] for e in state["memory_events"])

    searched = {"user_id": user_id, "recall_mode": "tool"}
    state = await agent.ainvoke({"messages": [HumanMessage("bees?")]}, config, context=searched)
    assert state["memory_recalled"] == [], "tool mode: the model searches, nothing up front"
    assert "search_memory" in model.tools_seen[-1]


async def test_a_run_choice_the_middleware_cannot_honour_is_refused_by_name(
    services, checkpointer, model, memory, user_id
):
    agent = _agent(checkpointer, model, memory)  # built without tools
    thread = _thread()
    config = {"configurable": {"thread_id": thread}}
    turn = {"messages": [HumanMessage("hello")]}
    with pytest.raises(InvalidInputError, match="recall_mode='tool'"):
        await agent.ainvoke(turn, config, context={"user_id": user_id, "recall_mode": "tool"})
    with pytest.raises(InvalidInputError, match="recall_mode must be"):
        await agent.ainvoke(turn, config, context={"user_id": user_id, "recall_mode": "deep"})
    custom = MemoryMiddleware(services, provider=RecordingProvider(), model=memory.model)
    with pytest.raises(InvalidInputError, match="recall_mode='flat'"):
        await _agent(checkpointer, model, custom).ainvoke(
            turn, {"configurable": {"thread_id": _thread()}},
            context={"user_id": user_id, "recall_mode": "flat"},
        )  # fmt: skip
    assert await services.window.window(user_id, thread) == [], "nothing was written"


async def test_a_session_end_archives_the_whole_thread_into_one_summary_each(
    services, checkpointer, user_id
):
    model = ScriptedChatModel()
    memory = MemoryMiddleware(
        services, model=_spec(model), settings=Settings().override(window_size=4, summary_batch=3)
    )
    agent = _agent(checkpointer, model, memory)
    thread = _thread()
    for i in range(5):
        await _say(agent, user_id, thread, f"thing number {i} about my garden")
    assert await services.window.window(user_id, thread)  # some of it is still in the window
    replies = len(model.prompts_for("reply"))
    config = {"configurable": {"thread_id": thread}}
    state = await agent.ainvoke({"end_session": True}, config, context={"user_id": user_id})
    assert len(model.prompts_for("reply")) == replies  # archived, not answered
    assert state["messages"] == [] and not state["end_session"]
    assert await services.window.window(user_id, thread) == []
    assert await services.queue.backlog(user_id, thread) == 0
    await memory.drain()
    await _assert_exactly_once(services, user_id, thread)
    logged = {m.id for m in await services.episodes.history(user_id, thread)}
    summaries = await services.memories.list(user_id, kind="summary", limit=100)
    assert {i for s in summaries for i in s.source_ids} == logged and len(logged) == 10
    # consumed: the thread's next turn is answered as usual
    state = await _say(agent, user_id, thread, "and one more thing")
    assert (
        state["messages"][-1].text.startswith("ok (") and len(model.prompts_for("reply")) > replies
    )


async def test_a_session_end_of_someone_elses_thread_is_refused_and_archives_nothing(
    services, checkpointer, model, memory, user_id
):
    agent = _agent(checkpointer, model, memory)
    thread = _thread()
    await _say(agent, user_id, thread, "my private thought")
    config = {"configurable": {"thread_id": thread}}
    with pytest.raises(ThreadOwnershipError):
        await agent.ainvoke({"end_session": True}, config, context={"user_id": "intruder-1"})
    assert [m.content for m in await services.window.window(user_id, thread)][0] == (
        "my private thought"
    )
    assert await services.memories.list(user_id, kind="summary", limit=10) == []


class BudgetProvider(RecordingProvider):
    """Records the token budget each recall was given."""

    def __init__(self) -> None:
        super().__init__()
        self.budgets: list[int] = []

    async def recall(self, settings: Any, thread_id: str, query: str, budget: int) -> list:
        self.budgets.append(budget)
        return await super().recall(settings, thread_id, query, budget)


async def test_back_to_a_thread_archived_while_idle_recall_gets_the_whole_budget(
    services, checkpointer, user_id
):
    from graph.context import Context
    from memory_graph_agent.prompting.budgets import recall_budget
    from tests.integration_tests.test_idle_threads import _age, _maintain

    model, provider = ScriptedChatModel(), BudgetProvider()
    spec = _spec(model)  # the maintenance pass summarizes with it too (no local model)
    memory = MemoryMiddleware(
        services, provider=provider, model=spec, settings=Settings().override(summary_batch=50)
    )
    agent = _agent(checkpointer, model, memory)
    thread = _thread()
    for text in ("I keep three beehives on my roof in Lyon. " * 20, "The bees make honey. " * 20):
        await _say(agent, user_id, thread, text)
    await _age(services, user_id, thread)
    state = await _maintain(services, Context(user_id=user_id, model=spec))
    assert [e["action"] for e in state["archived"]] == ["archived"]

    back = await _say(agent, user_id, thread, "What do my bees make?")

    assert [m.type for m in back["messages"]] == ["human", "ai"], "archived ones left the state"
    full = recall_budget(
        Settings().window.memory_token_budget, [HumanMessage("What do my bees make?")]
    )
    assert provider.budgets[-1] == full, "the archived messages no longer count as on screen"
