"""The model cache's bookkeeping for the ONNX export of MiniLM (`local.onnx_minilm`).

An export is named by its source's fingerprint (`source_fingerprint`: SHA-256 of the files
the export reads and `EXPORT_REVISION`). Hashing the weights costs 0.2-0.4 s, so the
fingerprint is remembered in ``fingerprints.json`` beside the exports, under the source
files' size, mtime, ctime and inode (`known_fingerprint`): writing or replacing a file
changes its ctime, which nothing can set back, and the hash is then made again. The cache
keeps only the current export (`remove_other_exports`, called after a new one is made).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

EXPORT_REVISION = 3
"""Bumped when the export itself changes (inputs, opset, exporter), so old files are not reused.

3: the graph written from the weights by `local.minilm_graph`, no longer traced by torch."""
SOURCE_FILES = ("config.json", "model.safetensors")
"""What the export reads from the model directory (the tokenizer is read at run time)."""


def _sha256(source: Path, prefix: str = "") -> str:
    """SHA-256 of ``prefix`` and each of `SOURCE_FILES` (its name, then its bytes)."""
    digest = hashlib.sha256(prefix.encode())
    for name in SOURCE_FILES:
        digest.update(f"{name}\n".encode())
        with open(source / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):  # noqa: B023 - used at once
                digest.update(block)
    return digest.hexdigest()


def source_fingerprint(source: Path) -> str:
    """SHA-256 of `EXPORT_REVISION` and the source files the export reads (~0.2 s)."""
    return _sha256(source, f"export revision {EXPORT_REVISION}\n")


def weights_sha256(source: Path) -> str:
    """SHA-256 of the source files alone: what recorded reference vectors belong to."""
    return _sha256(source)


FINGERPRINTS = "fingerprints.json"
"""Beside the exports: each source directory's file stats and the fingerprint they had."""


def _stats(source: Path) -> list[list[int]]:
    """What changes whenever a source file is written or replaced (ctime cannot be set)."""
    out = []
    for name in SOURCE_FILES:
        st = os.stat(source / name)
        out.append([st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return out


def known_fingerprint(cache: Path, source: Path) -> str:
    """`source_fingerprint` of ``source``, hashed only when its files' stats changed."""
    memo_path = cache / "models" / FINGERPRINTS
    key, stats = f"{EXPORT_REVISION}:{source.resolve()}", _stats(source)
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    entry = memo.get(key) if isinstance(memo, dict) else None
    if isinstance(entry, dict) and entry.get("stats") == stats:
        return str(entry["fingerprint"])
    fingerprint = source_fingerprint(source)
    if not isinstance(memo, dict):
        memo = {}
    memo[key] = {"stats": stats, "fingerprint": fingerprint}
    memo_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=memo_path.parent, suffix=".json.tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(memo, f)
        os.replace(tmp, memo_path)  # whole or not at all, whoever writes last
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return fingerprint


def remove_other_exports(cache: Path, current: Path) -> list[Path]:
    """Delete the exports (and int8 copies) of other sources: the cache keeps the current one.

    Two installs with different model files sharing one cache would each export again
    after the other did: give them their own ``MEMORY_AGENT_CACHE``.
    """
    removed = []
    for path in (cache / "models").glob("all-minilm-l6-v2-*.onnx"):
        if not path.name.startswith(current.stem):
            path.unlink(missing_ok=True)
            removed.append(path)
    if removed:
        log.info("removed %d ONNX files of other sources from %s", len(removed), cache)
    return removed
