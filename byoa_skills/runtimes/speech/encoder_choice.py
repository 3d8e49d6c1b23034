"""Which engine runs Whisper's encoder: the ``encoder_backend`` setting, resolved for a machine.

``auto`` chooses, on the CPU:

- OpenVINO int8 (:mod:`openvino_int8`), its float layers in bf16, on a CPU with int8
  dot-product units (the ``avx512_vnni``, ``avx_vnni`` or ``amx_int8`` flag in
  ``/proc/cpuinfo``) and bf16 units (``avx512_bf16`` or ``amx_bf16``): there it keeps the words
  on held-out speech;
- OpenVINO bf16 on a CPU with bf16 units and no int8 units (none is known; kept for the rule);
- CTranslate2's own encoder everywhere else: with int8 units but no bf16 units the int8
  encoder runs its float layers in f32, which missed the words goal on held-out speech
  (docs/performance.md, "The int8 encoder"; ``openvino-int8`` forces it); on AVX2 alone
  OpenVINO was slower; the GPU and the torch backend keep their own.

Where ``/proc/cpuinfo`` cannot be read, OpenVINO's ``OPTIMIZATION_CAPABILITIES`` stand in:
``BF16`` for bf16 units; int8 units are then not assumed. ``openvino`` forces OpenVINO's float
graph on the CPU: bf16 where the units are, float32 where they are not; ``openvino-f32``,
``openvino-bf16`` and ``openvino-int8`` force the precision too (bf16 without bf16 units is
refused: OpenVINO would run f32 and call it bf16; int8 runs on any CPU, slowly without int8
units). ``ctranslate2`` never uses OpenVINO.

``$BYOA_SKILLS_ENCODER`` (any value but ``auto``) stands in for ``auto`` wherever the setting
is ``auto``: the test suite and the bench run the default path on each encoder with it, on a
CPU whose ``auto`` would pick another. Only the standard library is imported here; openvino
only when ``/proc/cpuinfo`` cannot answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

#: The values of the ``encoder_backend`` setting.
ENCODER_BACKENDS = (
    "auto",
    "ctranslate2",
    "openvino",
    "openvino-f32",
    "openvino-bf16",
    "openvino-int8",
)
#: The environment variable that stands in for the ``auto`` setting (one of the others).
ENCODER_ENV = "BYOA_SKILLS_ENCODER"
#: ``/proc/cpuinfo`` flags that mean the CPU computes in bf16 natively.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
#: ``/proc/cpuinfo`` flags that mean the CPU has int8 dot-product (VNNI or AMX) units.
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class EncoderChoice:
    """The encoder a backend runs: ``engine`` (``ctranslate2``, ``openvino`` or ``torch``),
    its ``precision`` (a compute type: ``int8``, ``float16``, ``float32``; or OpenVINO's
    ``bf16``, ``f32`` or ``int8``), why it was chosen, and for OpenVINO the ``inference``
    precision its float operations run in (``bf16`` or ``f32``; for int8, the layers kept
    float and everything between the matrix products)."""

    engine: str
    precision: str
    reason: str = ""
    inference: str = ""

    @property
    def label(self) -> str:
        """What answers and ``/health`` name it by: ``openvino-bf16``, ``openvino-f32``,
        ``ctranslate2-int8``…"""
        return f"{self.engine}-{self.precision}"

    @property
    def precision_said(self) -> str:
        """The precision in words, the float layers' too where they differ: ``int8, float
        layers bf16``; ``bf16``; ``int8`` (CTranslate2's)."""
        if self.inference and self.inference != self.precision:
            return f"{self.precision}, float layers {self.inference}"
        return self.precision

    @property
    def openvino(self) -> bool:
        """Whether OpenVINO runs the encoder."""
        return self.engine == "openvino"


def cpuinfo_field(field: str, path: Path = CPUINFO) -> str | None:
    """The value of the first ``field`` line of ``/proc/cpuinfo`` (``flags``, ``model
    name``), or None where the file cannot be read or has none (not Linux)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                name, _, value = line.partition(":")
                if name.strip() == field:
                    return value.strip()
    except OSError:
        return None
    return None


def cpu_flags(path: Path = CPUINFO) -> str | None:
    """The first ``flags`` line of ``/proc/cpuinfo`` (without its name), or None where the
    file cannot be read or has none (not Linux)."""
    return cpuinfo_field("flags", path)


def openvino_capabilities() -> tuple[str, ...]:
    """OpenVINO's CPU ``OPTIMIZATION_CAPABILITIES`` (empty when openvino cannot say)."""
    try:
        ov = import_openvino()

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


def has_int8_units(flags: str | None) -> bool:
    """Whether ``flags`` (a ``/proc/cpuinfo`` flags line) name int8 dot-product units (one of
    :data:`INT8_FLAGS`); False when they cannot be read."""
    return flags is not None and not INT8_FLAGS.isdisjoint(flags.split())


def forced_encoder() -> str | None:
    """The setting ``$BYOA_SKILLS_ENCODER`` forces in place of ``auto`` (None: unset or
    ``auto``). Raises ``ValueError`` for a value that is not a setting."""
    value = os.environ.get(ENCODER_ENV, "").strip()
    if value in ("", "auto"):
        return None
    if value not in ENCODER_BACKENDS:
        raise ValueError(
            f"${ENCODER_ENV} must be one of {', '.join(ENCODER_BACKENDS)}, got {value!r}"
        )
    return value


def runs_openvino(setting: str) -> bool:
    """Whether the setting asks for OpenVINO by name (``openvino``, ``openvino-f32``…)."""
    return setting.startswith("openvino")


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

    ``auto`` is replaced by :func:`forced_encoder` where the environment forces one.
    ``compute_type`` is the CTranslate2 model's (``int8`` on the CPU by default). ``flags``
    None reads ``/proc/cpuinfo``; pass a flags line to decide for another CPU. Raises
    ``ValueError`` for an unknown setting, for OpenVINO on CUDA or with the torch backend (it
    runs on the CPU, before CTranslate2's decoder), or for ``openvino-bf16`` on a CPU
    without bf16 units.
    """
    if setting not in ENCODER_BACKENDS:
        raise ValueError(
            f"encoder_backend must be one of {', '.join(ENCODER_BACKENDS)}, got {setting!r}"
        )
    forced = forced_encoder() if setting == "auto" else None
    why_asked = f"${ENCODER_ENV}" if forced else "asked for"
    setting = forced or setting
    if backend == "torch":
        if runs_openvino(setting) and not forced:
            raise ValueError("the OpenVINO encoder runs before CTranslate2's decoder, not torch's")
        return EncoderChoice("torch", "float16" if device == "cuda" else "float32", "torch")
    ct2 = EncoderChoice("ctranslate2", compute_type, "")
    if device != "cpu":
        if runs_openvino(setting) and not forced:
            raise ValueError("the OpenVINO encoder runs on the CPU only")
        return EncoderChoice(ct2.engine, ct2.precision, "not the CPU")
    if setting == "ctranslate2":
        return EncoderChoice(ct2.engine, ct2.precision, why_asked)
    flags = cpu_flags() if flags is None else flags
    bf16 = has_bf16_units(flags, capabilities)
    rest = "bf16" if bf16 else "f32"
    if setting == "openvino-bf16" and not bf16:
        raise ValueError("openvino-bf16 needs a CPU with bf16 units; this one has none")
    if setting == "openvino-f32":
        return EncoderChoice("openvino", "f32", why_asked, "f32")
    if setting == "openvino-int8":
        return EncoderChoice("openvino", "int8", why_asked, rest)
    if runs_openvino(setting):
        return EncoderChoice("openvino", rest, why_asked, rest)
    int8 = has_int8_units(flags)
    if int8 and bf16:
        return EncoderChoice("openvino", "int8", "the CPU has int8 and bf16 units", "bf16")
    if bf16:
        return EncoderChoice("openvino", "bf16", "the CPU has bf16 units", "bf16")
    if int8:
        why = "no bf16 units: int8 with f32 layers missed the words goal (force openvino-int8)"
        return EncoderChoice(ct2.engine, ct2.precision, why)
    return EncoderChoice(ct2.engine, ct2.precision, "the CPU has neither int8 nor bf16 units")
