"""The int8 encoder's words, against CTranslate2 int8's (faster-whisper's), on one part of the
real-speech set: how the list of layers kept float is chosen on ``tune`` and then measured on
``held-out``.

For each encoder (CTranslate2 int8, the reference; CTranslate2 float32; OpenVINO's float graph
at this CPU's precision; OpenVINO int8 with ``--kept-float``) every clip of the part is
transcribed as the engine decodes (``engine_decode_options``, the clip's language given, two
threads); printed per encoder: the word edits against CTranslate2 int8's transcripts, the
words, and the word error rate against the clips' reference texts. The goal of the int8
encoder: edits no more than CTranslate2 float32's, or 1 % of the words, whichever is larger.

    .venv/bin/python scripts/measure_int8_encoder.py --part tune [--kept-float REGEX ...]
    .venv/bin/python scripts/measure_int8_encoder.py --part held-out

``--kept-float`` builds the int8 model with those node-name patterns kept float in a scratch
cache (the installation's own cache is not touched); without it the patterns the engine uses
(``KEPT_FLOAT``) run from the engine's cache. ``--no-bf16`` decides as on a CPU without bf16
units (OpenVINO's float graph and int8's float layers in f32), as a VNNI-only CPU runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

import numpy as np
import soundfile

from byoa_skills.bench.clips import PARTS, REAL_DIR, real_records
from byoa_skills.bench.scenarios.encoder import word_edit_limit
from byoa_skills.bench.scenarios.longform import word_errors
from byoa_skills.models import ensure_model
from byoa_skills.pool.config import engine_decode_options
from byoa_skills.runtimes.speech import WhisperCT2Backend


def transcripts(model_dir: Any, records: list[dict[str, Any]], **how: Any) -> list[str]:
    """Each record's transcript by a backend made with ``how``."""
    options = engine_decode_options(None, model_dir.name)
    speech = WhisperCT2Backend(model_dir, cpu_threads=2, options=options, **how)
    speech.load()
    print(
        f"  {how}: encoder {speech.encoder.label} ({speech.encoder.precision_said})",
        file=sys.stderr,
    )
    texts = []
    for record in records:
        samples, _ = soundfile.read(REAL_DIR / record["file"], dtype="float32")
        texts.append(speech.transcribe(samples, record["language"]).text)
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=PARTS, required=True)
    parser.add_argument("--model", default="base")
    parser.add_argument("--kept-float", nargs="*", default=None, metavar="REGEX")
    parser.add_argument("--no-bf16", action="store_true", help="float layers f32, bf16 or not")
    parser.add_argument("--json", help="write the figures and transcripts here")
    parser.add_argument(
        "--baseline", help="take the other encoders' transcripts from this --json of the same part"
    )
    args = parser.parse_args(argv)
    model_dir = ensure_model(args.model)
    if args.no_bf16:
        from byoa_skills.runtimes.speech import encoder_choice

        flags = (encoder_choice.cpu_flags() or "").split()
        kept = " ".join(f for f in flags if f not in encoder_choice.BF16_FLAGS)
        encoder_choice.cpu_flags = lambda path=encoder_choice.CPUINFO: kept
    records = real_records(args.part)
    if args.kept_float is not None:
        from byoa_skills.runtimes.speech import openvino_int8

        openvino_int8.KEPT_FLOAT = tuple(args.kept_float)
        os.environ["BYOA_SKILLS_HOME"] = tempfile.mkdtemp(prefix="int8-choice-")
    made = {
        "ctranslate2-int8": {"encoder_backend": "ctranslate2"},
        "ctranslate2-float32": {"encoder_backend": "ctranslate2", "compute_type": "float32"},
        "openvino-float": {"encoder_backend": "openvino"},
        "openvino-int8": {"encoder_backend": "openvino-int8"},
    }
    texts: dict[str, list[str]] = {}
    if args.baseline:
        with open(args.baseline, encoding="utf-8") as file:
            texts = {k: v for k, v in json.load(file)["texts"].items() if k != "openvino-int8"}
    for name, how in made.items():
        if name not in texts:
            texts[name] = transcripts(model_dir, records, **how)
    figures = {}
    for name, heard in texts.items():
        edits = [word_errors(a, b) for a, b in zip(texts["ctranslate2-int8"], heard, strict=True)]
        wer = [word_errors(r["text"], h) for r, h in zip(records, heard, strict=True)]
        figures[name] = {
            "edits_vs_int8": sum(e for e, _ in edits),
            "words": sum(n for _, n in edits),
            "clips_changed": sum(1 for e, _ in edits if e),
            "wer": sum(e for e, _ in wer) / max(1, sum(n for _, n in wer)),
        }
    limit = word_edit_limit(
        figures["ctranslate2-float32"]["edits_vs_int8"], figures["ctranslate2-int8"]["words"]
    )
    print(f"part {args.part}, {len(records)} clips, {args.model}, kept float {args.kept_float}")
    for name, f in figures.items():
        print(
            f"{name:22} edits vs ctranslate2-int8 {f['edits_vs_int8']:3d} on {f['words']} words "
            f"({f['clips_changed']} clips changed), WER {f['wer']:.3f}"
        )
    int8 = figures["openvino-int8"]["edits_vs_int8"]
    print(f"goal: int8 edits <= {limit:g}: {'met' if int8 <= limit else 'not met'} ({int8})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"figures": figures, "limit": limit, "texts": texts}, file, indent=1)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
