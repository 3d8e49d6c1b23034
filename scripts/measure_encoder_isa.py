"""The encoders at the whole 30 s window on 2 threads with the CPU's instruction set capped, as a
stand-in for CPUs this machine is not: oneDNN's ``ONEDNN_MAX_CPU_ISA`` caps what OpenVINO's
kernels use, ``CT2_FORCE_CPU_ISA`` picks CTranslate2's. Each cap runs in a process of its own:
CTranslate2 int8 (faster-whisper's encoder), OpenVINO f32, OpenVINO bf16 where the cap has
bf16, and OpenVINO int8 with its float layers at the cap's float precision; the p50 of 7 passes
over one calibration window (real speech), in ms, and int8's ratio to CTranslate2 int8.

A capped ISA on one CPU is not another CPU (its caches, clocks and memory stay this one's):
these figures show which way a choice goes, and are labelled as emulated wherever quoted.

    .venv/bin/python scripts/measure_encoder_isa.py [--model base]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

#: Name, oneDNN's cap, CTranslate2's ISA, the float precision OpenVINO runs beside int8.
CAPS = (
    ("this CPU", "", "", ""),
    ("AVX-512 with bf16, no AMX", "AVX512_CORE_BF16", "AVX512", "bf16"),
    ("AVX-512 VNNI, no bf16", "AVX512_CORE_VNNI", "AVX512", "f32"),
    ("AVX2 only", "AVX2", "AVX2", "f32"),
)


def measure(model: str, rest: str) -> dict[str, float]:
    """The p50 ms of each encoder in this process (its environment sets the cap)."""
    import ctranslate2
    import numpy as np
    import openvino as ov

    from byoa_skills.models import ensure_model
    from byoa_skills.runtimes.speech.calibration import calibration_windows
    from byoa_skills.runtimes.speech.encoder_choice import choose_encoder
    from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model
    from byoa_skills.runtimes.speech.openvino_int8 import cached_int8_model

    model_dir = ensure_model(model)
    rest = rest or choose_encoder("openvino-int8").inference
    int8 = cached_int8_model(model_dir).source
    floats = cached_encoder_model(model_dir).source
    window = calibration_windows(
        ov.Core().read_model(floats).input(0).get_partial_shape()[1].get_length()
    )[5]

    def p50(run: object) -> float:
        for _ in range(2):
            run()  # type: ignore[operator]
        seconds = []
        for _ in range(7):
            began = time.perf_counter()
            run()  # type: ignore[operator]
            seconds.append(time.perf_counter() - began)
        return float(np.median(seconds) * 1000)

    ct2 = ctranslate2.models.Whisper(str(model_dir), compute_type="int8", intra_threads=2)
    storage = ctranslate2.StorageView.from_array(window)
    times = {"ctranslate2-int8": p50(lambda: ct2.encode(storage))}
    core = ov.Core()
    runs = [
        ("openvino-f32", floats, "f32"),
        *([("openvino-bf16", floats, "bf16")] if rest == "bf16" else []),
    ]
    runs.append((f"openvino-int8 (float layers {rest})", int8, rest))
    for name, source, precision in runs:
        config = {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": "LATENCY"}
        request = core.compile_model(source, "CPU", {**config, "INFERENCE_NUM_THREADS": 2})
        infer = request.create_infer_request()
        times[name] = p50(lambda infer=infer: infer.infer({0: window}))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--child", nargs=1, metavar="REST", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.model, args.child[0])))
        return 0
    print("| CPU (emulated by capping the ISA) | encoder | p50 ms | x ctranslate2-int8 |")
    print("|---|---|---|---|")
    for name, onednn, ct2, rest in CAPS:
        env = dict(os.environ)
        env.update({"ONEDNN_MAX_CPU_ISA": onednn} if onednn else {})
        env.update({"CT2_FORCE_CPU_ISA": ct2} if ct2 else {})
        done = subprocess.run(
            [sys.executable, __file__, "--model", args.model, "--child", rest],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        times = json.loads(done.stdout.strip().splitlines()[-1])
        for encoder, ms in times.items():
            ratio = ms / times["ctranslate2-int8"]
            print(f"| {name} | {encoder} | {ms:.0f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
