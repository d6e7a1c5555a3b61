"""The benchmarks' chat models: the project's scripted fake, instant, paced or faulty.

Each is `memory_graph_agent.testing.ScriptedChatModel` (answers by the call's declared
purpose) keeping no record of prompts; `openai_app` serves a paced one over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from pydantic import Field

from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.testing import ScriptedChatModel


def _register(model: Any) -> tuple[str, Any]:
    name = f"bench-{type(model).__name__.removesuffix('ChatModel').lower()}-{uuid.uuid4().hex[:8]}"
    return register_chat_model(name, model), model


def register_instant_model() -> tuple[str, ScriptedChatModel]:
    """Register a fresh instant scripted model; returns (``registered:...`` spec, model)."""
    return _register(ScriptedChatModel(record=False))


class PacedChatModel(ScriptedChatModel):
    """The scripted fake at a realistic speed: a first-token delay, then a token rate.

    Every call (the reply and memory's summaries, decisions, facts, reflections) waits
    ``first_token_s``, then yields its answer one word-token at a time at
    ``tokens_per_s``; the reply is ``reply_tokens`` words. Sleeps, not CPU: like a hosted
    model, calls overlap. Non-streamed calls wait for the whole answer.
    """

    first_token_s: float = 0.3
    tokens_per_s: float = 40.0
    reply_tokens: int = 40
    record: bool = False

    def _answer(self, messages, run_manager, kwargs):  # noqa: ANN001, ANN202
        answer = super()._answer(messages, run_manager, kwargs)
        if self._purpose(run_manager) == "reply" and not answer.tool_calls:
            words = (str(answer.content).split() or ["ok"]) * self.reply_tokens
            answer = AIMessage(content=" ".join(words[: self.reply_tokens]), id=answer.id)
        return answer

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        result = self._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        n = len(str(result.generations[0].message.content).split())
        await asyncio.sleep(self.first_token_s + n / self.tokens_per_s)
        return result

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        message = self._answer(messages, run_manager, kwargs)
        await asyncio.sleep(self.first_token_s)
        words = str(message.content).split(" ")
        for i, word in enumerate(words):
            if i:
                await asyncio.sleep(1 / self.tokens_per_s)
            yield ChatGenerationChunk(message=AIMessageChunk(content=(" " if i else "") + word))
        if message.tool_calls:
            chunks = [
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(message.tool_calls)
            ]
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=chunks))


def register_paced_model(**speed: float) -> tuple[str, PacedChatModel]:
    """Register a fresh `PacedChatModel`; returns (``registered:...`` spec, model)."""
    return _register(PacedChatModel(**speed))


class FaultyChatModel(ScriptedChatModel):
    """The scripted fake with seeded random faults: errors and timeouts, reply or memory.

    A faulty reply raises ``RuntimeError``, or ``TimeoutError`` after ``reply_timeout_s``
    (a client's timeout); a faulty memory call (summary, facts, decisions, reflection)
    raises, or sleeps ``memory_hang_s`` so the caller's ``model_timeout_s`` fires. With
    ``hang_memory`` every memory call prints ``MEMORY-RUNNING`` and never returns (the
    worker `bench.soak_faults` is killed there). ``injected`` counts what was injected.
    """

    rates: dict[str, float] = Field(default_factory=dict)
    """``reply_error``, ``reply_timeout``, ``memory_error``, ``memory_timeout``: 0..1 each."""
    reply_timeout_s: float = 0.5
    memory_hang_s: float = 2.0
    hang_memory: bool = False
    seed: int = 0
    record: bool = False
    injected: dict[str, int] = Field(default_factory=dict)
    rng: Any = None

    async def _fault(self, run_manager: Any) -> None:
        if self.rng is None:
            self.rng = random.Random(self.seed)
        side = "reply" if self._purpose(run_manager) == "reply" else "memory"
        if side == "memory" and self.hang_memory:
            print("MEMORY-RUNNING", flush=True)
            await asyncio.sleep(3600)
        draw = self.rng.random()
        error, timeout = self.rates.get(f"{side}_error", 0), self.rates.get(f"{side}_timeout", 0)
        if draw >= error + timeout:
            return
        kind = f"{side}_{'error' if draw < error else 'timeout'}"
        self.injected[kind] = self.injected.get(kind, 0) + 1
        if kind == "reply_timeout":
            await asyncio.sleep(self.reply_timeout_s)
            raise TimeoutError("injected: model timed out")
        if kind == "memory_timeout":
            await asyncio.sleep(self.memory_hang_s)
        raise RuntimeError(f"injected: {kind.replace('_', ' ')}")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        await self._fault(run_manager)
        return self._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        await self._fault(run_manager)
        for chunk in self._stream(messages, stop=stop, run_manager=run_manager, **kwargs):
            yield chunk


def register_faulty_model(**options: Any) -> tuple[str, FaultyChatModel]:
    """Register a fresh `FaultyChatModel`; returns (``registered:...`` spec, model)."""
    return _register(FaultyChatModel(**options))


def schema_answer(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The plainest value a JSON schema accepts: every property, empty lists, first choices."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        return schema_answer(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if choices := schema.get("anyOf") or schema.get("enum"):
        return schema_answer(choices[0], defs) if "anyOf" in schema else choices[0]
    if schema.get("type") == "object":
        return {k: schema_answer(v, defs) for k, v in schema.get("properties", {}).items()}
    text = "ok" + "." * max(0, schema.get("minLength", 0) - 2)
    return {"array": [], "string": text, "number": 0.5, "integer": 1}.get(schema.get("type"))


def openai_app(first_token_s: float, tokens_per_s: float, reply_tokens: int) -> Any:
    """An OpenAI-compatible chat endpoint at that pace: streamed replies, JSON for schemas.

    The answer to a call with a ``json_schema`` response format is `schema_answer`'s;
    any other answer is ``reply_tokens`` words. It waits, it does not compute: like a
    hosted model, calls overlap.
    """
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "fake", "object": "chat.completion.chunk", "created": 0,
                "model": "fake", "choices": [choice]}  # fmt: skip
        return f"data: {json.dumps(body)}\n\n"

    async def chat(request: Any) -> Any:
        body = await request.json()
        schema = (body.get("response_format") or {}).get("json_schema")
        words = [json.dumps(schema_answer(schema["schema"]))] if schema else ["ok"] * reply_tokens
        if not body.get("stream"):
            await asyncio.sleep(first_token_s + len(words) / tokens_per_s)
            message = {"role": "assistant", "content": " ".join(words)}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return JSONResponse({"id": "fake", "object": "chat.completion", "created": 0,
                                 "model": "fake", "choices": [choice]})  # fmt: skip

        async def events() -> Any:
            await asyncio.sleep(first_token_s)
            yield chunk({"role": "assistant", "content": ""})
            for i, word in enumerate(words):
                await asyncio.sleep(i and 1 / tokens_per_s)
                yield chunk({"content": (" " if i else "") + word})
            yield chunk({}, "stop") + "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


if __name__ == "__main__":  # python -m bench.fake_model PORT FIRST_TOKEN_S TOKENS_PER_S TOKENS
    import sys

    import uvicorn

    port, first, rate, tokens = sys.argv[1:5]
    app = openai_app(float(first), float(rate), int(tokens))
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
