"""``byoa-skills transcribe FILE...``: the text of each recording, from the model in this
process. A clip as sites send it is transcribed as it is; any other audio file (any format,
rate and channel count, any length up to ``--max-minutes``) is decoded to 16 kHz mono, cut on
the VAD into pieces of at most one window and transcribed piece by piece, with a progress bar.
A long file is decoded and cut in bounded blocks as its pieces are transcribed, never held
whole: the same :class:`~byoa_skills.recordings.RecordingService` as the local API's OpenAI
routes, with the pieces on the model in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
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
from byoa_skills.recordings import (
    DEFAULT_MAX_SECONDS,
    AudioFile,
    Piece,
    RecordingError,
    RecordingFailure,
    RecordingOptions,
    RecordingResult,
    RecordingService,
    open_audio,
)
from byoa_skills.runtimes.speech.openvino_int8 import BUILD_LOGGER
from byoa_skills.wav import MAX_CLIP_SECONDS, SAMPLE_RATE, WavError, parse_wav

#: The shortest ``--max-minutes`` taken.
MIN_MINUTES = 0.01


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
        "--max-minutes",
        type=minutes,
        default=DEFAULT_MAX_SECONDS / 60,
        help=f"the longest recording taken (default {DEFAULT_MAX_SECONDS / 60:g})",
    )
    add_model_arguments(command)
    command.set_defaults(run=run, log_level="warning")


def run(args: argparse.Namespace) -> int:
    """Transcribe the files one by one, printing each text as soon as it is known."""
    configure_logging(args.log_level)
    if logging.getLogger().level == logging.WARNING:  # the default: a long first build is said
        logging.getLogger(BUILD_LOGGER).setLevel(logging.INFO)
    if args.language is not None:
        try:
            require_language(args.model, args.language)
        except ModelError as error:
            print(f"byoa-skills: {error.code}: {error.message}", file=sys.stderr)
            return EXIT_USAGE
    model = resolve_model(args)
    if model is None:
        return EXIT_INVALID
    from byoa_skills.runtimes.speech import load_backend

    name, folder, device = model
    backend = load_backend(
        folder,
        model_name=name,
        device=device,
        cpu_threads=args.threads,
        backend=args.backend,
        encoder_backend=args.encoder_backend,
    )
    recordings = RecordingService.in_process(
        backend, name, backend.options.encoder_seconds, args.max_minutes * 60
    )
    status = EXIT_VALID
    for path in args.files:
        report: dict[str, Any] = {"file": path, "ok": False, "code": None, "message": None}
        try:
            with open(path, "rb") as file:
                data = file.read()
            began = time.monotonic()
            audio = _audio(data, args.max_minutes * 60)
            heard = asyncio.run(_transcribe(recordings, audio, args.language))
            report.update(
                ok=True,
                text=heard.text,
                language=heard.language,
                seconds=round(audio.seconds, 3),
                elapsed=round(time.monotonic() - began, 3),
            )
        except OSError as error:
            report.update(code="unreadable", message=error.strerror or str(error))
        except (WavError, RecordingError, RecordingFailure) as refusal:
            report.update(code=refusal.code, message=refusal.message)
        print(
            json.dumps(report, ensure_ascii=False) if args.json else _describe(report), flush=True
        )
        if report["code"] == "unreadable":
            status = EXIT_USAGE
        elif not report["ok"] and status == EXIT_VALID:
            status = EXIT_INVALID
    return status


def minutes(text: str) -> float:
    """An argparse ``type`` for ``--max-minutes``: a finite number of at least
    :data:`MIN_MINUTES`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= MIN_MINUTES):
        raise argparse.ArgumentTypeError(
            f"must be a finite number of at least {MIN_MINUTES:g}, got {text!r}"
        )
    return value


def _audio(data: bytes, max_seconds: float) -> AudioFile:
    """The file's audio: a sites' clip as it is, anything else decoded once to measure it. A
    RIFF file no decoder reads is refused with the strict WAV check's code."""
    try:
        clip = parse_wav(data, max_seconds=MAX_CLIP_SECONDS)
        return AudioFile(data, "wav", clip.frames, MAX_CLIP_SECONDS)
    except WavError as refused:
        strict = refused
    try:
        return open_audio(data, max_seconds)
    except RecordingError as error:
        if error.code == "audio-undecodable" and data[:4] == b"RIFF":
            raise strict from None
        raise


async def _transcribe(
    recordings: RecordingService, audio: AudioFile, language: str | None
) -> RecordingResult:
    """The whole recording's transcript, piece by piece as it is decoded and cut, with a
    progress bar on stderr when it is longer than one piece."""
    bar = _ProgressBar(recordings.window_seconds)
    try:
        return await recordings.transcribe(
            audio,
            RecordingOptions(language=language),
            on_measured=bar.start,
            on_piece=bar.advance,
        )
    finally:
        bar.close()


class _ProgressBar:
    """A progress bar on stderr, in seconds of the recording, for one longer than a piece."""

    def __init__(self, window_seconds: float) -> None:
        self.window_seconds = window_seconds
        self._shown: Any = None
        self._task: Any = None

    async def start(self, seconds: float) -> None:
        if seconds <= self.window_seconds:
            return
        from rich.console import Console
        from rich.progress import Progress

        self._shown = Progress(console=Console(stderr=True), transient=True)
        self._shown.start()
        self._task = self._shown.add_task("transcribing", total=round(seconds, 1))

    async def advance(self, piece: Piece, text: str) -> None:
        if self._shown is not None:
            self._shown.update(self._task, completed=round(piece.end / SAMPLE_RATE, 1))

    def close(self) -> None:
        if self._shown is not None:
            self._shown.stop()


def _describe(report: dict[str, Any]) -> str:
    if report["ok"]:
        return f"{report['file']}: {report['text']}"
    return f"{report['file']}: {report['code']}: {report['message']}"
