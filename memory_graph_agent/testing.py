"""Test your agent without a model: a scripted chat model that answers by the call's purpose.

Every memory model call declares what it is for with the run tag ``prompt:<purpose>``
(`memory_graph_agent.prompting.llm.tagged`: ``summarize``, ``extract_facts``, ``consolidate``,
``reflect``); the reply of the ``respond`` node carries no such tag and counts as
``reply``. `ScriptedChatModel` reads that tag from the call's run manager (or, on the
streaming paths where LangChain passes none, from the config the call was made with)
and answers with the handler of that purpose: `DEFAULT_HANDLERS`, overridable per purpose
(``handlers={"reflect": ...}``) or for every purpose at once (``handler=...``). It never
guesses the purpose from the prompt's words. The default handlers behave like a tiny but
faithful model: the summary quotes the user, facts come from plain self-statements, the
reflection invents nothing, consolidation discards exact repeats only.

It records what it saw (``prompts``, ``purposes``, ``tools_seen``), supports
``with_structured_output`` (the answer is parsed as JSON into the schema), ``bind_tools``
(the tools travel with each call, like a real provider's) and streaming. The project's
own tests and benchmarks use this one fake.

Example, a reply scripted and a memory call left to the defaults::

    >>> from memory_graph_agent.testing import REPLY, ScriptedChatModel
    >>> model = ScriptedChatModel(handlers={REPLY: lambda messages: "Hi Ann!"})
    >>> model.invoke("Hello, my name is Ann Lee").content
    'Hi Ann!'
    >>> model.invoke("[10:02] human: hi", {"tags": ["prompt:summarize"]}).content
    'The user said: hi'
    >>> model.purposes
    ['reply', 'summarize']

In a graph, register it and name it as the context's model (the agent then runs every
node for real, against your Redis and Postgres)::

    from memory_graph_agent.services.models import register_chat_model

    spec = register_chat_model("my-fake", ScriptedChatModel())
    context = Context(user_id="ann", model=spec)  # graph.context.Context

Only langchain_core and pydantic are imported here: no graph, no node, no store.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig, RunnableLambda, ensure_config
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

Handler = Callable[[list[BaseMessage]], "str | AIMessage"]
"""Computes the answer from the prompt: a text, or an `AIMessage` (e.g. with tool calls)."""

PURPOSE_TAG = "prompt:"
"""Prefix of the run tag that names a model call's purpose (``prompt:summarize``)."""
REPLY = "reply"
"""The purpose of an untagged call: the answer to the user (the ``respond`` node)."""
PURPOSES = ("summarize", "extract_facts", "consolidate", "reflect", REPLY)

_purpose: ContextVar[str] = ContextVar("fake_model_purpose", default=REPLY)
"""The purpose of the call being answered (read by `default_handler`)."""
_entry_tags: ContextVar[tuple[str, ...] | None] = ContextVar("fake_model_tags", default=None)
"""Tags of the config the running public call (``invoke``/``stream``...) was made with."""


def purpose_of(tags: Sequence[str] | None) -> str:
    """The purpose named by a ``prompt:<purpose>`` tag among ``tags``; ``reply`` if none."""
    for tag in tags or ():
        if tag.startswith(PURPOSE_TAG):
            return tag[len(PURPOSE_TAG) :]
    return REPLY


def current_purpose() -> str:
    """The purpose of the call the fake model is answering (``reply`` outside a call)."""
    return _purpose.get()


def block(prompt: str, tag: str) -> str:
    """The content of the ``<tag>`` fence of a prompt."""
    return prompt.split(f"\n<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _block_or_all(prompt: str, tag: str) -> str:
    return block(prompt, tag) if f"\n<{tag}>\n" in prompt else prompt


def prompt_text(messages: list[BaseMessage]) -> str:
    """Every message's content, one after the other."""
    return "\n".join(str(m.content) for m in messages)


# ---------------------------------------------------------------- default handlers

_IDENTITY = re.compile(r"[Mm]y name is ([A-Z][a-z]+(?: [A-Z][a-z]+)?)")
_CITY = re.compile(r"\bin ([A-Z][a-z]+)\b")
_PREFER = re.compile(r"I prefer ([A-Z][A-Za-z+#]*)")
_CANDIDATE = re.compile(r"^- id=(\S+) \([^)]*\) (.*)$", re.MULTILINE)


def summarize_answer(messages: list[BaseMessage]) -> str:
    """Quote what the human said in the ``<conversation>`` fence."""
    body = _block_or_all(prompt_text(messages), "conversation")
    said = [ln.split(": ", 1)[1] for ln in body.strip().splitlines() if "] human: " in ln]
    return "The user said: " + " | ".join(said)


def extract_facts_answer(messages: list[BaseMessage]) -> str:
    """JSON facts from plain self-statements (name, city, preferred language) of the summary."""
    text = _block_or_all(prompt_text(messages), "summary")
    facts = []
    if m := _IDENTITY.search(text):
        facts.append({"key": "name", "value": m.group(1), "importance": 0.95})
    if m := _CITY.search(text):
        facts.append({"key": "city", "value": m.group(1), "importance": 0.8})
    if m := _PREFER.search(text):
        facts.append({"key": "preferred_language", "value": m.group(1), "importance": 0.7})
    return json.dumps({"facts": facts})


def consolidate_answer(messages: list[BaseMessage]) -> str:
    """Discard an exact repeat of an existing memory, keep anything else (JSON decision)."""
    text = prompt_text(messages)
    new = " ".join(block(text, "new").split()).casefold()
    for m in _CANDIDATE.finditer(block(text, "existing")):
        if " ".join(m.group(2).split()).casefold() == new:
            return json.dumps({"action": "discarded", "target_id": m.group(1)})
    return json.dumps({"action": "created", "target_id": "", "reason": "different"})


def reflect_answer(messages: list[BaseMessage]) -> str:
    """A JSON insight naming nothing (no capitalised word but the first), and no fact."""
    insight = "Over many conversations the user showed stable preferences and goals."
    return json.dumps({"insight": insight, "facts": []})


def reply_answer(messages: list[BaseMessage]) -> str:
    """The answer to the user: how many messages the prompt held."""
    return f"ok ({len(messages)} messages seen)"


DEFAULT_HANDLERS: dict[str, Handler] = {
    "summarize": summarize_answer,
    "extract_facts": extract_facts_answer,
    "consolidate": consolidate_answer,
    "reflect": reflect_answer,
    REPLY: reply_answer,
}
"""The default answer of each purpose."""


def default_handler(messages: list[BaseMessage]) -> str | AIMessage:
    """The default answer for the purpose of the call being answered (`current_purpose`).

    For handlers that script one purpose and leave the others to the defaults.
    """
    return DEFAULT_HANDLERS[current_purpose()](messages)


def tool_call(name: str, call_id: str | None = None, **args: Any) -> AIMessage:
    """An AI message calling one tool, for handlers that script tool use."""
    call_id = call_id or f"call-{uuid.uuid4().hex[:8]}"
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


# --------------------------------------------------------------------------- model


def _config_tags(config: RunnableConfig | None) -> tuple[str, ...]:
    """The tags a call made with ``config`` runs with (its own and inherited ones)."""
    config = ensure_config(config)
    tags = list(config.get("tags") or [])
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        tags += callbacks.inheritable_tags
    return tuple(tags)


@contextmanager
def _entry(config: RunnableConfig | None) -> Iterator[None]:
    token = _entry_tags.set(_config_tags(config))
    try:
        yield
    finally:
        _entry_tags.reset(token)


class ScriptedChatModel(GenericFakeChatModel):
    """A `GenericFakeChatModel` whose answer is computed from the prompt, per purpose.

    ``handler``, when set, answers every purpose (it may call `default_handler` for the
    purposes it does not script); otherwise ``handlers[purpose]`` answers, falling back to
    `DEFAULT_HANDLERS`. A handler may raise to simulate provider failures, or return an
    `AIMessage` with ``tool_calls``. Unless ``record`` is off, ``prompts`` keeps every
    prompt, ``purposes`` the purpose of each call and ``tools_seen`` the names of the
    tools bound to it (``[]`` without tools), index by index.
    """

    messages: Any = Field(default_factory=lambda: iter(()))
    handler: Handler | None = None
    handlers: dict[str, Handler] = Field(default_factory=dict)
    record: bool = True
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    purposes: list[str] = Field(default_factory=list)
    tools_seen: list[list[str]] = Field(default_factory=list)

    def _purpose(self, run_manager: Any) -> str:
        if run_manager is not None:
            return purpose_of(run_manager.tags)
        return purpose_of(_entry_tags.get())  # streaming paths pass no run manager

    def _answer(self, messages: list[BaseMessage], run_manager: Any, kwargs: dict) -> AIMessage:
        purpose = self._purpose(run_manager)
        if self.record:
            self.prompts.append(list(messages))
            self.purposes.append(purpose)
            self.tools_seen.append([t["function"]["name"] for t in kwargs.get("tools") or []])
        handler = self.handler or self.handlers.get(purpose) or DEFAULT_HANDLERS.get(purpose)
        if handler is None:
            raise LookupError(f"no handler for purpose {purpose!r} (known: {PURPOSES})")
        token = _purpose.set(purpose)
        try:
            answer = handler(messages)
        finally:
            _purpose.reset(token)
        return answer if isinstance(answer, AIMessage) else AIMessage(content=answer)

    # -- the chat model interface

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # noqa: ANN001
        message = self._answer(messages, run_manager, kwargs)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # noqa: ANN001
        return self._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        message = self._answer(messages, run_manager, kwargs)
        chunks = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(message.tool_calls)
        ]
        yield ChatGenerationChunk(
            message=AIMessageChunk(content=message.content, tool_call_chunks=chunks)
        )

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        for chunk in self._stream(messages, stop=stop, run_manager=run_manager, **kwargs):
            yield chunk

    # -- public entry points: remember the call's tags for the streaming paths

    def invoke(self, input, config=None, **kwargs):  # noqa: ANN001, ANN201, A002, D102
        with _entry(config):
            return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input, config=None, **kwargs):  # noqa: ANN001, ANN201, A002, D102
        with _entry(config):
            return await super().ainvoke(input, config, **kwargs)

    def stream(self, input, config=None, **kwargs) -> Iterator:  # noqa: ANN001, A002, D102
        with _entry(config):
            yield from super().stream(input, config, **kwargs)

    async def astream(self, input, config=None, **kwargs) -> AsyncIterator:  # noqa: ANN001, A002, D102
        with _entry(config):
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk

    def with_structured_output(self, schema, **kwargs):  # noqa: ANN001, ANN201
        """Parse the JSON answer into ``schema`` (what a JSON-mode provider returns).

        The config of the call (its ``prompt:<purpose>`` tag) reaches the inner call.
        """

        def parse(message: BaseMessage) -> Any:
            text = message.content if isinstance(message.content, str) else message.text
            if isinstance(schema, type) and issubclass(schema, BaseModel):
                return schema.model_validate_json(text)
            return json.loads(text)

        def run(messages: Any, config: RunnableConfig) -> Any:
            return parse(self.invoke(messages, config))

        async def arun(messages: Any, config: RunnableConfig) -> Any:
            return parse(await self.ainvoke(messages, config))

        return RunnableLambda(run, afunc=arun, name="structured_output")

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN201
        """Like a real provider: the tools travel with each call (recorded in tools_seen)."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    # -- what the model saw

    def prompts_for(self, purpose: str) -> list[list[BaseMessage]]:
        """The prompts of the calls made for ``purpose``, in order."""
        return [p for p, seen in zip(self.prompts, self.purposes, strict=True) if seen == purpose]

    def system_prompts(self) -> list[str]:
        """The system prompts of the reply calls (the ``respond`` node), in order."""
        return [str(p[0].content) for p in self.prompts_for(REPLY) if p and p[0].type == "system"]


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them.

    A `Context` field left at its default reads the variable of its name, upper-cased;
    `memory_graph_agent.settings.Settings.from_env` reads the deployment's.
    """
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
