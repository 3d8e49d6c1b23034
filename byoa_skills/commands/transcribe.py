"""``byoa-skills transcribe FILE...``: the text of each recording, from the model in this
process. A clip as sites send it is transcribed as it is; any other audio file (any format,
rate and channel count, any length up to ``--max-minutes``) is decoded to 16 kHz mono, cut on
the VAD into pieces of at most one window and transcribed piece by piece, with a progress bar.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from byoa_skills.commands.common import (
    add_model_arguments,
    configure_logging,
    number_at_least,
    resolve_model,
    whole_number,
)
from byoa_skills.commands.wav_check import EXIT_INVALID, EXIT_USAGE, EXIT_VALID
from byoa_skills.models import ModelError, require_language
from byoa_skills.recordings import (
    DEFAULT_MAX_SECONDS,
    RecordingError,
    cut,
    decode_audio,
    join_text,
    piece_seconds,
)
from byoa_skills.wav import MAX_CLIP_SECONDS, SAMPLE_RATE, WavError, parse_wav


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``transcribe`` to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "transcribe",
        help="print the text spoken in audio files",
        description=(
            "Transcribe each FILE with the model in this process, with the engine's decoding "
            "options: a WAV clip as the audio.transcribe skill takes it, or any audio file "
            "PyAV or libsndfile decodes (WAV, FLAC, MP3, OGG, M4A...), at any rate and "
            "channel count and as long as --max-minutes, cut into pieces of at most 30 s. "
            "Exit 0 when every file is transcribed, 1 when any is refused, 2 for a usage "
            "error or an unreadable file."
        ),
    )
    command.add_argument("files", nargs="+", metavar="FILE")
    command.add_argument("--language", help="the language spoken (default: detect it)")
    command.add_argument(
        "--threads", type=whole_number(0), default=0, help="CPU threads (default 0: all)"
    )
    command.add_argument("--json", action="store_true", help="print one JSON object per file")
    command.add_argument(
        "--max-minutes", type=number_at_least(0.01), default=DEFAULT_MAX_SECONDS / 60,
        help=f"the longest recording taken (default {DEFAULT_MAX_SECONDS / 60:g})",
    )  # fmt: skip
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
                data = file.read()
            began = time.monotonic()
            samples = _samples(data, args.max_minutes * 60)
            text, language = _transcribe(backend, samples, args.language)
            report.update(
                ok=True, text=text, language=language,
                seconds=round(len(samples) / SAMPLE_RATE, 3),
                elapsed=round(time.monotonic() - began, 3),
            )  # fmt: skip
        except OSError as error:
            report.update(code="unreadable", message=error.strerror or str(error))
        except (WavError, RecordingError, RuntimeRefusal) as refusal:
            report.update(code=refusal.code, message=refusal.message)
        print(
            json.dumps(report, ensure_ascii=False) if args.json else _describe(report), flush=True
        )
        if report["code"] == "unreadable":
            status = EXIT_USAGE
        elif not report["ok"] and status == EXIT_VALID:
            status = EXIT_INVALID
    return status


def _samples(data: bytes, max_seconds: float) -> Any:
    """The float32 16 kHz mono samples of a file: a sites' clip as it is, anything else
    decoded. A RIFF file no decoder reads is refused with the strict WAV check's code."""
    try:
        return parse_wav(data, max_seconds=MAX_CLIP_SECONDS).to_float32()
    except WavError as refused:
        strict = refused
    try:
        return decode_audio(data, max_seconds).to_float32()
    except RecordingError as error:
        if error.code == "audio-undecodable" and data[:4] == b"RIFF":
            raise strict from None
        raise


def _transcribe(backend: Any, samples: Any, language: str | None) -> tuple[str, str | None]:
    """The text of the whole recording, piece by piece, with a progress bar on stderr for
    more than one piece; and the language (detected in the first piece when not given)."""
    pieces = cut(samples, piece_seconds(backend.options.encoder_seconds))
    if len(pieces) <= 1:
        transcript = backend.transcribe(samples, language)
        return transcript.text, transcript.language
    from rich.console import Console
    from rich.progress import Progress

    texts: list[str] = []
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("transcribing", total=len(pieces))
        for piece in pieces:
            transcript = backend.transcribe(samples[piece.start : piece.end], language)
            language = language or (transcript.language if transcript.text else None)
            texts.append(transcript.text)
            progress.advance(task)
    return join_text(texts), language


def _describe(report: dict[str, Any]) -> str:
    if report["ok"]:
        return f"{report['file']}: {report['text']}"
    return f"{report['file']}: {report['code']}: {report['message']}"
