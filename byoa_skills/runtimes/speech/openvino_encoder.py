"""Whisper's encoder as an OpenVINO model, built with OpenVINO's graph API from the weights of a
CTranslate2 ``model.bin``, and run on the CPU.

The graph is CTranslate2's Whisper encoder, op for op: two 1-D convolutions (kernel 3, the
second with stride 2) each followed by the exact (erf) GELU, the stored position encodings
added, pre-norm transformer layers (layer norm, self-attention with q, k, v fused in one
``linear_0``, a residual; layer norm, two linear layers around a GELU, a residual), and a final
layer norm. Weights stored as int8 with per-row scales are dequantized to float32
(``weight / scale``, the inverse of CTranslate2's quantization); float16 weights are widened.
The frame axis is dynamic, so one model encodes the whole 30 s window and every shorter one.
Each linear layer's and convolution's node is named by its CTranslate2 variable folder
(``encoder/layer_3/ffn/linear_0``), so a list of layers to keep out of int8 names them.

Only numpy and the standard library are imported at module level; openvino when a model is
built or compiled.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from byoa_skills.runtimes.speech.encoder_choice import cpu_flags, has_int8_units
from byoa_skills.runtimes.speech.mapped_pages import drop_resident_pages
from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

#: CTranslate2's layer-norm epsilon for Whisper.
LAYER_NORM_EPSILON = 1e-5
#: OpenVINO's inference precisions this module compiles for.
PRECISIONS = ("f32", "bf16")
#: Values of one position's input that share a scale where a product with int8 weights has
#: its input quantized at run time (OpenVINO's dynamic quantization: the int8 model's layers
#: kept out of static int8); a divisor of every Whisper model's feed-forward width (1536 to
#: 5120). OpenVINO's own default on the CPU, 32, took 60 ms more per 30 s window (`base`).
RUN_TIME_GROUP = 256


def run_time_group(flags: str | None) -> int:
    """The group size to compile with on a CPU with ``flags`` (``/proc/cpuinfo``'s):
    :data:`RUN_TIME_GROUP` where the CPU has int8 units, else 0 (off: the int8 weights are
    widened and the product runs in float). With the instruction set capped below VNNI the
    plugin's run-time quantization gave an empty output, so it runs only where int8 units
    are known to be there."""
    return RUN_TIME_GROUP if has_int8_units(flags) else 0


class EncoderBuildError(ValueError):
    """The variables are not a Whisper encoder this builder understands."""


def encoder_weights(variables: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The encoder's weights of CTranslate2 Whisper ``variables`` (aliases resolved), each as
    float32: int8 weights divided by their ``weight_scale`` rows, float16 ones widened.
    ``encoder/num_heads`` is kept as it is."""
    weights: dict[str, np.ndarray] = {}
    for name, value in variables.items():
        if not name.startswith("encoder/") or name.endswith("/weight_scale"):
            continue
        if name == "encoder/num_heads":
            weights[name] = np.asarray(value)
            continue
        if value.dtype == np.int8:
            scale = variables.get(name + "_scale")
            if scale is None:
                raise EncoderBuildError(f"{name} is int8 without {name}_scale")
            scale = np.asarray(scale, dtype=np.float32)
            shape = (-1,) + (1,) * (value.ndim - 1)
            weights[name] = value.astype(np.float32) / scale.reshape(shape)
        elif value.dtype.kind == "f":
            weights[name] = np.asarray(value, dtype=np.float32)
        else:
            raise EncoderBuildError(f"{name} has dtype {value.dtype}, not a weight")
    if "encoder/num_heads" not in weights or "encoder/conv1/weight" not in weights:
        raise EncoderBuildError("the variables hold no Whisper encoder")
    return weights


def encoder_layers(weights: Mapping[str, np.ndarray]) -> int:
    """How many transformer layers the encoder has (numbered from 0 without a gap)."""
    pattern = re.compile(r"encoder/layer_(\d+)/")
    found = {int(m.group(1)) for name in weights if (m := pattern.match(name))}
    if found != set(range(len(found))):
        raise EncoderBuildError("the encoder layers are not numbered from 0 without a gap")
    return len(found)


def build_encoder_model(variables: Mapping[str, np.ndarray]) -> Any:
    """An ``openvino.Model`` of Whisper's encoder: input ``features`` of shape
    [batch, mel bins, frames] (both batch and frames dynamic; at most the stored positions
    times 2 frames), output ``encoder_output`` [batch, ceil(frames / 2), d_model], float32.

    ``variables`` are CTranslate2's (``read_ct2_variables``). Raises
    :class:`EncoderBuildError` for variables that are not a Whisper encoder.
    """
    ov = import_openvino()
    import openvino.opset13 as op

    w = encoder_weights(variables)
    heads = int(w["encoder/num_heads"])
    n_mels = int(w["encoder/conv1/weight"].shape[1])
    d_model = int(w["encoder/conv1/weight"].shape[0])
    if d_model % heads:
        raise EncoderBuildError(f"d_model {d_model} is not a multiple of {heads} heads")

    def const(name: str) -> Any:
        return op.constant(w[name])

    def conv(x: Any, name: str, stride: int) -> Any:
        y = op.convolution(x, const(f"{name}/weight"), [stride], [1], [1], [1])
        y.set_friendly_name(name)
        bias = op.constant(w[f"{name}/bias"].reshape(1, -1, 1))
        return op.gelu(op.add(y, bias), approximation_mode="erf")

    def linear(x: Any, name: str) -> Any:
        y = op.matmul(x, const(f"{name}/weight"), transpose_a=False, transpose_b=True)
        y.set_friendly_name(name)  # what the int8 build's kept-float list names
        return op.add(y, const(f"{name}/bias"))

    def layer_norm(x: Any, name: str) -> Any:  # name: the folder of layer_norm/
        axes = op.constant(np.array([-1], dtype=np.int64))
        normed = op.mvn(x, axes, True, LAYER_NORM_EPSILON, "inside_sqrt")
        return op.add(
            op.multiply(normed, const(f"{name}/layer_norm/gamma")), const(f"{name}/layer_norm/beta")
        )

    def split_heads(x: Any) -> Any:  # [B, T, D] -> [B, H, T, D/H]
        shape = op.constant(np.array([0, 0, heads, d_model // heads], dtype=np.int64))
        return op.transpose(op.reshape(x, shape, special_zero=True), [0, 2, 1, 3])

    def self_attention(x: Any, name: str) -> Any:
        qkv = linear(layer_norm(x, name), f"{name}/linear_0")
        q, k, v = (split_heads(part) for part in op.split(qkv, -1, 3).outputs())
        attended = op.scaled_dot_product_attention(q, k, v, causal=False)
        attended.set_friendly_name(f"{name}/attention")
        merged = op.transpose(attended, [0, 2, 1, 3])
        shape = op.constant(np.array([0, 0, d_model], dtype=np.int64))
        return linear(op.reshape(merged, shape, special_zero=True), f"{name}/linear_1")

    def feed_forward(x: Any, name: str) -> Any:
        hidden = linear(layer_norm(x, name), f"{name}/linear_0")
        return linear(op.gelu(hidden, approximation_mode="erf"), f"{name}/linear_1")

    features = op.parameter([-1, n_mels, -1], ov.Type.f32, name="features")
    x = conv(conv(features, "encoder/conv1", 1), "encoder/conv2", 2)
    x = op.transpose(x, [0, 2, 1])  # [B, T, D]
    frames = op.gather(op.shape_of(x), op.constant(np.array([1], dtype=np.int64)), 0)
    positions = op.slice(
        const("encoder/position_encodings/encodings"),
        op.constant(np.array([0], dtype=np.int64)),
        frames,
        op.constant(np.array([1], dtype=np.int64)),
        op.constant(np.array([0], dtype=np.int64)),
    )
    x = op.add(x, positions)
    for i in range(encoder_layers(w)):
        x = op.add(x, self_attention(x, f"encoder/layer_{i}/self_attention"))
        x = op.add(x, feed_forward(x, f"encoder/layer_{i}/ffn"))
    x = layer_norm(x, "encoder")
    result = op.result(x)
    result.get_output_tensor(0).set_names({"encoder_output"})
    return ov.Model([result], [features], "whisper_encoder")


class OpenVINOEncoder:
    """A compiled encoder model: :meth:`encode` turns a batch of log-Mel windows into the
    encoder output CTranslate2's decoder takes.

    ``precision`` is OpenVINO's inference precision, ``f32`` or ``bf16`` (bf16 only runs as
    bf16 on a CPU with bf16 units; elsewhere OpenVINO falls back to f32). ``threads`` 0 lets
    OpenVINO choose. ``model`` is a saved model's ``.xml`` path or an ``openvino.Model``.
    """

    def __init__(self, model: Any, *, precision: str = "f32", threads: int = 0) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        ov = import_openvino()

        config: dict[str, Any] = {
            "INFERENCE_PRECISION_HINT": precision,
            "PERFORMANCE_HINT": "LATENCY",
            # OpenVINO pins its threads to the first cores of the process's set: the encoders of
            # two single-threaded workers then share one core and the other waits (two at once
            # took 425 ms each against 201 ms alone, 30 s window, int8; unpinned 202 ms each)
            "ENABLE_CPU_PINNING": False,
            "DYNAMIC_QUANTIZATION_GROUP_SIZE": run_time_group(cpu_flags()),
        }
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        core = ov.Core()
        self.precision = precision
        self.threads = threads
        self._weights = _weights_file(model)
        if self._weights is not None:
            model = _with_small_constants_of_their_own(core.read_model(model))
        self._compiled = core.compile_model(model, "CPU", config)
        self._request = self._compiled.create_infer_request()
        self._lock = threading.Lock()
        self._shapes_run: set[tuple[int, ...]] = set()

    def encode(self, features: np.ndarray) -> np.ndarray:
        """The encoder output, float32 [batch, ceil(frames / 2), d_model], of ``features``
        (float32 [batch, mel bins, frames]). Calls from several threads take turns."""
        batch = np.ascontiguousarray(features, dtype=np.float32)
        with self._lock:
            self._request.infer({0: batch})
            encoded = np.array(self._request.get_output_tensor(0).data, dtype=np.float32, copy=True)
            if batch.shape not in self._shapes_run:
                # a shape's first run repacks the weights it reads from the mapped file
                self._shapes_run.add(batch.shape)
                if self._weights is not None:
                    drop_resident_pages(self._weights)
            return encoded

    @property
    def weights_file(self) -> Path | None:
        """The weights file OpenVINO maps for this model (None: the model was built in
        memory); its resident pages are given back after each input shape's first run."""
        return self._weights


def _weights_file(model: Any) -> Path | None:
    if isinstance(model, (str, os.PathLike)):
        return Path(model).with_suffix(".bin")
    return None


#: Constants of at most this many bytes are copied out of the mapped weights file.
SMALL_CONSTANT_BYTES = 4096


def _with_small_constants_of_their_own(model: Any) -> Any:
    """``model`` (read from a file, its constants in the mapped weights file) with each constant
    of at most :data:`SMALL_CONSTANT_BYTES` copied into memory of its own. The CPU plugin
    reads a few such constants (the int8 graph's quantization bounds) in place at every run,
    which would fault pages of the file back in after they are given back; the large ones it
    repacks at a shape's first run and never reads again."""
    ov = import_openvino()
    import openvino.opset13 as op

    copyable = {ov.Type.f32, ov.Type.f16, ov.Type.i64, ov.Type.i32, ov.Type.i8, ov.Type.u8}
    for node in model.get_ordered_ops():
        if node.get_type_name() != "Constant" or node.get_byte_size() > SMALL_CONSTANT_BYTES:
            continue
        if node.get_element_type() not in copyable:
            continue
        copied = op.constant(np.array(node.get_data(), copy=True), dtype=node.get_element_type())
        copied.set_friendly_name(node.get_friendly_name())
        node.output(0).replace(copied.output(0))
    return model
