"""``byoa-skills wav check FILE...``: is each file a clip ``audio.transcribe`` takes?"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from byoa_skills.wav import MAX_CLIP_SECONDS, WavError, max_wav_bytes, parse_wav

#: Files are read whole up to this size (or more when a long limit needs it); larger ones
#: are refused as ``too-large`` without reading them.
READ_LIMIT_BYTES = 64 * 1024 * 1024

EXIT_VALID, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``wav check`` to the ``byoa-skills`` parser."""
    wav = subparsers.add_parser("wav", help="check WAV files against the skill's audio format")
    wav_commands = wav.add_subparsers(dest="wav_command", metavar="COMMAND", required=True)
    check = wav_commands.add_parser(
        "check",
        help="check that each file is a 16 kHz mono 16-bit PCM WAV within the limit",
        description=(
            "Check each FILE exactly as audio.transcribe checks a clip. Exit 0 when every "
            "file is valid, 1 when any is not, 2 for a usage error or an unreadable file."
        ),
    )
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--json", action="store_true", help="print one JSON object per file")
    check.add_argument(
        "--max-seconds",
        type=_positive_seconds,
        default=MAX_CLIP_SECONDS,
        metavar="S",
        help=f"the longest clip accepted, in seconds (default {MAX_CLIP_SECONDS:g})",
    )
    check.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check every file, print one line (or JSON object) each, and return the exit status."""
    status = EXIT_VALID
    for path in args.files:
        report = check_file(path, args.max_seconds)
        print(json.dumps(report) if args.json else _describe(report), flush=True)
        if report["code"] == "unreadable":
            status = EXIT_USAGE
        elif not report["ok"] and status == EXIT_VALID:
            status = EXIT_INVALID
    return status


def check_file(path: str, max_seconds: float) -> dict[str, Any]:
    """Check one file: ``{"file", "ok", "code", "message", "frames", "seconds"}``."""
    report: dict[str, Any] = {
        "file": path,
        "ok": False,
        "code": None,
        "message": None,
        "frames": None,
        "seconds": None,
    }
    read_limit = max(READ_LIMIT_BYTES, max_wav_bytes(max_seconds))
    try:
        with open(path, "rb") as file:
            data = file.read(read_limit + 1)
    except OSError as error:
        report.update(code="unreadable", message=error.strerror or str(error))
        return report
    if len(data) > read_limit:
        report.update(code="too-large", message=f"the file is larger than {read_limit} bytes")
        return report
    try:
        clip = parse_wav(data, max_seconds=max_seconds)
    except WavError as error:
        report.update(code=error.code, message=error.message)
        return report
    report.update(ok=True, frames=clip.frames, seconds=clip.seconds)
    return report


def _describe(report: dict[str, Any]) -> str:
    if report["ok"]:
        return f"{report['file']}: ok, {report['frames']} frames, {report['seconds']:.3f} s"
    return f"{report['file']}: {report['code']}: {report['message']}"


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value
