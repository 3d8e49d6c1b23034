"""Coverage-guided fuzzing of the WAV parser and the skill input check with atheris.

    pip install atheris
    python scripts/fuzz_wav.py -runs=1000000 -seed=1 -max_len=4096 [CORPUS_DIR]

A corpus folder of a few valid files (and their base64) lets it start from valid structure.

Any exception other than WavError (or a crash) stops the run with the input that caused it.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from byoa_skills.wav import CODES, WavError, clip_from_skill_input, parse_wav


def test_one_input(data: bytes) -> None:
    """Parse ``data`` as a file, and as base64 text in a skill input."""
    for attempt in (
        lambda: parse_wav(data, max_seconds=0.5),
        lambda: clip_from_skill_input(
            {"audio": {"mime": "audio/wav", "base64": data.decode("latin-1")}}
        ),
    ):
        try:
            attempt()
        except WavError as error:
            if error.code not in CODES or "\n" in error.message:
                raise


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
