"""What a decode step costs on this CPU: CTranslate2's (faster-whisper's own decoder) against a
step of the same shapes in OpenVINO, to judge whether a decoder of the engine's own would pay.

- CTranslate2: the model's decoder on a real clip's whole window (int8, one thread, the
  engine's kernels): a decode stopped after its first step, and the whole clip, beam 5 and
  greedy, best of ``--repeats``; a later step is their difference over the tokens between.
- OpenVINO: one step of a decoder of the model's shapes with **random** weights (int8, one
  scale per output row) on one thread: self-attention over a cache of ``--past`` tokens, the
  cross-attention's keys and values shared by the beams (the beams are the query rows of one
  attention), the vocabulary projection; median of 40 steps, with OpenVINO's own counters of
  the three largest kinds of node. Its tokens mean nothing: it times the shapes only.

    .venv/bin/python scripts/measure_decoder_step.py --model base
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "realspeech"
CLIP = "en-arctic-awb-a0007.flac"
#: <|startoftranscript|><|en|><|transcribe|> in the multilingual vocabulary.
PROMPT = [50258, 50259, 50359]


def ct2_step_ms(model_dir: Path, repeats: int) -> None:
    """CTranslate2's first step and later steps on a real clip, printed."""
    from faster_whisper import WhisperModel
    from faster_whisper.audio import decode_audio

    model = WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=1)
    features = model.feature_extractor(decode_audio(str(DATA / CLIP)))[:, :3000]
    features = np.pad(features, ((0, 0), (0, 3000 - features.shape[1])))
    encoded = model.encode(features)

    def best(beam: int, max_length: int) -> tuple[float, int]:
        times, tokens = [], 0
        for _ in range(repeats):
            began = time.perf_counter()
            result = model.model.generate(encoded, [PROMPT], beam_size=beam, max_length=max_length)
            times.append(time.perf_counter() - began)
            tokens = len(result[0].sequences_ids[0])
        return min(times) * 1000, tokens

    for beam in (5, 1):
        first, _ = best(beam, len(PROMPT) + 1)
        whole, tokens = best(beam, 448)
        later = (whole - first) / max(1, tokens - 1)
        print(
            f"CTranslate2, beam {beam}: first step {first:.1f} ms, the clip {whole:.1f} ms "
            f"({tokens} tokens), a later step {later:.1f} ms"
        )


def _decoder_step(ov: Any, shapes: dict[str, int], beams: int, past: int) -> Any:
    import openvino.opset13 as op

    d, heads, layers, ffn, vocab, positions = (
        shapes[k] for k in ("width", "heads", "layers", "ffn", "vocab", "positions")
    )
    size = d // heads
    rng = np.random.default_rng(0)

    def product(x: Any, rows: int, cols: int) -> Any:
        weights = rng.standard_normal((rows, cols)).astype(np.float32) * 0.05
        scale = np.abs(weights).max(axis=1, keepdims=True) / 127
        q = np.round(weights / scale).astype(np.int8)
        widened = op.multiply(op.convert(op.constant(q), ov.Type.f32), op.constant(scale))
        return op.matmul(x, widened, False, True)

    def norm(x: Any) -> Any:
        return op.mvn(x, op.constant(np.array([-1])), True, 1e-5, "inside_sqrt")

    def split_heads(x: Any, order: tuple[int, ...], shape: tuple[int, ...]) -> Any:
        return op.transpose(
            op.reshape(x, op.constant(np.array(shape)), False), op.constant(np.array(order))
        )

    def join_heads(x: Any) -> Any:
        merged = op.transpose(x, op.constant(np.array([0, 2, 1, 3])))
        return op.reshape(merged, op.constant(np.array([beams, 1, d])), False)

    state = op.parameter([beams, 1, d], np.float32, name="h")
    inputs, kept = [state], []
    per_beam = (beams, 1, heads, size)
    for layer in range(layers):
        cache = [
            op.parameter([beams, heads, past, size], np.float32, name=f"self_{kind}{layer}")
            for kind in "kv"
        ]
        cross = [
            op.parameter([1, heads, positions, size], np.float32, name=f"cross_{kind}{layer}")
            for kind in "kv"
        ]
        inputs += [*cache, *cross]
        q, k, v = op.split(product(norm(state), 3 * d, d), op.constant(np.int64(-1)), 3).outputs()
        k, v = (split_heads(x, (0, 2, 1, 3), per_beam) for x in (k, v))
        kept += [k, v]
        keys, values = op.concat([cache[0], k], 2), op.concat([cache[1], v], 2)
        query = split_heads(q, (0, 2, 1, 3), per_beam)
        attended = op.scaled_dot_product_attention(query, keys, values, causal=False)
        state = op.add(state, product(join_heads(attended), d, d))
        query = split_heads(product(norm(state), d, d), (0, 2, 1, 3), (1, beams, heads, size))
        attended = op.scaled_dot_product_attention(query, cross[0], cross[1], causal=False)
        state = op.add(state, product(join_heads(attended), d, d))
        hidden = op.gelu(product(norm(state), ffn, d), "erf")
        state = op.add(state, product(hidden, d, ffn))
    logits = product(norm(state), vocab, d)
    return ov.Model([op.result(logits)] + [op.result(x) for x in kept], inputs)


def openvino_step_ms(shapes: dict[str, int], past: int) -> None:
    """One OpenVINO decoder step of ``shapes``, beam 5 and greedy, printed with its counters."""
    from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

    ov = import_openvino()
    rng = np.random.default_rng(1)
    config = {
        "INFERENCE_NUM_THREADS": 1,
        "PERFORMANCE_HINT": "LATENCY",
        "ENABLE_CPU_PINNING": False,
        "INFERENCE_PRECISION_HINT": "bf16",
        "PERF_COUNT": True,
    }
    for beams in (5, 1):
        compiled = ov.Core().compile_model(_decoder_step(ov, shapes, beams, past), "CPU", config)
        request = compiled.create_infer_request()
        for tensor in compiled.inputs:
            data = rng.standard_normal(tuple(tensor.get_shape())).astype(np.float32)
            request.set_tensor(tensor.get_any_name(), ov.Tensor(data, shared_memory=True))
        for _ in range(5):
            request.infer()
        times, by_kind = [], collections.Counter()
        for _ in range(40):
            began = time.perf_counter()
            request.infer()
            times.append((time.perf_counter() - began) * 1000)
            for node in request.profiling_info:
                by_kind[node.node_type] += node.real_time.total_seconds() * 1000 / 40
        kinds = ", ".join(f"{kind} {ms:.2f}" for kind, ms in by_kind.most_common(3))
        print(f"OpenVINO, {beams} beams: a step {statistics.median(times):.2f} ms ({kinds} ms)")


def model_shapes(model_dir: Path) -> dict[str, int]:
    """The decoder's shapes, read from a CTranslate2 ``model.bin``."""
    from byoa_skills.runtimes.speech.ct2_weights import read_ct2_variables

    variables = read_ct2_variables(model_dir / "model.bin")
    embeddings = variables["decoder/embeddings/weight"]
    layers = {name.split("/")[1] for name in variables if name.startswith("decoder/layer_")}
    return {
        "width": int(embeddings.shape[1]),
        "vocab": int(embeddings.shape[0]),
        "heads": int(np.asarray(variables["decoder/num_heads"]).reshape(-1)[0]),
        "layers": len(layers),
        "ffn": int(variables["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "positions": 1500,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="base", help="catalog model (multilingual)")
    parser.add_argument("--repeats", type=int, default=3, help="CTranslate2's runs, best kept")
    parser.add_argument("--past", type=int, default=12, help="tokens in the self-attention cache")
    args = parser.parse_args()
    from byoa_skills.models import ensure_model

    model_dir = Path(ensure_model(args.model))
    ct2_step_ms(model_dir, args.repeats)
    openvino_step_ms(model_shapes(model_dir), args.past)


if __name__ == "__main__":
    main()
