"""Record torch's vectors of the probe texts: what a fresh ONNX export is checked against.

``python -m memory_graph_agent.local.minilm_probe`` (needs the ``torch`` extra) runs MiniLM
on torch (transformers' ``BertModel``) over `onnx_minilm.PROBE_TEXTS` as one padded batch,
pools them as `onnx_minilm.mean_pool` does, and writes the vectors with the SHA-256 of the
weights they belong to to `onnx_minilm.PROBE_VECTORS`. Run it again when the packaged
weights or the probe texts change; `tests/integration_tests/test_onnx_embeddings.py`
checks the recorded file against torch where torch is installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from memory_graph_agent.local import onnx_minilm
from memory_graph_agent.local.onnx_cache import weights_sha256


def torch_vectors(source: Path, texts: list[str]) -> np.ndarray:
    """The normalised mean-pooled vectors of ``texts`` (one padded batch)."""
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(source)).eval()
    feeds, mask = onnx_minilm._feeds(onnx_minilm.load_tokenizer(source), texts)
    with torch.no_grad():
        hidden = bert(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state
    return onnx_minilm.mean_pool(hidden.numpy(), mask)


def probe_record(source: Path) -> dict[str, Any]:
    """What `onnx_minilm.PROBE_VECTORS` holds for ``source``'s weights."""
    from importlib.metadata import version

    vectors = torch_vectors(source, list(onnx_minilm.PROBE_TEXTS))
    return {
        "weights_sha256": weights_sha256(source),
        "made_with": {p: version(p) for p in ("torch", "transformers")},
        "texts": list(onnx_minilm.PROBE_TEXTS),
        "vectors": [[float(f"{x:.9g}") for x in row] for row in vectors],  # float32 exactly
    }


def main() -> None:
    """Write the record of the packaged weights."""
    record = probe_record(onnx_minilm.model_dir())
    onnx_minilm.PROBE_VECTORS.write_text(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {onnx_minilm.PROBE_VECTORS} ({record['weights_sha256'][:16]})")


if __name__ == "__main__":
    main()
