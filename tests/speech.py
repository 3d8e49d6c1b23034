"""The committed speech clips and a tolerant way to compare what was heard with what was said."""

from __future__ import annotations

import base64
import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

SPEECH = Path(__file__).parent / "data" / "speech"
CLIPS: list[dict[str, Any]] = json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))


def samples(file: str) -> np.ndarray:
    """The float32 samples of one of the clips (plain 44-byte header)."""
    data = (SPEECH / file).read_bytes()
    return np.frombuffer(data, dtype="<i2", offset=44).astype(np.float32) / np.float32(32768)


def clips(kind: str | None = None, language: str | None = None) -> list[dict[str, Any]]:
    """The clips of this kind (sentence, human, country, silence, noise) and language."""
    return [
        clip
        for clip in CLIPS
        if kind in (None, clip["kind"]) and language in (None, clip["language"])
    ]


def skill_input(name: str) -> dict[str, Any]:
    """The ``audio.transcribe`` input of one clip."""
    text = base64.b64encode((SPEECH / name).read_bytes()).decode()
    return {"audio": {"mime": "audio/wav", "base64": text}}


def words(text: str) -> list[str]:
    """Lower-case words, punctuation dropped (any script)."""
    return re.findall(r"\w+", text.lower())


def word_recall(said: str, heard: str) -> float:
    """The share of the words said that were heard."""
    expected, got = words(said), set(words(heard))
    return sum(word in got for word in expected) / max(1, len(expected))


@functools.lru_cache(maxsize=2)
def _whisper_model(model_dir: str, threads: int) -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(model_dir, compute_type="int8", cpu_threads=threads)


def faster_whisper_text(model_dir: Path, samples: Any, language: str, threads: int) -> str:
    """The text faster-whisper's own ``WhisperModel.transcribe`` gives with the engine's
    decoding options (the reference the engine's answers are compared with)."""
    from byoa_skills.runtimes.speech import DecodeOptions

    options = DecodeOptions()
    segments, _ = _whisper_model(str(model_dir), threads).transcribe(
        samples,
        language=language,
        beam_size=options.beam_size,
        temperature=DecodeOptions.TEMPERATURE,
        compression_ratio_threshold=None,
        condition_on_previous_text=options.condition_on_previous_text,
        without_timestamps=options.without_timestamps,
        vad_filter=options.vad_filter,
        max_new_tokens=options.max_new_tokens,
    )
    return "".join(segment.text for segment in segments).strip()


def faster_whisper_texts_as_a_worker(
    model_dir: Path, items: list[tuple[str, str]], threads: int = 1
) -> list[str]:
    """:func:`faster_whisper_text` of each committed clip ``(file, language)``, run in a
    process with the environment the engine's workers run in (``WORKER_ENVIRONMENT``: numpy's
    BLAS on one thread, which changes the features' last bits, and so a beam's choice)."""
    import os
    import subprocess
    import sys

    from byoa_skills.pool.worker import WORKER_ENVIRONMENT

    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from pathlib import Path\n"
        "from speech import SPEECH, faster_whisper_text\n"
        "from byoa_skills.wav import parse_wav\n"
        "items, folder, threads = json.loads(sys.stdin.read())\n"
        "print(json.dumps([faster_whisper_text(Path(folder), "
        "parse_wav((SPEECH / name).read_bytes()).to_float32(), language, threads) "
        "for name, language in items]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps([items, str(model_dir), threads]),
        capture_output=True,
        text=True,
        env={**os.environ, **WORKER_ENVIRONMENT},
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))
