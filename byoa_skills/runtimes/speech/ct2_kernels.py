"""Which of CTranslate2's CPU kernels a worker runs, chosen for this machine by measurement.

CTranslate2 picks its CPU kernels from the CPU's maker, not from a measurement: Intel's MKL on
Intel CPUs and oneDNN on the others, and its AVX2 code even where AVX-512 is there. Two
variables it reads once per process change that: ``CT2_USE_MKL`` (``1`` MKL, ``0`` oneDNN) and
``CT2_FORCE_CPU_ISA`` (``AVX2``, ``AVX512``). A worker sets them before it loads its model.

The candidates are MKL and oneDNN, each with AVX2 and, where ``/proc/cpuinfo`` names
``avx512f`` and ``avx512bw``, AVX-512 (:func:`candidates`). Each decodes the same
:data:`CLIPS` clips of the packaged calibration set (real speech, whole 30 s window, beam 5,
one thread, as a worker decodes) in a process of its own; its figure is its decode time
(median of :data:`REPEATS`, summed over the clips) and its tokens, in :data:`ROUNDS` rounds
(the candidates in turn, then in the reverse order). A candidate whose tokens differ from those
of CTranslate2's own pick on any clip is never chosen. Another is chosen only when it is the
fastest and at least :data:`MARGIN` faster than CTranslate2's own pick in every round, so a
busy machine's noise does not change the kernels; else CTranslate2's own pick stays
(:func:`choose`).

The choice is kept beside the model's other derived files (:mod:`derived`) as
``ct2-kernels.json``, with the CPU's name, its flags and ctranslate2's version as its recipe:
another CPU, another ctranslate2 or another ``model.bin`` measures again. Measuring takes a
few seconds per candidate, once, under the derived folder's lock (workers starting together
measure once).

``$BYOA_SKILLS_CT2_KERNELS`` says what to do: ``auto`` (the default: the measured choice),
``ctranslate2`` (CTranslate2's own pick, nothing measured) or a candidate's label
(``mkl-avx512``…) to force it. Where the user set ``CT2_USE_MKL`` or ``CT2_FORCE_CPU_ISA``
themselves, those hold and nothing is measured. Only the standard library is imported here;
the probe (``python -m byoa_skills.runtimes.speech.ct2_kernels``) imports ctranslate2.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from byoa_skills.runtimes.speech.derived import DerivedArtefact, model_sha256
from byoa_skills.runtimes.speech.encoder_choice import cpu_flags, cpuinfo_field

log = logging.getLogger("byoa_skills.runtimes")

#: The environment variable that forces a choice (``auto``, ``ctranslate2`` or a label).
KERNELS_ENV = "BYOA_SKILLS_CT2_KERNELS"
#: CTranslate2's own variables: set by the user, they win over any choice made here.
CT2_VARIABLES = ("CT2_USE_MKL", "CT2_FORCE_CPU_ISA")
#: Calibration clips each candidate decodes.
CLIPS = 2
#: Decodes of each clip per candidate; the median counts.
REPEATS = 3
#: Rounds of every candidate, in turn and in the reverse order: a gain must show in each.
ROUNDS = 2
#: How much faster than CTranslate2's own pick another must decode to replace it. Any change
#: of kernels moves some answers' words (MKL with AVX-512 for AVX2 moved 4 of the 66 held-out
#: real clips, oneDNN for MKL 4, WER within two words either way), and a gain under this did
#: not show outside the probe (AVX-512: 7 % faster here, the same 25.4 s over those clips).
MARGIN = 0.15
#: Beams, as a worker decodes by default (faster-whisper's beam size).
BEAMS = 5
#: The longest a probe may take before it counts as failed.
PROBE_TIMEOUT_S = 300.0
#: Bumped whenever the way candidates are measured changes.
FORMAT = 2
ARTEFACT = DerivedArtefact("ct2-kernels", (), FORMAT)


@dataclass(frozen=True)
class Kernels:
    """One of CTranslate2's CPU kernel sets: MKL (``mkl`` True) or oneDNN, and the
    instruction set its own code uses (``AVX2``, ``AVX512``)."""

    mkl: bool
    isa: str

    @property
    def label(self) -> str:
        """``mkl-avx2``, ``onednn-avx512``…"""
        return f"{'mkl' if self.mkl else 'onednn'}-{self.isa.lower()}"

    @classmethod
    def from_label(cls, label: str) -> Kernels:
        """The kernels a :attr:`label` names."""
        library, _, isa = label.partition("-")
        return cls(library == "mkl", isa.upper())

    @property
    def environment(self) -> dict[str, str]:
        """The variables that make CTranslate2 run these kernels."""
        return {"CT2_USE_MKL": "1" if self.mkl else "0", "CT2_FORCE_CPU_ISA": self.isa}


@dataclass(frozen=True)
class KernelChoice:
    """What a worker runs: ``kernels`` (None: CTranslate2's own pick, unchanged), why, and
    the measurement behind it (each label's decode ms and whether its words held)."""

    kernels: Kernels | None
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The kernels' label, or ``ctranslate2`` for CTranslate2's own pick."""
        return self.kernels.label if self.kernels else "ctranslate2"

    @property
    def environment(self) -> dict[str, str]:
        """The variables to set before CTranslate2 first runs (none for its own pick)."""
        return self.kernels.environment if self.kernels else {}


def candidates(flags: str | None) -> list[Kernels]:
    """The kernel sets worth measuring on a CPU with these ``/proc/cpuinfo`` flags: MKL and
    oneDNN with AVX2, and with AVX-512 where the CPU has it; none without AVX2 (CTranslate2's
    own pick is then the only one) or where the flags cannot be read."""
    names = set((flags or "").split())
    if "avx2" not in names:
        return []
    isas = ["AVX2"] + (["AVX512"] if {"avx512f", "avx512bw"} <= names else [])
    return [Kernels(mkl, isa) for mkl in (True, False) for isa in isas]


def by_label(label: str, flags: str | None) -> Kernels:
    """The candidate with that label. Raises ``ValueError`` for a label that is not one of
    this CPU's candidates."""
    found = {k.label: k for k in candidates(flags)}
    if label not in found:
        known = ", ".join(["auto", "ctranslate2", *found]) if found else "auto, ctranslate2"
        raise ValueError(f"${KERNELS_ENV} must be one of {known} on this CPU, got {label!r}")
    return found[label]


def own_pick(log_text: str) -> Kernels | None:
    """CTranslate2's own pick, read from its start-up log (``Selected ISA: AVX2``, ``Use Intel
    MKL: true``); None where the log does not say."""
    isa = re.search(r"Selected ISA: (\w+)", log_text)
    mkl = re.search(r"Use Intel MKL: (true|false)", log_text)
    if not isa or not mkl:
        return None
    return Kernels(mkl.group(1) == "true", isa.group(1).upper())


def choose(own: Kernels, rounds: Sequence[Mapping[str, Mapping[str, Any]]]) -> KernelChoice:
    """The choice from the measured ``rounds`` (each: label: ``decode_ms``, ``tokens``): the
    candidate whose tokens equal ``own``'s and that is the fastest of those, at least
    :data:`MARGIN` faster than ``own``, in every round; else CTranslate2's own pick. A gain
    that one round shows and another does not is noise (another process took the core), not
    the kernels. ``own`` must be in every round."""
    labels = list(rounds[0])
    same_words = [
        label
        for label in labels
        if all(
            r[label].get("tokens") == r[own.label]["tokens"] and r[label].get("decode_ms")
            for r in rounds
        )
    ]
    gains = {
        label: min(1.0 - r[label]["decode_ms"] / r[own.label]["decode_ms"] for r in rounds)
        for label in same_words
    }
    summary = {
        label: {
            "decode_ms": _mean([r[label].get("decode_ms") for r in rounds]),
            "rounds_ms": [r[label].get("decode_ms") for r in rounds],
            "same_words": label in same_words,
            "ctranslate2_own": label == own.label,
        }
        for label in labels
    }
    fastest_each_round = {
        min(same_words, key=lambda label, r=r: r[label]["decode_ms"]) for r in rounds
    }
    if len(fastest_each_round) == 1:
        (fastest,) = fastest_each_round
        if fastest != own.label and gains[fastest] >= MARGIN:
            kernels = Kernels.from_label(fastest)
            why = (
                f"measured: at least {gains[fastest]:.0%} faster than CTranslate2's own "
                f"{own.label} in each of {len(rounds)} rounds, same words"
            )
            return KernelChoice(kernels, why, summary)
    why = f"measured: none {MARGIN:.0%} faster than CTranslate2's own {own.label} in every round"
    return KernelChoice(None, why, summary)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v]
    return round(sum(present) / len(present), 1) if len(present) == len(values) else None


def probe(
    model_dir: str | os.PathLike[str], kernels: Kernels | None, clips: int = CLIPS
) -> dict[str, Any]:
    """Run the probe in a process of its own with ``kernels`` (None: CTranslate2's own pick):
    ``decode_ms`` (the clips' median decode times, summed), ``tokens`` (per clip) and ``own``
    (CTranslate2's pick as it logged it). Raises ``RuntimeError`` when the probe fails."""
    environment = {k: v for k, v in os.environ.items() if k not in CT2_VARIABLES}
    environment.update(kernels.environment if kernels else {})
    environment.setdefault("OPENBLAS_NUM_THREADS", "1")
    command = [sys.executable, "-m", __name__, str(model_dir), "--clips", str(clips)]
    try:
        done = subprocess.run(
            command,
            env=environment,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the probe took more than {PROBE_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the probe ended with {done.returncode}: {last}")
    figures = json.loads(done.stdout)
    pick = own_pick(done.stderr)
    figures["own"] = pick.label if pick else ""
    return figures


def measure(model_dir: str | os.PathLike[str], flags: str | None) -> KernelChoice:
    """Measure every candidate on this CPU in :data:`ROUNDS` rounds, one probe process each,
    and choose (:func:`choose`). Raises
    ``RuntimeError`` where a probe fails or CTranslate2's own pick is not a candidate."""
    found = candidates(flags)
    if not found:
        return KernelChoice(None, "no AVX2: CTranslate2's own pick is the only one")
    # the first round opens with CTranslate2's own pick, unforced: its log names the pick,
    # and its figures are that candidate's (the same kernels as forcing them)
    unforced = probe(model_dir, None)
    own = next((k for k in found if k.label == unforced["own"]), None)
    if own is None:
        raise RuntimeError(f"CTranslate2's own pick {unforced['own']!r} is not a candidate")
    first = {own.label: unforced} | {k.label: probe(model_dir, k) for k in found if k != own}
    later = [
        {k.label: probe(model_dir, k) for k in (found if r % 2 == 0 else found[::-1])}
        for r in range(1, ROUNDS)
    ]
    return choose(own, [first, *later])


def cpu_recipe(flags: str | None) -> str:
    """What a measurement holds for: the CPU's name, a digest of its flags, ctranslate2's
    version (read without importing it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ct2 = version("ctranslate2")
    except PackageNotFoundError:
        ct2 = "none"
    flags_digest = hashlib.sha256((flags or "").encode()).hexdigest()[:16]
    cpu = cpuinfo_field("model name") or ""
    return f"cpu={cpu};flags={flags_digest};ctranslate2={ct2};repeats={REPEATS};rounds={ROUNDS}"


def kernels_for(model_dir: str | os.PathLike[str], measure_again: bool = False) -> KernelChoice:
    """The kernels a worker of the model in ``model_dir`` runs on this machine: as
    :data:`KERNELS_ENV` and CTranslate2's own variables say, else measured once and kept
    (see the module's text; ``measure_again``: measured now and kept, whatever was kept).
    Never raises: where measuring or the cache fails, CTranslate2's own pick, with why."""
    if any(name in os.environ for name in CT2_VARIABLES):
        return KernelChoice(None, "set by the user (CT2_USE_MKL, CT2_FORCE_CPU_ISA)")
    asked = os.environ.get(KERNELS_ENV, "auto").strip() or "auto"
    flags = cpu_flags()
    if asked == "ctranslate2":
        return KernelChoice(None, f"${KERNELS_ENV}")
    if asked != "auto":
        try:
            return KernelChoice(by_label(asked, flags), f"${KERNELS_ENV}")
        except ValueError as error:
            return KernelChoice(None, str(error))
    try:
        return _kept_or_measured(Path(model_dir), flags, measure_again)
    except (OSError, RuntimeError, ValueError, KeyError) as error:
        log.warning("event=ct2-kernels-unmeasured reason=%r", str(error))
        return KernelChoice(None, f"not measured: {error}")


def _kept_or_measured(model_dir: Path, flags: str | None, measure_again: bool) -> KernelChoice:
    source_sha256 = model_sha256(model_dir / "model.bin")
    recipe = cpu_recipe(flags)
    with ARTEFACT.building(source_sha256) as folder:
        record = None if measure_again else ARTEFACT.record(folder, source_sha256, recipe)
        if record is not None:
            label = record["chosen"]
            kernels = None if label == "ctranslate2" else by_label(label, flags)
            return KernelChoice(kernels, record["reason"], record["figures"])
        choice = measure(model_dir, flags)
        ARTEFACT.write(
            folder,
            source_sha256,
            {},
            recipe,
            chosen=choice.label,
            reason=choice.reason,
            figures=choice.figures,
        )
        log.info("event=ct2-kernels-measured chosen=%s reason=%r", choice.label, choice.reason)
        return choice


def apply(choice: KernelChoice) -> None:
    """Set the choice's variables in this process's environment; call before CTranslate2
    first runs here (it reads them once)."""
    os.environ.update(choice.environment)


def _probe_main(arguments: Sequence[str]) -> int:
    import argparse
    import statistics
    import time

    parser = argparse.ArgumentParser(description="Time CTranslate2's Whisper decode here.")
    parser.add_argument("model_dir")
    parser.add_argument("--clips", type=int, default=CLIPS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    options = parser.parse_args(arguments)

    import ctranslate2
    import tokenizers

    from byoa_skills.runtimes.speech.calibration import calibration_list, calibration_windows

    ctranslate2.set_log_level(logging.INFO)  # its pick, on stderr
    model = ctranslate2.models.Whisper(
        options.model_dir, device="cpu", compute_type="int8", intra_threads=1
    )
    languages = [clip["language"] for clip in calibration_list()]
    windows = calibration_windows(model.n_mels, options.clips)
    hf_tokenizer = tokenizers.Tokenizer.from_file(str(Path(options.model_dir) / "tokenizer.json"))
    decode_ms, tokens = 0.0, []
    for window, language in zip(windows, languages, strict=False):
        output = model.encode(ctranslate2.StorageView.from_array(window))
        prompt = [_prompt(hf_tokenizer, model.is_multilingual, language)]
        times, sequence = [], []
        for _ in range(max(1, options.repeats)):
            began = time.perf_counter()
            result = model.generate(output, prompt, beam_size=BEAMS, max_length=224)
            times.append(time.perf_counter() - began)
            sequence = result[0].sequences_ids[0]
        decode_ms += 1000 * statistics.median(times)
        tokens.append(sequence)
    print(json.dumps({"decode_ms": round(decode_ms, 1), "tokens": tokens}))
    return 0


def _prompt(hf_tokenizer: Any, multilingual: bool, language: str) -> list[int]:
    """Start of transcript, the language, transcribe, no timestamps: a worker's prompt."""
    from faster_whisper.tokenizer import Tokenizer

    tokenizer = Tokenizer(
        hf_tokenizer, multilingual, "transcribe", language if multilingual else "en"
    )
    return [*tokenizer.sot_sequence, tokenizer.no_timestamps]


if __name__ == "__main__":
    sys.exit(_probe_main(sys.argv[1:]))
