"""A turn the model cannot take never blocks the thread's next turn (issue 13, finding 6).

The fake model acts like a provider with a real context limit: it declares the limit in
its LangChain ``profile`` (as `ChatOpenAI` does for known models, and the local model
for its server's ``n_ctx``) and answers HTTP 400 when a prompt exceeds it, counted
with the rates SmolLM2's tokenizer really has (English ~0.25 tokens a character, CJK
~1.6, digits 1). It also refuses, as OpenAI does, an AI tool call without its results.
"""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, reply_answer
from nodes.respond import ModelUnavailableError
from tests.conftest import kinds, say

N_CTX = 4096


class ProviderBadRequest(Exception):
    """What an OpenAI-compatible client raises for a refused request."""

    status_code = 400


def real_tokens(text: str) -> float:
    """Tokens as SmolLM2's tokenizer counts them (measured rates)."""
    return sum(1.0 if c.isdigit() else 0.25 if ord(c) < 128 else 1.6 for c in text)


def provider_reply(messages: list[BaseMessage]) -> str:
    """Answer like a provider that checks the request before generating."""
    used = sum(real_tokens(str(m.content)) + 4 for m in messages)
    if used > N_CTX:
        raise ProviderBadRequest(f"Requested tokens ({int(used)}) exceed context window of {N_CTX}")
    answered: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            after = set()
            for follower in messages[i + 1 :]:
                if not isinstance(follower, ToolMessage):
                    break
                after.add(follower.tool_call_id)
            missing = {c["id"] for c in message.tool_calls} - after
            if missing:
                raise ProviderBadRequest(
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'. Missing: {sorted(missing)}"
                )
            answered |= after
        if isinstance(message, ToolMessage) and message.tool_call_id not in answered:
            raise ProviderBadRequest("tool message without a preceding tool call")
    return reply_answer(messages)


def provider() -> ScriptedChatModel:
    return ScriptedChatModel(
        handlers={"reply": provider_reply}, profile={"max_input_tokens": N_CTX}
    )


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _turns(agent, ctx, thread, texts):
    """Run each turn; return the answer or the error of each."""
    results = []
    for text in texts:
        try:
            state = await say(agent, ctx, thread, text)
            results.append(state)
        except ModelUnavailableError as exc:
            results.append(exc)
    return results


OVERSIZED = {
    "english_30k_chars": "All work and no play makes Jack a dull boy. " * 680,  # 29,920 chars
    "cjk_4k_chars": "我的名字是张三，我住在柏林。" * 300,  # 4,200 chars
}


@pytest.mark.parametrize("text", list(OVERSIZED.values()), ids=list(OVERSIZED))
async def test_an_oversized_message_is_answered_and_never_wedges_the_thread(
    agent, make_context, services, text
):
    model = provider()
    ctx = make_context(model_obj=model)  # context_window_tokens stays 8192: the model's is less
    thread = _thread()
    first, second, third = await _turns(
        agent, ctx, thread, [text, "A short question now.", "And another one."]
    )
    # the next turns are answered whatever happened to the oversized one ...
    assert not isinstance(second, Exception), f"the thread is wedged: {second}"
    assert not isinstance(third, Exception), f"the thread is wedged: {third}"
    # ... the oversized one too, from a view cut to the model's context, and says so
    assert not isinstance(first, Exception), f"the oversized turn failed: {first}"
    assert ("respond", "truncated") in kinds(first)
    for prompt in model.prompts_for("reply"):
        assert sum(real_tokens(str(m.content)) + 4 for m in prompt) <= N_CTX
    # nothing of the user's data is lost: the message is stored whole (the window's token
    # cap moved it on to the episode log and the queue)
    (said,) = [m.id for m in first["messages"] if m.type == "human"]
    (logged,) = await services.episodes.messages(ctx.user_id, thread, [said])
    assert logged.content == text


async def test_a_prompt_the_provider_refuses_as_too_long_never_blocks_the_next_turn(
    agent, make_context, services
):
    """Digits cost SmolLM2 a token each, 4 times the estimate: the estimate says the
    message fits, the provider refuses it. The turn is retried once with the current
    turn alone, cut hard, so neither it nor any later turn is refused again."""
    digits = "1234567890" * 1_200  # 12,000 chars: ~3,000 tokens estimated, 12,000 real
    model = provider()
    ctx = make_context(model_obj=model)
    thread = _thread()
    first, second = await _turns(agent, ctx, thread, [digits, "What did I just send?"])
    assert not isinstance(second, Exception), f"the thread is wedged: {second}"
    assert not isinstance(first, Exception), f"the refused turn failed: {first}"
    assert ("respond", "truncated") in kinds(first)
    window = await services.window.window(ctx.user_id, thread)
    assert [m.content for m in window if m.role == "human"] == [digits, "What did I just send?"]


async def test_a_dangling_tool_call_sent_by_a_client_never_fails_later_turns(
    graph_for, make_context, services
):
    """An AI message with tool_calls and no tool results (a client's history) would make
    OpenAI answer 400 on every turn: the prompt leaves such calls out, the state keeps them."""
    model = provider()
    settings = Settings().override(window_token_share=1.0)
    ctx = make_context(model_obj=model)  # the window keeps all three
    agent = graph_for(settings)
    thread = _thread()
    dangling = AIMessage(
        "Let me look that up.",
        id=f"ai-{uuid.uuid4().hex[:8]}",
        tool_calls=[{"name": "search_memory", "args": {"query": "x"}, "id": "call_dangling"}],
    )
    await say(agent, ctx, thread, "Hi, can you look something up?")
    config = {"configurable": {"thread_id": thread}}
    results = []
    for messages in ([dangling, HumanMessage("Hello?")], [HumanMessage("Still there?")]):
        try:
            results.append(await agent.ainvoke({"messages": messages}, config, context=ctx))
        except ModelUnavailableError as exc:
            results.append(exc)
    assert not any(isinstance(r, Exception) for r in results), results
    window = await services.window.window(ctx.user_id, thread)
    assert [m.id for m in window if m.tool_calls] == [dangling.id]
    humans = ["Hi, can you look something up?", "Hello?", "Still there?"]
    assert [m.content for m in window if m.role == "human"] == humans


async def test_an_oversized_message_summarized_later_never_wedges_the_thread(
    graph_for, make_context, services
):
    """When the message leaves the window, its summary (a raw-text fallback: the
    summarizer refuses the oversized transcript too) joins the thread summary of every
    later prompt. That summary is bounded in tokens, not only in words: CJK text has no
    spaces, so 4,000 characters are one 'word'."""
    model = ScriptedChatModel(
        handlers={"reply": provider_reply, "summarize": _refusing_summarizer},
        profile={"max_input_tokens": N_CTX},
    )
    settings = Settings().override(window_size=2, summary_batch=2, fact_rules="off")
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()
    texts = [OVERSIZED["cjk_4k_chars"], "Short one.", "Another.", "And a third.", "Last."]
    results = await _turns(agent, ctx, thread, texts)
    failed = [r for r in results if isinstance(r, Exception)]
    assert not failed, failed
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    assert any(OVERSIZED["cjk_4k_chars"] in s.text for s in summaries), "stored whole"


def _refusing_summarizer(messages: list[BaseMessage]) -> str:
    from memory_graph_agent.testing import summarize_answer

    used = sum(real_tokens(str(m.content)) + 4 for m in messages)
    if used > N_CTX:
        raise ProviderBadRequest(f"Requested tokens ({int(used)}) exceed context window")
    return summarize_answer(messages)
