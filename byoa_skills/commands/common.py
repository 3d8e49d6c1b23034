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
    """``--model``, ``--model-dir``, ``--device``, ``--backend`` and ``--log-level``."""
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
        "--backend", choices=("ct2", "torch"), default="ct2",
        help="ct2: CTranslate2 (default); torch: PyTorch, greedy decoding "
        "(needs byoa-skills[torch])",
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
    return args.model, folder, resolve_device(args.device, getattr(args, "backend", "ct2"))


def resolve_device(device: str, backend: str = "ct2") -> str:
    """``cpu`` or ``cuda``; ``auto`` tries a computation on CUDA with ``backend``'s library and
    falls back to the CPU with a logged reason (see :mod:`byoa_skills.runtimes.speech.devices`)."""
    from byoa_skills.runtimes.speech.devices import resolve_device as resolve

    return resolve(device, backend)
