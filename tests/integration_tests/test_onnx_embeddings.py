"""MiniLM on ONNX Runtime: the vectors torch gives, the runtime chosen, the export cached.

The export is written from the weights without torch (`local.minilm_graph`) and checked
against torch's recorded vectors. Where the `torch` extra is installed, the tests marked
``needs_torch`` also compare with torch live, on many texts; elsewhere they skip, and the
others run. The export cache: keyed by the source's SHA-256, loaded without torch. Queries
on the int8 copy: made once, checked against the export, close to its vectors. Every export
here goes to a temporary cache.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from bench.seeding import memory_text
from memory_graph_agent.local import minilm_graph, onnx_cache, onnx_minilm
from memory_graph_agent.services import models

TEXTS = [
    "Where did Caroline move from?",
    "a",
    "",
    "Zhang San lives in 北京 and drinks café crème ☕",
    "word " * 600,  # far past the 256-token limit: truncation must match
    "I adopted a dog last week. His name is Max and he loves the beach.",
]


HAS_TORCH = all(
    importlib.util.find_spec(m) for m in ("torch", "sentence_transformers", "langchain_huggingface")
)
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="the `torch` extra is not installed")
MANY_TEXTS = TEXTS + [
    memory_text(random.Random(seed), kind)
    for seed in range(60)
    for kind in ("summary", "reflection")
]
"""The edge cases above and 120 memories of 40-70 words, as the store holds them."""


@pytest.fixture(scope="module")
def torch_embeddings():
    if not HAS_TORCH:
        pytest.skip("the `torch` extra is not installed")
    return models.local_embeddings("torch")


@pytest.fixture(scope="module")
def onnx_embeddings(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # a fresh export, made by this code
        patch.setenv("MEMORY_AGENT_CACHE", str(tmp_path_factory.mktemp("onnx-default")))
        return models.local_embeddings("onnx")


def test_onnx_is_the_default(monkeypatch, onnx_embeddings):
    assert isinstance(onnx_embeddings, models.OnnxEmbeddings)
    monkeypatch.setenv("EMBEDDING_RUNTIME", "tensorflow")
    with pytest.raises(ValueError, match="EMBEDDING_RUNTIME"):
        models.local_embeddings()


@needs_torch
def test_torch_can_be_chosen(monkeypatch, torch_embeddings):
    assert isinstance(torch_embeddings, models.LocalEmbeddings)
    monkeypatch.setenv("EMBEDDING_RUNTIME", "torch")
    assert isinstance(models.local_embeddings(), models.LocalEmbeddings)


def test_the_export_is_written_without_torch(tmp_path):
    """In a process where torch cannot be imported, a fresh export passes its check."""
    code = f"""
import sys
for name in ("torch", "transformers", "sentence_transformers"):
    sys.modules[name] = None  # importing it raises ImportError
from pathlib import Path
from memory_graph_agent.local import onnx_minilm
encoder = onnx_minilm.MiniLMEncoder(Path({str(tmp_path)!r}), 1)
print(onnx_minilm.check_export(encoder.session, onnx_minilm.model_dir()), encoder.query_precision)
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    cosine, precision = done.stdout.split()
    assert float(cosine) >= onnx_minilm.MIN_COSINE and precision == "int8"


def test_the_export_computes_the_recorded_torch_vectors(onnx_embeddings):
    recorded = onnx_minilm.recorded_vectors(onnx_minilm.model_dir())
    assert recorded is not None, "the packaged weights have recorded vectors"
    ours = np.array(onnx_embeddings.embed_documents(list(onnx_minilm.PROBE_TEXTS)))
    assert (ours * recorded).sum(axis=1).min() >= onnx_minilm.MIN_COSINE
    assert np.abs(ours - recorded).max() < 1e-5


def test_the_export_computes_numpy_s_forward_pass_on_many_texts(onnx_embeddings):
    """The graph against `minilm_graph.reference_hidden`, one text at a time, no padding."""
    source = onnx_minilm.model_dir()
    tokenizer = onnx_minilm.load_tokenizer(source)
    texts = MANY_TEXTS[::4]  # numpy is slow: a quarter of them, all the edge cases
    ours = np.array(onnx_embeddings.embed_documents(texts))
    theirs = []
    for text in texts:
        feeds, mask = onnx_minilm._feeds(tokenizer, [text])
        theirs.append(onnx_minilm.mean_pool(minilm_graph.reference_hidden(source, feeds), mask)[0])
    theirs = np.array(theirs)
    assert (ours * theirs).sum(axis=1).min() >= onnx_minilm.MIN_COSINE
    assert np.abs(ours - theirs).max() < 1e-5


@needs_torch
def test_the_recorded_vectors_are_torch_s():
    from memory_graph_agent.local import minilm_probe

    source = onnx_minilm.model_dir()
    theirs = minilm_probe.torch_vectors(source, list(onnx_minilm.PROBE_TEXTS))
    assert np.abs(onnx_minilm.recorded_vectors(source) - theirs).max() < 1e-6


@needs_torch
def test_the_vectors_are_torch_s(onnx_embeddings, torch_embeddings):
    ours = np.array(onnx_embeddings.embed_documents(MANY_TEXTS))
    theirs = np.array(torch_embeddings.embed_documents(MANY_TEXTS))
    assert ours.shape == (len(MANY_TEXTS), 384)
    cosines = (ours * theirs).sum(axis=1)
    print(f"ONNX against torch on {len(MANY_TEXTS)} texts: min cosine {cosines.min():.8f}, "
          f"max abs diff {np.abs(ours - theirs).max():.2e}")  # fmt: skip
    assert cosines.min() >= 0.99999
    assert np.abs(ours - theirs).max() < 1e-4
    query = np.array(onnx_embeddings.embed_query(TEXTS[0]))  # the int8 query model
    assert onnx_embeddings.query_precision == "int8"
    assert float(query @ theirs[0]) >= onnx_minilm.MIN_QUERY_COSINE


def test_queries_can_run_at_full_precision(monkeypatch, exported, onnx_embeddings):
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(exported))
    monkeypatch.setenv("EMBEDDING_QUERY_PRECISION", "fp32")
    embeddings = models.local_embeddings("onnx")
    assert embeddings.query_precision == "fp32"
    query = np.array(embeddings.embed_query(TEXTS[0]))
    theirs = np.array(onnx_embeddings.embed_documents(TEXTS[:2])[0])  # in a padded batch
    assert float(query @ theirs) >= 0.99999  # alone, without a batch's padding
    monkeypatch.setenv("EMBEDDING_QUERY_PRECISION", "int4")
    with pytest.raises(ValueError, match="EMBEDDING_QUERY_PRECISION"):
        models.local_embeddings("onnx")


@needs_torch
def test_an_unusable_onnx_runtime_falls_back_to_torch(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no ONNX Runtime here")

    monkeypatch.setattr(onnx_minilm, "MiniLMEncoder", broken)
    with caplog.at_level(logging.WARNING):
        embeddings = models.local_embeddings("onnx")
    assert isinstance(embeddings, models.LocalEmbeddings)
    assert "using torch" in caplog.text


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A model cache holding the export of the bundled model."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    onnx_minilm.MiniLMEncoder(cache, 1)  # the export and its int8 query model
    return cache


def _export_of(cache: Path, source: Path) -> Path:
    return onnx_minilm.export_path(cache, onnx_cache.source_fingerprint(source))


def test_the_export_is_made_once_and_a_broken_one_is_made_again(tmp_path):
    source = onnx_minilm.model_dir()
    target = _export_of(tmp_path, source)
    onnx_minilm.load_session(tmp_path, 1, source)  # exported
    made = target.stat().st_mtime_ns
    onnx_minilm.load_session(tmp_path, 1, source)  # reused
    assert target.stat().st_mtime_ns == made
    target.write_bytes(b"half a file")
    session = onnx_minilm.load_session(tmp_path, 1, source)
    assert target.stat().st_size > 1_000_000
    assert [i.name for i in session.get_inputs()] == list(onnx_minilm.INPUTS)
    assert not list(tmp_path.glob("models/*.tmp"))  # no temporary file left behind


def _scale_weights(path: Path, tensor: str, factor: float) -> None:
    """Scale one float32 tensor of a safetensors file in place: other weights, same size."""
    with open(path, "r+b") as f:
        header_size = int.from_bytes(f.read(8), "little")
        start, end = json.loads(f.read(header_size))[tensor]["data_offsets"]
        f.seek(8 + header_size + start)
        values = np.frombuffer(f.read(end - start), dtype=np.float32) * factor
        f.seek(8 + header_size + start)
        f.write(values.astype(np.float32).tobytes())


def test_changed_weights_of_the_same_size_are_exported_again(tmp_path, exported):
    cache = tmp_path / "cache"
    shutil.copytree(exported, cache)
    source = tmp_path / "model"
    shutil.copytree(onnx_minilm.model_dir(), source)
    weights = source / "model.safetensors"
    size = weights.stat().st_size
    _scale_weights(weights, "encoder.layer.5.output.dense.weight", 0.5)
    assert weights.stat().st_size == size  # size and package version alike: only the hash differs
    old = _export_of(cache, onnx_minilm.model_dir())
    new = _export_of(cache, source)
    assert new != old and not new.exists()

    changed = onnx_minilm.MiniLMEncoder(cache, 1, source)
    assert new.exists() and not old.exists()  # the cache keeps the current export only
    assert not onnx_minilm.quantized_path(old).exists()
    original = onnx_minilm.MiniLMEncoder(cache, 1)
    assert old.exists() and not new.exists()
    recorded = changed.session.get_modelmeta().custom_metadata_map
    assert recorded[onnx_minilm.FINGERPRINT_KEY] == onnx_cache.source_fingerprint(source)
    ours, theirs = (np.array(e.encode(TEXTS[:2])) for e in (changed, original))
    assert (ours * theirs).sum(axis=1).max() < 0.999  # the new weights' vectors, not the old


def test_a_start_hashes_the_weights_only_when_a_source_file_changed(tmp_path, monkeypatch):
    source = tmp_path / "model"
    shutil.copytree(onnx_minilm.model_dir(), source)
    cache, hashed = tmp_path / "cache", []
    real = onnx_cache.source_fingerprint

    def counted(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(onnx_cache, "source_fingerprint", counted)
    first = onnx_cache.known_fingerprint(cache, source)
    assert first == real(source) and len(hashed) == 1
    started = time.perf_counter()
    assert onnx_cache.known_fingerprint(cache, source) == first and len(hashed) == 1
    assert time.perf_counter() - started < 0.05  # no hashing: a few stat calls
    _scale_weights(source / "model.safetensors", "encoder.layer.5.output.dense.weight", 0.5)
    changed = onnx_cache.known_fingerprint(cache, source)
    assert len(hashed) == 2 and changed != first and changed == real(source)
    (cache / "models" / onnx_cache.FINGERPRINTS).write_text("{not json")
    assert onnx_cache.known_fingerprint(cache, source) == changed and len(hashed) == 3


def test_a_cached_export_of_another_source_is_exported_again(tmp_path, exported, caplog):
    shutil.copytree(exported, tmp_path, dirs_exist_ok=True)
    target = _export_of(tmp_path, onnx_minilm.model_dir())
    proto = onnx.load(str(target))
    (entry,) = [e for e in proto.metadata_props if e.key == onnx_minilm.FINGERPRINT_KEY]
    entry.value = "0" * 64  # copied in from another model, or an export made before hashing
    onnx.save(proto, str(target))
    with caplog.at_level(logging.WARNING):
        session = onnx_minilm.load_session(tmp_path, 1)
    assert "of another source model" in caplog.text
    recorded = session.get_modelmeta().custom_metadata_map[onnx_minilm.FINGERPRINT_KEY]
    assert recorded == onnx_cache.source_fingerprint(onnx_minilm.model_dir())


def test_an_export_that_disagrees_with_torch_is_never_used(tmp_path, monkeypatch, caplog):
    export = onnx_minilm._export

    def export_then_damage(source, path, fingerprint):  # a faulty exporter, simulated
        export(source, path, fingerprint)
        proto = onnx.load(str(path))
        largest = max(proto.graph.initializer, key=lambda t: int(np.prod(t.dims)))
        values = numpy_helper.to_array(largest)
        noise = np.random.default_rng(0).normal(0, values.std(), values.shape)
        damaged = (values + noise).astype(values.dtype)
        largest.CopyFrom(numpy_helper.from_array(damaged, largest.name))
        onnx.save(proto, str(path))

    monkeypatch.setattr(onnx_minilm, "_export", export_then_damage)
    with pytest.raises(onnx_minilm.ExportError, match="disagrees with torch's recorded vectors"):
        onnx_minilm.load_session(tmp_path, 1)
    assert not list(tmp_path.glob("models/*.onnx*"))  # neither kept nor left half-written

    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(tmp_path))
    if not HAS_TORCH:
        with pytest.raises(models.LocalExtraMissing, match="disagrees.*'torch' extra"):
            models.local_embeddings("onnx")
        return
    with caplog.at_level(logging.WARNING):
        embeddings = models.local_embeddings("onnx")
    assert isinstance(embeddings, models.LocalEmbeddings)  # torch's vectors instead
    assert "disagrees with torch" in caplog.text


def test_an_export_of_weights_without_recorded_vectors_is_checked_with_numpy(
    tmp_path, monkeypatch, caplog
):
    source = tmp_path / "model"
    shutil.copytree(onnx_minilm.model_dir(), source)
    _scale_weights(source / "model.safetensors", "encoder.layer.2.output.dense.weight", 0.9)
    assert onnx_minilm.recorded_vectors(source) is None
    with caplog.at_level(logging.WARNING):
        session = onnx_minilm.load_session(tmp_path / "cache", 1, source)
    assert "checking with numpy" in caplog.text
    assert onnx_minilm.check_export(session, source) >= onnx_minilm.MIN_COSINE

    # a builder that gets the graph wrong is caught by numpy too
    monkeypatch.setattr(minilm_graph, "MASKED", 0.0)  # padding no longer masked
    with pytest.raises(onnx_minilm.ExportError, match="disagrees with numpy's forward pass"):
        onnx_minilm.load_session(tmp_path / "other-cache", 1, source)


QUESTIONS = [
    "What books has Melanie read?",
    "When did Caroline go to the LGBTQ support group?",
    "Where did Caroline move from 4 years ago?",
    "What is Jon's favorite style of dance?",
    "How many children does Melanie have?",
]


def test_queries_run_on_an_int8_copy_close_to_the_export(exported):
    encoder = onnx_minilm.MiniLMEncoder(exported, 1)
    assert encoder.query_precision == "int8"
    queries = np.array([encoder.encode_query(q) for q in QUESTIONS])
    full = np.array([encoder.encode([q])[0] for q in QUESTIONS])
    cosines = (queries * full).sum(axis=1)
    assert cosines.min() >= onnx_minilm.MIN_QUERY_COSINE
    assert cosines.max() < 0.99999  # the int8 model answered, not the export
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    # each question is still nearest to its own full-precision vector
    assert ((queries @ full.T).argmax(axis=1) == np.arange(len(QUESTIONS))).all()


def _int8_of(cache: Path) -> Path:
    return onnx_minilm.quantized_path(_export_of(cache, onnx_minilm.model_dir()))


def test_the_int8_model_is_made_once_and_a_broken_one_is_made_again(
    tmp_path, exported, monkeypatch
):
    shutil.copytree(exported, tmp_path, dirs_exist_ok=True)
    target = _int8_of(tmp_path)
    made = target.stat().st_mtime_ns
    recorded = onnx_minilm._session(target, 1).get_modelmeta().custom_metadata_map
    assert recorded[onnx_minilm.FINGERPRINT_KEY] == onnx_cache.source_fingerprint(
        onnx_minilm.model_dir()
    )
    quantize = onnx_minilm._quantize

    def refuse(*args):
        raise AssertionError("quantized again")

    monkeypatch.setattr(onnx_minilm, "_quantize", refuse)
    assert onnx_minilm.MiniLMEncoder(tmp_path, 1).query_precision == "int8"  # reused
    assert target.stat().st_mtime_ns == made
    monkeypatch.setattr(onnx_minilm, "_quantize", quantize)
    target.write_bytes(b"half a file")
    encoder = onnx_minilm.MiniLMEncoder(tmp_path, 1)
    assert encoder.query_precision == "int8"
    assert target.stat().st_size > 1_000_000
    assert not list(tmp_path.glob("models/*.tmp"))


def test_an_int8_model_that_disagrees_is_never_used(tmp_path, exported, monkeypatch, caplog):
    shutil.copytree(exported, tmp_path, dirs_exist_ok=True)
    _int8_of(tmp_path).unlink()
    quantize = onnx_minilm._quantize

    def quantize_then_damage(export, target):  # a faulty quantizer, simulated
        quantize(export, target)
        proto = onnx.load(str(target))
        for tensor in proto.graph.initializer:
            if tensor.data_type == onnx.TensorProto.FLOAT and int(np.prod(tensor.dims)) > 1000:
                values = numpy_helper.to_array(tensor)
                noise = np.random.default_rng(0).normal(0, values.std(), values.shape)
                tensor.CopyFrom(
                    numpy_helper.from_array((values + noise).astype(values.dtype), tensor.name)
                )
        onnx.save(proto, str(target))

    monkeypatch.setattr(onnx_minilm, "_quantize", quantize_then_damage)
    with caplog.at_level(logging.WARNING):
        encoder = onnx_minilm.MiniLMEncoder(tmp_path, 1)
    assert "disagrees with the export" in caplog.text
    assert encoder.query_precision == "fp32"
    assert encoder.encode_query(QUESTIONS[0]) == encoder.encode([QUESTIONS[0]])[0]
    assert not _int8_of(tmp_path).exists()
    assert not list(tmp_path.glob("models/*.tmp"))

    # a damaged file already in the cache (made on another CPU, say) is not used either
    quantize_then_damage(_export_of(tmp_path, onnx_minilm.model_dir()), _int8_of(tmp_path))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        encoder = onnx_minilm.MiniLMEncoder(tmp_path, 1)
    assert "disagrees with the export" in caplog.text
    assert encoder.query_precision == "fp32"


LOAD_FROM_CACHE = """
import sys
from memory_graph_agent.services import models
embeddings = models.local_embeddings("onnx")
assert type(embeddings).__name__ == "OnnxEmbeddings", type(embeddings)
assert len(embeddings.embed_query("Where did Caroline move from?")) == 384
heavy = ("torch", "transformers", "sentence_transformers", "onnx")
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_a_cached_export_loads_without_importing_torch(exported):
    env = {**os.environ, "MEMORY_AGENT_CACHE": str(exported), "EMBEDDING_RUNTIME": "onnx"}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", LOAD_FROM_CACHE],
        env=env, cwd=root, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # no exporter, no torch: faster start, less memory


def test_two_threads_that_do_not_spin_by_default(monkeypatch, exported):
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(exported))
    monkeypatch.delenv("EMBEDDING_THREADS", raising=False)
    embeddings = models.OnnxEmbeddings()
    assert embeddings.threads == min(2, len(os.sched_getaffinity(0)))
    options = embeddings._encoder.session.get_session_options()
    assert options.intra_op_num_threads == embeddings.threads
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    monkeypatch.setenv("EMBEDDING_THREADS", "1")
    assert models.OnnxEmbeddings().threads == 1
