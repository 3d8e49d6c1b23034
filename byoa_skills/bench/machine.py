"""Facts about the machine and the software a run measured: CPU, cores, memory, GPU, library
versions, the model and its catalog checksums, and the decoding options."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

from byoa_skills.runtimes.speech.encoder_choice import cpuinfo_field

LIBRARIES = ("numpy", "ctranslate2", "faster-whisper", "onnxruntime", "aiohttp", "byoa-skills")


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    return cpuinfo_field("model name") or platform.processor() or platform.machine()


def memory_mib() -> float | None:
    """Total memory of the machine in MiB, or ``None`` when it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def gpu_info() -> dict[str, Any]:
    """``{"cuda_devices": N}`` as CTranslate2 sees them, with a reason when it cannot say."""
    try:
        import ctranslate2

        return {"cuda_devices": int(ctranslate2.get_cuda_device_count())}
    except Exception as error:  # no CTranslate2, or a broken CUDA install
        return {"cuda_devices": 0, "error": f"{type(error).__name__}: {error}"}


def library_versions() -> dict[str, str | None]:
    """Installed version of each library that shapes the figures (``None``: not installed)."""
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def available_cores() -> int:
    """The CPU cores this process may run on."""
    from byoa_skills.pool.config import available_cores as cores

    return cores()


def machine_facts() -> dict[str, Any]:
    """Everything about the machine a report states."""
    return {
        "cpu": cpu_model(),
        "cores": available_cores(),
        "logical_cpus": os.cpu_count(),
        "memory_mib": memory_mib(),
        "gpu": gpu_info(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "libraries": library_versions(),
    }


def model_facts(name: str) -> dict[str, Any]:
    """The catalog's entry for model ``name``: its files with sizes and SHA-256 checksums."""
    from byoa_skills.models import get_model

    spec = get_model(name)
    return {
        "name": spec.name,
        "description": spec.description,
        "files": [dataclasses.asdict(f) for f in spec.files],
    }


def decode_options() -> dict[str, Any]:
    """The decoding options the engine and the direct runs use (``DecodeOptions()``)."""
    from byoa_skills.runtimes.speech import DecodeOptions

    options = dataclasses.asdict(DecodeOptions())
    options["temperature"] = DecodeOptions.TEMPERATURE
    return options
