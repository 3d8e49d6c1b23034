"""Which engine runs Whisper's encoder: the ``encoder_backend`` setting, resolved for a machine.

``auto`` chooses OpenVINO with bf16 inference precision only on a CPU with bf16 units (the
``avx512_bf16`` or ``amx_bf16`` flag in ``/proc/cpuinfo``; where that file cannot be read, a
CPU device whose OpenVINO ``OPTIMIZATION_CAPABILITIES`` name ``BF16``), and CTranslate2's own
encoder everywhere else, the GPU and the torch backend included. ``openvino`` forces OpenVINO
on the CPU: bf16 where the units are, float32 where they are not. ``ctranslate2`` never uses
OpenVINO. Only the standard library is imported here; openvino only when ``/proc/cpuinfo``
cannot answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: The values of the ``encoder_backend`` setting.
ENCODER_BACKENDS = ("auto", "ctranslate2", "openvino")
#: ``/proc/cpuinfo`` flags that mean the CPU computes in bf16 natively.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class EncoderChoice:
    """The encoder a backend runs: ``engine`` (``ctranslate2``, ``openvino`` or ``torch``),
    its ``precision`` (a compute type: ``int8``, ``float16``, ``float32``; or OpenVINO's
    ``bf16`` or ``f32``), and why it was chosen."""

    engine: str
    precision: str
    reason: str = ""

    @property
    def label(self) -> str:
        """What answers and ``/health`` name it by: ``openvino-bf16``, ``openvino-f32``,
        ``ctranslate2-int8``…"""
        return f"{self.engine}-{self.precision}"

    @property
    def openvino(self) -> bool:
        """Whether OpenVINO runs the encoder."""
        return self.engine == "openvino"


def cpu_flags(path: Path = CPUINFO) -> str | None:
    """The first ``flags`` line of ``/proc/cpuinfo`` (without its name), or None where the
    file cannot be read or has none (not Linux)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                name, _, value = line.partition(":")
                if name.strip() == "flags":
                    return value.strip()
    except OSError:
        return None
    return None


def openvino_capabilities() -> tuple[str, ...]:
    """OpenVINO's CPU ``OPTIMIZATION_CAPABILITIES`` (empty when openvino cannot say)."""
    try:
        import openvino as ov

        return tuple(str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    except Exception:  # not installed, no CPU plugin: no bf16 known
        return ()


def has_bf16_units(flags: str | None, capabilities: Iterable[str] | None = None) -> bool:
    """Whether the CPU has bf16 units: one of :data:`BF16_FLAGS` among ``flags`` (a
    ``/proc/cpuinfo`` flags line), or, when ``flags`` is None, ``BF16`` among
    ``capabilities`` (OpenVINO's; asked for when None)."""
    if flags is not None:
        return not BF16_FLAGS.isdisjoint(flags.split())
    if capabilities is None:
        capabilities = openvino_capabilities()
    return "BF16" in capabilities


def choose_encoder(
    setting: str = "auto",
    *,
    device: str = "cpu",
    backend: str = "ct2",
    compute_type: str = "int8",
    flags: str | None = None,
    capabilities: Iterable[str] | None = None,
) -> EncoderChoice:
    """The encoder for ``setting`` (one of :data:`ENCODER_BACKENDS`) on this machine.

    ``compute_type`` is the CTranslate2 model's (``int8`` on the CPU by default). ``flags``
    None reads ``/proc/cpuinfo``; pass a flags line to decide for another CPU. Raises
    ``ValueError`` for an unknown setting, or for ``openvino`` on CUDA or with the torch
    backend (it runs on the CPU, before CTranslate2's decoder).
    """
    if setting not in ENCODER_BACKENDS:
        raise ValueError(
            f"encoder_backend must be one of {', '.join(ENCODER_BACKENDS)}, got {setting!r}"
        )
    if backend == "torch":
        if setting == "openvino":
            raise ValueError("the OpenVINO encoder runs before CTranslate2's decoder, not torch's")
        return EncoderChoice("torch", "float16" if device == "cuda" else "float32", "torch")
    ct2 = EncoderChoice("ctranslate2", compute_type, "")
    if device != "cpu":
        if setting == "openvino":
            raise ValueError("the OpenVINO encoder runs on the CPU only")
        return EncoderChoice(ct2.engine, ct2.precision, "not the CPU")
    if setting == "ctranslate2":
        return EncoderChoice(ct2.engine, ct2.precision, "asked for")
    bf16 = has_bf16_units(cpu_flags() if flags is None else flags, capabilities)
    if setting == "openvino":
        return EncoderChoice("openvino", "bf16" if bf16 else "f32", "asked for")
    if bf16:
        return EncoderChoice("openvino", "bf16", "the CPU has bf16 units")
    return EncoderChoice(ct2.engine, ct2.precision, "the CPU has no bf16 units")
