"""MiniLM on ONNX Runtime: the vectors torch gives, the runtime chosen, the export cached."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from memory_graph_agent import models
from memory_graph_agent.local import onnx_minilm

TEXTS = [
    "Where did Caroline move from?",
    "a",
    "",
    "Zhang San lives in 北京 and drinks café crème ☕",
    "word " * 600,  # far past the 256-token limit: truncation must match
    "I adopted a dog last week. His name is Max and he loves the beach.",
]


@pytest.fixture(scope="module")
def torch_embeddings():
    return models.local_embeddings("torch")


@pytest.fixture(scope="module")
def onnx_embeddings():
    return models.local_embeddings("onnx")


def test_onnx_is_the_default_and_torch_can_be_chosen(monkeypatch, onnx_embeddings, torch_embeddings):
    assert isinstance(onnx_embeddings, models.OnnxEmbeddings)
    assert isinstance(torch_embeddings, models.LocalEmbeddings)
    monkeypatch.setenv("EMBEDDING_RUNTIME", "torch")
    assert isinstance(models.local_embeddings(), models.LocalEmbeddings)
    monkeypatch.setenv("EMBEDDING_RUNTIME", "tensorflow")
    with pytest.raises(ValueError, match="EMBEDDING_RUNTIME"):
        models.local_embeddings()


def test_the_vectors_are_torch_s(onnx_embeddings, torch_embeddings):
    ours = np.array(onnx_embeddings.embed_documents(TEXTS))
    theirs = np.array(torch_embeddings.embed_documents(TEXTS))
    assert ours.shape == (len(TEXTS), 384)
    assert (ours * theirs).sum(axis=1).min() >= 0.99999
    assert np.abs(ours - theirs).max() < 1e-4
    query = np.array(onnx_embeddings.embed_query(TEXTS[0]))
    assert float(query @ theirs[0]) >= 0.99999  # alone, without a batch's padding


def test_an_unusable_onnx_runtime_falls_back_to_torch(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no ONNX Runtime here")

    monkeypatch.setattr(onnx_minilm, "MiniLMEncoder", broken)
    with caplog.at_level(logging.WARNING):
        embeddings = models.local_embeddings("onnx")
    assert isinstance(embeddings, models.LocalEmbeddings)
    assert "using torch" in caplog.text


def test_the_export_is_made_once_and_a_broken_one_is_made_again(tmp_path):
    source = onnx_minilm.model_dir()
    target = onnx_minilm.export_path(source, tmp_path)
    onnx_minilm.load_session(tmp_path, 1, source)  # exported
    made = target.stat().st_mtime_ns
    onnx_minilm.load_session(tmp_path, 1, source)  # reused
    assert target.stat().st_mtime_ns == made
    target.write_bytes(b"half a file")
    session = onnx_minilm.load_session(tmp_path, 1, source)
    assert target.stat().st_size > 1_000_000
    assert [i.name for i in session.get_inputs()] == list(onnx_minilm.INPUTS)
    assert not list(tmp_path.glob("models/*.tmp"))  # no temporary file left behind
