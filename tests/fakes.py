"""Scripted fake chat models for tests: deterministic answers, recorded prompts."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

Handler = Callable[[list[BaseMessage]], "str | AIMessage"]
"""Computes the answer from the prompt: a text, or an `AIMessage` (e.g. with tool calls)."""


def block(prompt: str, tag: str) -> str:
    """The content of the ``<tag>`` fence of a system prompt."""
    return prompt.split(f"\n<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def prompt_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


_IDENTITY = re.compile(r"[Mm]y name is ([A-Z][a-z]+(?: [A-Z][a-z]+)?)")
_CITY = re.compile(r"\bin ([A-Z][a-z]+)\b")
_PREFER = re.compile(r"I prefer ([A-Z][A-Za-z+#]*)")


def default_handler(messages: list[BaseMessage]) -> str:
    """Behave like a tiny but faithful model for each of the agent's prompts."""
    text = prompt_text(messages)
    if text.startswith("Summarize this part of a conversation"):
        body = text.split("<conversation>", 1)[1].split("</conversation>", 1)[0]
        said = [ln.split(": ", 1)[1] for ln in body.strip().splitlines() if "] human: " in ln]
        return "The user said: " + " | ".join(said)
    if text.startswith("Extract durable facts"):
        facts = []
        if m := _IDENTITY.search(text):
            facts.append({"key": "name", "value": m.group(1), "importance": 0.95})
        if m := _CITY.search(text):
            facts.append({"key": "city", "value": m.group(1), "importance": 0.8})
        if m := _PREFER.search(text):
            facts.append({"key": "preferred_language", "value": m.group(1), "importance": 0.7})
        return json.dumps({"facts": facts})
    if text.startswith("Here are summaries of past conversations"):
        insight = "Over many conversations the user showed stable preferences and goals."
        return json.dumps({"insight": insight, "facts": []})
    if text.startswith("Compare a new memory"):
        # an exact repeat is discarded, anything else kept (the real model does better)
        new = " ".join(block(text, "new").split()).casefold()
        for m in _CANDIDATE.finditer(block(text, "existing")):
            if " ".join(m.group(2).split()).casefold() == new:
                return json.dumps({"action": "discarded", "target_id": m.group(1)})
        return json.dumps({"action": "created", "target_id": "", "reason": "different"})
    return f"ok ({len(messages)} messages seen)"


_CANDIDATE = re.compile(r"^- id=(\S+) \([^)]*\) (.*)$", re.MULTILINE)


class ScriptedChatModel(GenericFakeChatModel):
    """A `GenericFakeChatModel` whose answer is computed from the prompt.

    ``prompts`` keeps every prompt it received, so tests can assert on what the model
    saw, and ``tools_seen`` the names of the tools bound to each call (``[]`` without
    tools). A handler may raise to simulate provider failures, or return an `AIMessage`
    with ``tool_calls``.
    """

    messages: Any = Field(default_factory=lambda: iter(()))
    handler: Handler = default_handler
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    tools_seen: list[list[str]] = Field(default_factory=list)

    def _generate(
        self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs
    ) -> ChatResult:  # noqa: ANN001
        self.prompts.append(list(messages))
        self.tools_seen.append([t["function"]["name"] for t in kwargs.get("tools") or []])
        answer = self.handler(messages)
        message = answer if isinstance(answer, AIMessage) else AIMessage(content=answer)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # noqa: ANN001
        return self._generate(messages, stop=stop, **kwargs)

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        message = self._generate(messages, **kwargs).generations[0].message
        chunks = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(message.tool_calls)
        ]
        yield ChatGenerationChunk(
            message=AIMessageChunk(content=message.content, tool_call_chunks=chunks)
        )

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        for chunk in self._stream(messages, **kwargs):
            yield chunk

    def with_structured_output(self, schema, **kwargs):  # noqa: ANN001, ANN201
        def parse(messages: list[BaseMessage]):  # noqa: ANN202
            return schema.model_validate_json(self.invoke(messages).content)

        return RunnableLambda(parse)

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN201
        # Like a real provider: the tools travel with each call (recorded in tools_seen).
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def system_prompts(self) -> list[str]:
        """The system prompts of the respond calls, in order."""
        return [str(p[0].content) for p in self.prompts if p and p[0].type == "system"]


def tool_call(name: str, call_id: str | None = None, **args: Any) -> AIMessage:
    """An AI message calling one tool, for handlers that script tool use."""
    call_id = call_id or f"call-{uuid.uuid4().hex[:8]}"
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])
