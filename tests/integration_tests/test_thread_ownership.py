"""Thread ownership under abuse: an intruder's rejected turn on another user's thread
neither deletes the owner's messages nor ever reaches the owner's memory."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langchain_core.messages import HumanMessage

from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.threads import REJECTED_TTL_S
from memory_graph_agent.testing import ScriptedChatModel
from memory_graph_agent.turn.validation import ThreadOwnershipError, discard_rejected
from tests.conftest import say


def _id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


def _config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


async def _ids_in_checkpoint(agent, thread: str) -> list[str]:
    return [m.id for m in (await agent.aget_state(_config(thread))).values["messages"]]


async def _everything_of(services, user: str, thread: str) -> str:
    """The user's window, backlog, episodes, summaries and profile, as one text."""
    parts = [m.content for m in await services.window.window(user, thread)]
    parts += [m.content for _, m in await services.window.pending(user, thread)]
    parts += [m.content for m in await services.episodes.history(user)]
    parts += [m.text for m in await services.memories.list(user, limit=1000)]
    parts.append(json.dumps(await services.profile.get(user)))
    return "\n".join(parts)


async def test_a_rejected_intruder_lists_and_discards_only_its_own_messages(agent, make_context):
    thread = _id("t")
    await say(agent, make_context(), thread, "my locker code is 4417")
    owner_ids = await _ids_in_checkpoint(agent, thread)
    intruder = make_context(user_id=_id("u"))
    with pytest.raises(ThreadOwnershipError) as rejected:
        await say(agent, intruder, thread, "what is the locker code?")
    assert len(rejected.value.message_ids) == 1
    assert not set(rejected.value.message_ids) & set(owner_ids), "owner's messages listed"
    assert await discard_rejected(agent, _config(thread), rejected.value) == 1
    assert await _ids_in_checkpoint(agent, thread) == owner_ids


async def test_cli_refuses_a_thread_claimed_by_a_turn_that_did_not_finish(
    agent, make_context, services, monkeypatch, capsys
):
    """The owner's only trace is the ``owner:`` key (their turn failed at the model): the
    CLI must still refuse another user's ``--thread`` and keep the owner's message."""
    from memory_graph_agent.cli.main import main
    from memory_graph_agent.services.models import register_chat_model
    from nodes.respond import ModelUnavailableError

    def down(messages):
        raise RuntimeError("provider down")

    thread = _id("t")
    owner = make_context(model_obj=ScriptedChatModel(handlers={"reply": down}))
    with pytest.raises(ModelUnavailableError):
        await say(agent, owner, thread, "my PIN is 8812, remember it")
    owner_ids = await _ids_in_checkpoint(agent, thread)
    assert len(owner_ids) == 1

    model = ScriptedChatModel()
    monkeypatch.setenv("MODEL", register_chat_model(_id("fake"), model))
    command = ["send", "--user", _id("ub"), "--thread", thread, "hi"]
    assert await asyncio.to_thread(main, command) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "belongs to another user" in out, out
    assert await _ids_in_checkpoint(agent, thread) == owner_ids, "the owner's message was deleted"
    assert model.prompts == []


async def test_an_intruders_rejected_turn_never_reaches_the_owners_memory(
    graph_for, make_context, services
):
    thread, model = _id("t"), ScriptedChatModel()
    settings = Settings().override(window_size=2, summary_batch=2, fact_rules="on")
    owner = make_context(model_obj=model)
    agent = graph_for(settings)
    await say(agent, owner, thread, "My name is Alice and I live in Paris.")
    intruder = make_context(user_id=_id("u"), model_obj=ScriptedChatModel())
    with pytest.raises(ThreadOwnershipError):
        await say(agent, intruder, thread, "My name is Mallory and I live in Mordor.")
    for i in range(4):  # the window (2) overflows: summaries, episodes, profile facts
        state = await say(agent, owner, thread, f"Tell me about volcano number {i}.")
        assert not any("Mallory" in str(m.content) for m in state["messages"])
    assert not any("Mallory" in str(m.content) for p in model.prompts for m in p)
    stored = await _everything_of(services, owner.user_id, thread)
    assert "Alice" in stored and "volcano number 3" in stored  # the owner's memory is there
    assert "Mallory" not in stored and "Mordor" not in stored


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda owner_ids: [HumanMessage("bad \x00 byte")], id="invalid_new_message"),
        pytest.param(
            lambda owner_ids: [HumanMessage("My name is Mallory.", id=owner_ids[0])],
            id="owner_message_replaced_by_id",
        ),
    ],
)
async def test_an_intruders_forged_turn_neither_wedges_nor_enters_the_owners_thread(
    agent, make_context, services, forge
):
    thread, model = _id("t"), ScriptedChatModel()
    owner = make_context(model_obj=model)
    await say(agent, owner, thread, "My name is Alice.")
    owner_ids = await _ids_in_checkpoint(agent, thread)
    intruder = make_context(user_id=_id("u"), model_obj=ScriptedChatModel())
    with pytest.raises(ThreadOwnershipError) as rejected:
        await agent.ainvoke({"messages": forge(owner_ids)}, _config(thread), context=intruder)
    assert not set(rejected.value.message_ids) & set(owner_ids)
    state = await say(agent, owner, thread, "What is my name?")  # answered, not rejected
    assert [m.id for m in state["messages"][: len(owner_ids)]] == owner_ids
    assert state["messages"][0].content == "My name is Alice."
    assert not any("Mallory" in str(m.content) for p in model.prompts for m in p)
    assert "Mallory" not in await _everything_of(services, owner.user_id, thread)


async def test_ownership_survives_a_redis_that_lost_the_threads_keys(agent, make_context, services):
    """Redis restarted without its data (or the thread was written while Redis was down):
    the thread has no owner key, but its first writer is in the episodic log."""
    thread = _id("t")
    owner = make_context()
    await say(agent, owner, thread, "my locker code is 4417")
    prefix = services.keys.prefix
    lost = [f"{prefix}:{kind}:{owner.user_id}:{thread}" for kind in ("window", "seen")]
    await services.redis.delete(f"{prefix}:owner:{thread}", *lost)
    intruder_model = ScriptedChatModel()
    intruder = make_context(user_id=_id("u"), model_obj=intruder_model)
    with pytest.raises(ThreadOwnershipError):
        await say(agent, intruder, thread, "what is the locker code?")
    assert intruder_model.prompts == []
    assert await services.threads.owner(thread) == owner.user_id
    state = await say(agent, owner, thread, "and now?")  # the owner goes on
    assert state["messages"][-1].type == "ai"


async def test_an_intruder_cannot_bring_back_an_evicted_owner_message_with_other_text(
    graph_for, make_context, services
):
    thread, model = _id("t"), ScriptedChatModel()
    settings = Settings().override(window_size=2)
    owner = make_context(model_obj=model)
    agent = graph_for(settings)
    first = await say(agent, owner, thread, "My name is Alice.")
    evicted = first["messages"][0].id
    await say(agent, owner, thread, "I like tea.")  # the first turn leaves the window
    assert evicted not in await _ids_in_checkpoint(agent, thread)
    intruder = make_context(user_id=_id("u"), model_obj=ScriptedChatModel())
    forged = {"messages": [HumanMessage("My name is Mallory.", id=evicted)]}
    with pytest.raises(ThreadOwnershipError):
        await agent.ainvoke(forged, _config(thread), context=intruder)
    state = await say(agent, owner, thread, "What is my name?")
    assert evicted not in [m.id for m in state["messages"]]
    assert not any("Mallory" in str(m.content) for p in model.prompts for m in p)
    assert "Mallory" not in await _everything_of(services, owner.user_id, thread)


async def test_the_ids_of_rejected_turns_expire_after_the_last_rejection(
    agent, make_context, services
):
    """``rejected:{thread}`` has a lifetime: an abandoned thread's set does not stay forever."""
    thread = _id("t")
    await say(agent, make_context(), thread, "My name is Alice.")
    key = services.keys.rejected(thread)
    intruder = make_context(user_id=_id("u"))
    for text in ("I am Mallory.", "Still Mallory."):
        with pytest.raises(ThreadOwnershipError):
            await say(agent, intruder, thread, text)
        await services.redis.expire(key, 60)  # time passes; the next rejection renews it
    with pytest.raises(ThreadOwnershipError):
        await say(agent, intruder, thread, "Mallory again.")
    assert await services.redis.scard(key) == 3
    assert REJECTED_TTL_S - 60 < await services.redis.ttl(key) <= REJECTED_TTL_S
