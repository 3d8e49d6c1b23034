"""What several subcommands share: the model and device options, the pool's flag types,
logging."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from byoa_skills.commands.models import progress_bar
from byoa_skills.models import DEFAULT_MODEL, ModelError, ensure_model
from byoa_skills.pool import Backend, Device, PoolConfig, SettingError
from byoa_skills.pool.config import check_setting
from byoa_skills.runtimes.speech.encoder_choice import ENCODER_BACKENDS


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--model-dir``, ``--device``, ``--backend``, ``--encoder-backend`` and
    ``--log-level``."""
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"catalog model name (default {DEFAULT_MODEL})"
    )
    parser.add_argument(
        "--model-dir", type=Path, help="take the model's files from this folder (verified)"
    )
    parser.add_argument(
        "--device",
        choices=[device.value for device in Device],
        default=PoolConfig.device.value,
        help="cpu (int8), cuda (float16), or auto: cuda when a GPU answers, else cpu "
        f"(default {PoolConfig.device})",
    )
    parser.add_argument(
        "--backend",
        choices=[backend.value for backend in Backend],
        default=PoolConfig.backend.value,
        help=f"ct2: CTranslate2; torch: PyTorch, greedy decoding (needs byoa-skills[torch]) "
        f"(default {PoolConfig.backend})",
    )
    parser.add_argument(
        "--encoder-backend",
        choices=ENCODER_BACKENDS,
        default=PoolConfig.encoder_backend,
        help="what runs Whisper's encoder: auto (OpenVINO int8 where the CPU has int8 and "
        "bf16 units, built once into the cache; else CTranslate2; $BYOA_SKILLS_ENCODER "
        "stands in for it), ctranslate2, openvino (CPU only; bf16 with bf16 units, else f32), "
        "or openvino-f32 / openvino-bf16 / openvino-int8 to force the precision (default "
        f"{PoolConfig.encoder_backend}; the decoder is always CTranslate2's)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="log lines on stderr at this level and above (default info)",
    )


def pool_setting(
    name: str, convert: Callable[[str], Any], scale: float = 1.0
) -> Callable[[str], Any]:
    """An argparse ``type`` for the flag of the :class:`PoolConfig` field ``name``: the flag's
    text read with ``convert``, refused (a usage error, exit 2) when the field, given the value
    times ``scale``, would refuse it. It returns the flag's own value, unscaled."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = text  # refused below, with what the flag must be
        try:
            check_setting(name, value * scale if isinstance(value, float) else value)
        except SettingError as error:
            raise argparse.ArgumentTypeError(f"must be {error.requirement}, got {text!r}") from None
        return value

    return parse


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be a whole number of at least {minimum}, got {text!r}"
            )
        return value

    return parse


def number_at_least(minimum: float) -> Callable[[str], float]:
    """An argparse ``type`` for a number (a fraction allowed) of at least ``minimum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = minimum - 1
        if not value >= minimum:  # NaN too
            raise argparse.ArgumentTypeError(
                f"must be a number of at least {minimum:g}, got {text!r}"
            )
        return value

    return parse


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
    backend = getattr(args, "backend", PoolConfig.backend.value)
    return args.model, folder, resolve_device(args.device, backend)


def resolve_device(device: str, backend: str = PoolConfig.backend.value) -> str:
    """``cpu`` or ``cuda``; ``auto`` tries a computation on CUDA with ``backend``'s library and
    falls back to the CPU with a logged reason (see :mod:`byoa_skills.runtimes.speech.devices`)."""
    from byoa_skills.runtimes.speech.devices import resolve_device as resolve

    return resolve(device, backend)
