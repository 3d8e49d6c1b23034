"""``byoa-skills transcribe FILE...``: the text of each clip, from the model in this process."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from byoa_skills.commands.common import (
    add_model_arguments,
    configure_logging,
    resolve_model,
    whole_number,
)
from byoa_skills.commands.wav_check import EXIT_INVALID, EXIT_USAGE, EXIT_VALID
from byoa_skills.models import ModelError, require_language
from byoa_skills.wav import MAX_CLIP_SECONDS, WavError, parse_wav


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``transcribe`` to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "transcribe",
        help="print the text spoken in WAV clips",
        description=(
            "Transcribe each FILE (16 kHz mono 16-bit PCM WAV, at most 15 s, as the "
            "audio.transcribe skill takes) with the model in this process, with the engine's "
            "decoding options. Exit 0 when every file is transcribed, 1 when any is refused, "
            "2 for a usage error or an unreadable file."
        ),
    )
    command.add_argument("files", nargs="+", metavar="FILE")
    command.add_argument("--language", help="the language spoken (default: detect it)")
    command.add_argument(
        "--threads", type=whole_number(0), default=0, help="CPU threads (default 0: all)"
    )
    command.add_argument("--json", action="store_true", help="print one JSON object per file")
    add_model_arguments(command)
    command.set_defaults(run=run, log_level="warning")


def run(args: argparse.Namespace) -> int:
    """Transcribe the files one by one, printing each text as soon as it is known."""
    configure_logging(args.log_level)
    if args.language is not None:
        try:
            require_language(args.model, args.language)
        except ModelError as error:
            print(f"byoa-skills: {error.code}: {error.message}", file=sys.stderr)
            return EXIT_USAGE
    model = resolve_model(args)
    if model is None:
        return EXIT_INVALID
    from byoa_skills.runtimes.speech import RuntimeRefusal, load_backend

    name, folder, device = model
    backend = load_backend(
        folder, model_name=name, device=device, cpu_threads=args.threads, backend=args.backend
    )
    status = EXIT_VALID
    for path in args.files:
        report: dict[str, Any] = {"file": path, "ok": False, "code": None, "message": None}
        try:
            with open(path, "rb") as file:
                clip = parse_wav(file.read(), max_seconds=MAX_CLIP_SECONDS)
            began = time.monotonic()
            transcript = backend.transcribe(clip.to_float32(), args.language)
            report.update(
                ok=True, text=transcript.text, language=transcript.language,
                seconds=round(clip.seconds, 3), elapsed=round(time.monotonic() - began, 3),
            )  # fmt: skip
        except OSError as error:
            report.update(code="unreadable", message=error.strerror or str(error))
        except (WavError, RuntimeRefusal) as refusal:
            report.update(code=refusal.code, message=refusal.message)
        print(
            json.dumps(report, ensure_ascii=False) if args.json else _describe(report), flush=True
        )
        if report["code"] == "unreadable":
            status = EXIT_USAGE
        elif not report["ok"] and status == EXIT_VALID:
            status = EXIT_INVALID
    return status


def _describe(report: dict[str, Any]) -> str:
    if report["ok"]:
        return f"{report['file']}: {report['text']}"
    return f"{report['file']}: {report['code']}: {report['message']}"
