"""Write the int8 encoder's calibration set, ``byoa_skills/runtimes/speech/calibration/``, from
the tune part of the real-speech set (tests/data/realspeech): every third tune clip in
``clips.json``'s order (23 clips, 62 s, five languages, short answers among them), their
samples one after another in ``tune.flac`` and each clip's file, language and length in
samples in ``tune.json``. No held-out clip is in it: the int8 encoder's words are measured on
those. Run again only when the real-speech set changes; the output is the same each time.

    .venv/bin/python scripts/make_calibration_set.py
"""

from __future__ import annotations

import json

import numpy as np
import soundfile

from byoa_skills.bench.clips import REAL_DIR, real_records
from byoa_skills.runtimes.speech.calibration import CALIBRATION_DIR, CLIPS_NAME, SOUND_NAME

#: Every how many tune clips one is taken.
EVERY = 3


def main() -> None:
    chosen = real_records("tune")[::EVERY]
    pieces, listed = [], []
    for record in chosen:
        samples, rate = soundfile.read(REAL_DIR / record["file"], dtype="int16")
        assert rate == 16000 and samples.ndim == 1, record["file"]
        pieces.append(samples)
        listed.append(
            {"file": record["file"], "language": record["language"], "samples": len(samples)}
        )
    CALIBRATION_DIR.mkdir(exist_ok=True)
    soundfile.write(CALIBRATION_DIR / SOUND_NAME, np.concatenate(pieces), 16000, format="FLAC")
    text = json.dumps({"part": "tune", "every": EVERY, "clips": listed}, indent=1) + "\n"
    (CALIBRATION_DIR / CLIPS_NAME).write_text(text, encoding="utf-8")
    seconds = sum(c["samples"] for c in listed) / 16000
    print(f"{len(listed)} tune clips, {seconds:.1f} s, in {CALIBRATION_DIR}")


if __name__ == "__main__":
    main()
