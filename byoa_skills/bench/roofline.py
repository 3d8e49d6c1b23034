"""How far the encoder is from what the CPU can do: the work of one encoder window, counted from
the model's shapes, and the CPU's measured peak for each precision, from a short
matrix-multiply probe on OpenVINO in the same run.

The count is of multiply-accumulates (MACs; one is two floating-point or integer operations):
the two convolutions (kernel 3) and, per layer over ``T`` = window frames / 2 positions, the
four attention projections (``4·T·d²``), the attention's scores and context (``2·T²·d``) and the
feed-forward (``2·T·d·f``). Layer norms, softmax and GELU are left out (a few percent). The
probe multiplies a [1500, 512] by a [512, 2048] matrix (the shapes of ``base``'s feed-forward
at the whole window) in float32, in bf16 (where the CPU has bf16 units) and in int8 (inputs
and weights fake-quantized, which OpenVINO's CPU plugin runs as an integer product), and keeps
the best of a few runs.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

#: The probe's matrix shapes: ``[M, K]`` times ``[K, N]``.
PROBE_SHAPE = (1500, 512, 2048)
_LAYER = re.compile(r"encoder/layer_(\d+)/")


@dataclass(frozen=True)
class EncoderShape:
    """The shapes that set an encoder's work: mel bins, width ``d``, feed-forward width ``f``,
    and layers."""

    mels: int
    width: int
    ffn: int
    layers: int

    @classmethod
    def of_model(cls, model_dir: str | Path) -> EncoderShape:
        """The encoder's shapes, read from a CTranslate2 ``model.bin``."""
        from byoa_skills.runtimes.speech.ct2_weights import read_ct2_variables

        variables = read_ct2_variables(Path(model_dir) / "model.bin")
        conv = variables["encoder/conv1/weight"]
        layers = {m.group(1) for name in variables if (m := _LAYER.match(name))}
        ffn = variables["encoder/layer_0/ffn/linear_0/weight"]
        return cls(
            mels=int(conv.shape[1]),
            width=int(conv.shape[0]),
            ffn=int(ffn.shape[0]),
            layers=len(layers),
        )

    def macs(self, window_s: float) -> float:
        """Multiply-accumulates of one window of ``window_s`` seconds (100 mel frames a second)."""
        frames = round(window_s * 100)
        positions = frames // 2
        d, f = self.width, self.ffn
        convolutions = frames * self.mels * d * 3 + positions * d * d * 3
        per_layer = 4 * positions * d * d + 2 * positions * positions * d + 2 * positions * d * f
        return float(convolutions + self.layers * per_layer)


def precision_of(backend: str) -> str:
    """The precision whose peak a backend's rate is held against: ``int8``, ``bf16`` or
    ``f32`` (``ctranslate2-int8`` → int8, ``openvino-bf16`` → bf16, the rest f32)."""
    if backend.endswith("int8"):
        return "int8"
    if backend.endswith("bf16"):
        return "bf16"
    return "f32"


def peak_gflops(precision: str, threads: int, rounds: int = 10) -> float:
    """The CPU's rate on the probe in ``precision`` (``f32``, ``bf16``, ``int8``) on
    ``threads`` threads, in G operations a second (two per MAC): the best of ``rounds``."""
    ov = import_openvino()
    import openvino.opset13 as op

    m, k, n = PROBE_SHAPE
    rng = np.random.default_rng(0)
    x = op.parameter([m, k], np.float32, name="x")
    weights = op.constant(rng.standard_normal((k, n)).astype(np.float32) * 0.05)
    if precision == "int8":
        low, high = op.constant(np.float32(-4)), op.constant(np.float32(4))
        w_low, w_high = op.constant(np.float32(-0.25)), op.constant(np.float32(0.25))
        inputs = op.fake_quantize(x, low, high, low, high, 256)
        weights = op.fake_quantize(weights, w_low, w_high, w_low, w_high, 255)
        product = op.matmul(inputs, weights, False, False)
    else:
        product = op.matmul(x, weights, False, False)
    config: dict[str, Any] = {
        "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
        "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "LATENCY",
    }
    compiled = ov.Core().compile_model(ov.Model([op.result(product)], [x]), "CPU", config)
    request = compiled.create_infer_request()
    data = rng.standard_normal((m, k)).astype(np.float32)
    for _ in range(3):  # the first runs prepare the kernels
        request.infer({0: data})
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        request.infer({0: data})
        best = min(best, time.perf_counter() - began)
    return 2 * m * k * n / best / 1e9
