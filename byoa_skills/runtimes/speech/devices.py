"""Which device a backend runs on: ``--device auto`` tries the GPU before choosing it.

A GPU counts only when a small computation on it succeeds through the backend's own library
(PyTorch for ``torch``, CTranslate2 for ``ct2``): a driver that is installed but cannot start,
a device already taken, or a library built without CUDA all mean the CPU, with the reason
logged. Nothing here is imported by ``import byoa_skills.runtimes`` beyond the standard library.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum


class Backend(str, Enum):
    """A speech backend: ``ct2`` (CTranslate2) or ``torch`` (PyTorch). Each member equals its
    string and prints as it."""

    CT2 = "ct2"
    TORCH = "torch"

    def __str__(self) -> str:
        return self.value


class Device(str, Enum):
    """What ``--device`` may say: ``cpu``, ``cuda``, or ``auto`` (see :func:`resolve_device`).
    Each member equals its string and prints as it."""

    CPU = "cpu"
    CUDA = "cuda"
    AUTO = "auto"

    def __str__(self) -> str:
        return self.value


#: The backends a device can be chosen for.
BACKENDS = tuple(backend.value for backend in Backend)
#: What ``--device`` may say.
DEVICE_CHOICES = tuple(device.value for device in Device)

log = logging.getLogger("byoa_skills")


def probe_cuda(backend: str = "ct2") -> None:
    """Return when ``backend``'s library can compute on CUDA device 0; raise otherwise.

    ``torch``: a tensor is made on the GPU, added to and read back. ``ct2``: CTranslate2 counts
    the devices and asks device 0 which compute types it supports, which starts the CUDA
    runtime on it. Raises ``RuntimeError`` (or whatever the library raises) with the reason.
    """
    if backend == "torch":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch sees no CUDA device")
        value = (torch.arange(4, device="cuda", dtype=torch.float32) + 1).sum().item()
        if value != 10.0:
            raise RuntimeError(f"a test sum on the GPU gave {value}, not 10")
    elif backend == "ct2":
        import ctranslate2

        if ctranslate2.get_cuda_device_count() < 1:
            raise RuntimeError("CTranslate2 sees no CUDA device")
        if not ctranslate2.get_supported_compute_types("cuda", 0):
            raise RuntimeError("CTranslate2 finds no compute type on CUDA device 0")
    else:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


def resolve_device(
    device: str, backend: str = "ct2", *, probe: Callable[[str], None] | None = None
) -> str:
    """``cpu`` or ``cuda`` for a ``--device`` value and a backend.

    ``cpu`` and ``cuda`` are returned as they are. ``auto`` is ``cuda`` when
    :func:`probe_cuda` (or ``probe``) succeeds for ``backend``, else ``cpu``; any failure of
    the probe, a missing library included, chooses the CPU and logs the reason (event
    ``device-auto``), never raises.
    """
    if device not in DEVICE_CHOICES:
        raise ValueError(f"device must be one of {', '.join(DEVICE_CHOICES)}, got {device!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if device != "auto":
        return device
    try:
        (probe or probe_cuda)(backend)
    except Exception as error:  # any failure to use a GPU means the CPU
        reason = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        log.info("event=device-auto backend=%s chosen=cpu reason=%r", backend, reason)
        return "cpu"
    log.info("event=device-auto backend=%s chosen=cuda", backend)
    return "cuda"
