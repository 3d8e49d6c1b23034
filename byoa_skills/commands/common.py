"""What several subcommands share: the model and device options, logging."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from byoa_skills.models import DEFAULT_MODEL, ModelError, ensure_model
from byoa_skills.models.cli import progress_bar

DEVICES = ("cpu", "cuda", "auto")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--model-dir``, ``--device`` and ``--log-level``."""
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"catalog model name (default {DEFAULT_MODEL})"
    )
    parser.add_argument(
        "--model-dir", type=Path, help="take the model's files from this folder (verified)"
    )
    parser.add_argument(
        "--device", choices=DEVICES, default="cpu",
        help="cpu (int8), cuda (float16), or auto: cuda when a GPU answers, else cpu",
    )  # fmt: skip
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"),
        help="log lines on stderr at this level and above (default info)",
    )  # fmt: skip


def configure_logging(level: str) -> None:
    """One line per event on stderr: time, level, source, then ``key=value`` pairs."""
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


def resolve_model(args: argparse.Namespace) -> tuple[str, Path, str] | None:
    """``(model name, folder of its verified files, device)``, assembling the model into the
    cache on first use; None after printing why (and how to get it) when it cannot."""
    try:
        with progress_bar() as progress:
            folder = ensure_model(args.model, local_dir=args.model_dir, progress=progress)
    except ModelError as error:
        print(f"byoa-skills: {error.code}: {error.message}", file=sys.stderr)
        return None
    return args.model, folder, resolve_device(args.device)


def resolve_device(device: str) -> str:
    """``cpu`` or ``cuda``; ``auto`` tries CUDA and falls back to the CPU with a logged reason."""
    if device != "auto":
        return device
    try:
        import ctranslate2

        if ctranslate2.get_cuda_device_count() > 0:
            return "cuda"
        reason = "no CUDA device"
    except Exception as error:  # any failure to find a GPU means the CPU
        reason = f"{type(error).__name__}: {error}"
    logging.getLogger("byoa_skills").info("event=device-auto chosen=cpu reason=%r", reason)
    return "cpu"
