"""Reflection recovers from a failure: its prompt is bounded (issue 13, finding 8).

After a failed reflection the summaries since the last one keep piling up, and fallback
summaries are whole transcripts. With every one of them in the prompt, the prompt
outgrew the model's context and reflection failed at every later consolidation.
"""

from __future__ import annotations

import json
import uuid

from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, prompt_text
from tests.conftest import say

N_CTX = 4096


class ProviderBadRequest(Exception):
    """What an OpenAI-compatible client raises for a prompt over the context."""

    status_code = 400


def real_tokens(text: str) -> float:
    """Tokens as SmolLM2's tokenizer counts English (~4 characters a token)."""
    return len(text) / 4


class Reflector:
    """Fails the first reflection (a provider hiccup), then answers any prompt that fits."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, messages) -> str:
        text = prompt_text(messages)
        self.calls.append(text)
        if len(self.calls) == 1:
            raise RuntimeError("provider down")
        if real_tokens(text) > N_CTX:
            raise ProviderBadRequest(f"{int(real_tokens(text))} tokens exceed {N_CTX}")
        return json.dumps({"insight": "The user talks about long topics at length.", "facts": []})


def broken_summarizer(messages) -> str:
    raise RuntimeError("summarizer down: the whole transcript is stored")


async def test_reflection_succeeds_again_after_a_failure_with_a_bounded_prompt(
    graph_for, make_context, services
):
    reflector = Reflector()
    model = ScriptedChatModel(
        handlers={"reflect": reflector, "summarize": broken_summarizer},
        profile={"max_input_tokens": N_CTX},
    )
    settings = Settings().override(
        window_size=2, summary_batch=2, reflect_after=4, fact_rules="off"
    )
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    paragraph = "Tell me more about the long history of the river valley and its towns. "
    for i in range(9):  # each turn evicts one turn of ~4,000 characters: one raw summary
        await say(agent, ctx, thread, f"Topic {i}. " + paragraph * 55)
        if await services.memories.list(ctx.user_id, kind="reflection"):
            break

    assert len(reflector.calls) >= 2, "reflection was tried again after its failure"
    reflections = await services.memories.list(ctx.user_id, kind="reflection")
    assert len(reflections) == 1, (
        f"no reflection after {len(reflector.calls)} tries; prompt tokens: "
        f"{[int(real_tokens(c)) for c in reflector.calls]}"
    )
    # every prompt stayed within the model's context, however many summaries waited
    assert all(real_tokens(c) <= N_CTX for c in reflector.calls)
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    assert len(summaries) > 4 and set(reflections[0].source_ids) <= {s.id for s in summaries}
    assert reflections[0].source_ids, "the reflection cites the summaries it read"
