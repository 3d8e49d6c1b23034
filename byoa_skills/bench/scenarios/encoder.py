"""``encoder``: the Whisper encoder on every backend this machine has, side by side in one run.

Each backend (CTranslate2 int8, faster-whisper's; CTranslate2 float32, the reference;
OpenVINO f32, OpenVINO bf16 where the CPU has bf16 units, and OpenVINO int8 with its float
layers at the CPU's float precision) encodes one real clip's window at 5, 10, 15 and 30 s, on
1 and on 2 threads, the backends taking turns round by round (the order rotates each round)
so that a slow moment of the machine falls on all of them. Beside the times: each backend's
agreement with CTranslate2 float32 (the mean cosine similarity of the encoder output's
frames, per window, over the real clips), and the word edits of its transcripts (the
engine's decode, the clip's language given, the decoder CTranslate2's int8 one) against
CTranslate2 int8's on the held-out part of the real-speech set (speech no choice and no
calibration saw; every third clip with ``--quick``), with the goal of the int8 encoder: no
more edits than CTranslate2 float32's, or 1 % of the words. The CPU ISA CTranslate2 selects is
recorded from its own log. And the roofline (:mod:`byoa_skills.bench.roofline`): each window's
GMAC, each backend's achieved rate at its p50, and its share of the CPU's peak for its
precision, measured by a matrix-multiply probe in the same run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.stats import summarize

NAME = "encoder"
TITLE = "The encoder backends: CTranslate2 and OpenVINO, per window and thread count"
WINDOWS = (5.0, 10.0, 15.0, 30.0)
THREADS = (1, 2)
#: The reference of agreement and of the word edits.
REFERENCE, DEFAULT = "ctranslate2-float32", "ctranslate2-int8"

Encode = Callable[[np.ndarray], np.ndarray]


def word_edit_limit(float32_edits: int, words: int) -> float:
    """The most word edits against CTranslate2 int8's transcripts an encoder may make and
    still keep the words: CTranslate2 float32's, or 1 % of the words, whichever is larger."""
    return max(float32_edits, words / 100)


def run(ctx: Context) -> dict[str, Any]:
    """Per backend, window and thread count the encoder's seconds; per backend and window
    the cosine with CTranslate2 float32; per backend the word edits against CTranslate2 int8;
    the machine's bf16 units and CTranslate2's ISA."""
    if ctx.settings.device == "cuda":
        raise Skip("the encoder backends are compared on the CPU")
    if not ctx.real:
        raise Skip("no real clips (tests/data/realspeech) to encode")
    from faster_whisper.feature_extractor import FeatureExtractor

    from byoa_skills.runtimes.speech.encoder_choice import choose_encoder, cpu_flags

    bf16 = choose_encoder("openvino").precision == "bf16"
    encoders = {threads: _encoders(ctx, threads, bf16) for threads in THREADS}
    backends = list(encoders[1])
    clips = [clip for group in ctx.real.values() for clip in group]
    extractor = FeatureExtractor()
    features = [extractor(c.samples.astype(np.float32) / 32768)[:, :-1] for c in clips]
    longest = max(features, key=lambda f: f.shape[-1])
    settings = ctx.settings
    ctx.reporter.start(NAME, settings.rounds * len(THREADS) + 3)

    agreement: dict[str, dict[str, float]] = {b: {} for b in backends}
    for window in WINDOWS:
        outputs = {b: [encoders[2][b](_window(f, window)) for f in features] for b in backends}
        for backend in backends:
            agreement[backend][f"{window:g}"] = float(
                np.mean(
                    [
                        _cosines(out, ref).mean()
                        for out, ref in zip(outputs[backend], outputs[REFERENCE], strict=True)
                    ]
                )
            )

    times: dict[str, dict[str, dict[str, list[list[float]]]]] = {
        b: {f"{t}": {f"{w:g}": [] for w in WINDOWS} for t in THREADS} for b in backends
    }
    for threads in THREADS:
        for window in WINDOWS:
            for backend in backends:  # warm: a shape's first pass prepares it
                encoders[threads][backend](_window(longest, window))
    for round_ in range(settings.rounds):
        for threads in THREADS:
            ctx.reporter.step(f"encoder, round {round_ + 1}, {threads} thread(s)")
            order = backends[round_ % len(backends) :] + backends[: round_ % len(backends)]
            for window in WINDOWS:
                batch = _window(longest, window)
                for backend in order:
                    encode = encoders[threads][backend]
                    seconds = []
                    for _ in range(settings.repeats):
                        began = time.perf_counter()
                        encode(batch)
                        seconds.append(time.perf_counter() - began)
                    times[backend][f"{threads}"][f"{window:g}"].append(seconds)
            ctx.reporter.advance()
    del encoders

    words = _word_edits(ctx, bf16)
    timing = {
        backend: {
            threads: {
                window: summarize([x for r in rounds for x in r], rounds).to_dict()
                for window, rounds in by_window.items()
            }
            for threads, by_window in by_threads.items()
        }
        for backend, by_threads in times.items()
    }
    ctx.reporter.step("encoder, the CPU's peak per precision")
    roofline = _roofline(ctx, timing, bf16)
    return {
        "backends": backends,
        "windows_s": list(WINDOWS),
        "threads": list(THREADS),
        "encode_s": timing,
        "vs_default": {
            backend: {
                t: {w: timing[backend][t][w]["p50"] / timing[DEFAULT][t][w]["p50"] for w in ws}
                for t, ws in timing[backend].items()
            }
            for backend in backends
        },
        "cosine_vs_float32": agreement,
        "word_edits_vs_int8": words,
        "clips": len(clips),
        "bf16_units": bf16,
        "cpu_flags_bf16": sorted(set((cpu_flags() or "").split()) & {"avx512_bf16", "amx_bf16"}),
        "ct2_isa": _ct2_isa(ctx),
        "roofline": roofline,
    }


def _roofline(
    ctx: Context, timing: dict[str, dict[str, dict[str, dict[str, float]]]], bf16: bool
) -> dict[str, Any]:
    """Each window's GMAC; the CPU's peak per precision and thread count (G operations a
    second); each backend's achieved rate at its p50 (``timing``'s) and its share of that
    peak."""
    from byoa_skills.bench.roofline import EncoderShape, peak_gflops, precision_of

    shape = EncoderShape.of_model(ctx.model_dir)
    gmac = {f"{w:g}": shape.macs(w) / 1e9 for w in WINDOWS}
    precisions = ["f32", "int8", *(["bf16"] if bf16 else [])]
    peak = {p: {f"{t}": peak_gflops(p, t) for t in THREADS} for p in precisions}
    achieved: dict[str, dict[str, dict[str, float]]] = {}
    share: dict[str, dict[str, dict[str, float]]] = {}
    for backend, by_threads in timing.items():
        achieved[backend], share[backend] = {}, {}
        for t in THREADS:
            rates = {w: 2 * gmac[w] / stats["p50"] for w, stats in by_threads[f"{t}"].items()}
            achieved[backend][f"{t}"] = rates
            top = peak[precision_of(backend)][f"{t}"]
            share[backend][f"{t}"] = {w: rate / top for w, rate in rates.items()}
    return {"gmac": gmac, "peak_gflops": peak, "achieved_gflops": achieved, "share_of_peak": share}


def _encoders(ctx: Context, threads: int, bf16: bool) -> dict[str, Encode]:
    """Each backend's encoder on ``threads`` threads: features in, encoder output out."""
    import ctranslate2

    from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model
    from byoa_skills.runtimes.speech.openvino_encoder import OpenVINOEncoder

    def ct2(compute_type: str) -> Encode:
        model = ctranslate2.models.Whisper(
            str(ctx.model_dir), device="cpu", compute_type=compute_type, intra_threads=threads
        )
        return lambda batch: np.asarray(model.encode(ctranslate2.StorageView.from_array(batch)))

    from byoa_skills.runtimes.speech.openvino_int8 import cached_int8_model

    source = cached_encoder_model(ctx.model_dir).source
    encoders = {DEFAULT: ct2("int8"), REFERENCE: ct2("float32")}
    for precision in ("f32", "bf16") if bf16 else ("f32",):
        encoders[f"openvino-{precision}"] = OpenVINOEncoder(
            source, precision=precision, threads=threads
        ).encode
    int8 = cached_int8_model(ctx.model_dir).source
    rest = "bf16" if bf16 else "f32"
    encoders["openvino-int8"] = OpenVINOEncoder(int8, precision=rest, threads=threads).encode
    return encoders


def _word_edits(ctx: Context, bf16: bool) -> dict[str, dict[str, Any]]:
    """Per backend, its transcripts' word edits against CTranslate2 int8's on the held-out
    part (the engine's decode on the whole window, the clip's language given, 2 threads),
    the words of CTranslate2 int8's transcripts, the clips, its word error rate against the
    clips' reference texts, and whether the backend keeps the words (edits no more than
    CTranslate2 float32's or 1 % of the words). On a CPU with bf16 units forcing OpenVINO runs
    bf16, so OpenVINO f32's words are not decoded there."""
    import soundfile

    from byoa_skills.bench.clips import REAL_DIR, real_records
    from byoa_skills.bench.scenarios.longform import word_errors
    from byoa_skills.pool.config import engine_decode_options
    from byoa_skills.runtimes.speech import WhisperCT2Backend

    records = real_records("held-out")
    if ctx.settings.quick:
        records = records[::3]
    if ctx.settings.model.endswith(".en"):
        records = [r for r in records if r["language"] == "en"]
    clips = [soundfile.read(REAL_DIR / r["file"], dtype="float32")[0] for r in records]
    options = engine_decode_options(None, ctx.settings.model)
    made = {
        DEFAULT: {"encoder_backend": "ctranslate2"},
        REFERENCE: {"encoder_backend": "ctranslate2", "compute_type": "float32"},
        "openvino-bf16" if bf16 else "openvino-f32": {"encoder_backend": "openvino"},
        "openvino-int8": {"encoder_backend": "openvino-int8"},
    }
    texts: dict[str, list[str]] = {}
    for backend, how in made.items():
        ctx.reporter.step(f"encoder, words of {backend}")
        speech = WhisperCT2Backend(ctx.model_dir, cpu_threads=2, options=options, **how)
        speech.load()
        texts[backend] = [
            speech.transcribe(clip, r["language"]).text
            for clip, r in zip(clips, records, strict=True)
        ]
        ctx.reporter.advance()
    edits: dict[str, dict[str, Any]] = {}
    for backend, heard in texts.items():
        pairs = [word_errors(ref, text) for ref, text in zip(texts[DEFAULT], heard, strict=True)]
        errors = [word_errors(r["text"], text) for r, text in zip(records, heard, strict=True)]
        edits[backend] = {
            "edits": sum(e for e, _ in pairs),
            "words": sum(n for _, n in pairs),
            "clips": len(records),
            "wer": round(sum(e for e, _ in errors) / max(1, sum(n for _, n in errors)), 4),
        }
    limit = word_edit_limit(edits[REFERENCE]["edits"], edits[DEFAULT]["words"])
    for figures in edits.values():
        figures["keeps_words"] = figures["edits"] <= limit
    return edits


def _ct2_isa(ctx: Context) -> str:
    """The CPU ISA CTranslate2 selects here (its own log at load), or ``"unknown"``."""
    code = (
        "import ctranslate2; "
        f"ctranslate2.models.Whisper({str(ctx.model_dir)!r}, compute_type='int8', intra_threads=1)"
    )
    env = {**os.environ, "CT2_VERBOSE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    found = re.search(r"Selected ISA: (\w+)", done.stderr + done.stdout)
    return found.group(1) if found else "unknown"


def _window(features: np.ndarray, seconds: float) -> np.ndarray:
    """``features`` cut or padded with zeros to ``seconds`` of mel frames, as a batch of one."""
    frames = round(seconds * 100)
    window = np.zeros((1, features.shape[0], frames), dtype=np.float32)
    used = min(frames, features.shape[-1])
    window[0, :, :used] = features[:, :used]
    return window


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def table_rows(entry: dict[str, Any]) -> list[list[str]]:
    """The figures of a run as rows: backend, window, p50 ms and the ratio to CTranslate2
    int8 on each thread count, mean cosine with CTranslate2 float32."""
    rows = []
    for backend in entry["backends"]:
        for window in entry["windows_s"]:
            w = f"{window:g}"
            cells = [backend, w]
            for threads in entry["threads"]:
                t = f"{threads}"
                p50 = entry["encode_s"][backend][t][w]["p50"]
                cells += [f"{p50 * 1000:.0f}", f"{entry['vs_default'][backend][t][w]:.2f}"]
            cells.append(f"{entry['cosine_vs_float32'][backend][w]:.5f}")
            rows.append(cells)
    return rows


def table_head(entry: dict[str, Any]) -> list[str]:
    """The column names of :func:`table_rows` ("x int8": the ratio to CTranslate2 int8's p50
    on the same threads and window; "cosine vs float32": with CTranslate2 float32)."""
    head = ["encoder", "window s"]
    for threads in entry["threads"]:
        head += [f"{threads} thread{'s' if threads > 1 else ''} p50 ms", "x int8"]
    return [*head, "cosine vs float32"]


def summary_line(entry: dict[str, Any]) -> str:
    """The words, the bf16 units and CTranslate2's ISA, in one sentence."""
    words = "; ".join(
        f"{backend} {figures['edits']} edit{'' if figures['edits'] == 1 else 's'} on "
        f"{figures['words']} words{_wer_words(figures)}"
        for backend, figures in entry["word_edits_vs_int8"].items()
        if backend != DEFAULT
    )
    reference = entry["word_edits_vs_int8"][DEFAULT]
    units = "yes" if entry["bf16_units"] else "no (OpenVINO runs f32 only; bf16 not measured)"
    held = reference.get("clips", entry["clips"])
    kept = [
        b for b, f in entry["word_edits_vs_int8"].items() if b != DEFAULT and f.get("keeps_words")
    ]
    return (
        f"Word edits against {DEFAULT}'s transcripts on {held} held-out real clips: {words}; "
        f"keep the words (no more edits than {REFERENCE}'s or 1 % of the words): "
        f"{', '.join(kept) or 'none'}.{_fastest_words(entry, kept)}"
        f"{f' {DEFAULT}{wer}.' if (wer := _wer_words(reference)) else ''} "
        f"bf16 units: {units}. CTranslate2's ISA: {entry['ct2_isa']}.{_roofline_words(entry)}"
    )


def _wer_words(figures: dict[str, Any]) -> str:
    """' (WER 0.054)' against the reference texts, or '' for a run that did not keep it."""
    return f" (WER {figures['wer']:.3f})" if "wer" in figures else ""


def _fastest_words(entry: dict[str, Any], kept: list[str]) -> str:
    """The fastest encoder that keeps the words at the whole window on the most threads, and
    its ratio to CTranslate2 int8 there."""
    window, threads = f"{max(entry['windows_s']):g}", f"{max(entry['threads'])}"
    keeping = [b for b in (DEFAULT, *kept) if b in entry["encode_s"]]
    fastest = min(keeping, key=lambda b: entry["encode_s"][b][threads][window]["p50"])
    ratio = entry["vs_default"][fastest][threads][window]
    return (
        f" The fastest that keeps them at the {window} s window on {threads} threads: "
        f"{fastest}, {ratio:.2f}x {DEFAULT}'s time."
    )


def _roofline_words(entry: dict[str, Any]) -> str:
    """The roofline at the whole window, in sentences ("" for a run without one)."""
    roofline = entry.get("roofline")
    if not roofline:
        return ""
    window = f"{max(entry['windows_s']):g}"
    peaks = "; ".join(
        f"{precision} " + " / ".join(f"{v:.0f}" for v in by_threads.values())
        for precision, by_threads in roofline["peak_gflops"].items()
    )
    threads = " / ".join(f"{t}" for t in entry["threads"])
    rates = "; ".join(
        f"{backend} "
        + " / ".join(
            f"{roofline['achieved_gflops'][backend][t][window]:.0f} "
            f"({roofline['share_of_peak'][backend][t][window]:.0%})"
            for t in roofline["achieved_gflops"][backend]
        )
        for backend in entry["backends"]
    )
    return (
        f" Roofline at the {window} s window ({roofline['gmac'][window]:.1f} GMAC), G operations "
        f"a second on {threads} threads: the CPU's peak (matrix-multiply probe) {peaks}; "
        f"achieved at the p50 (share of its precision's peak) {rates}."
    )
