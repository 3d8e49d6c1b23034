"""``import byoa_skills.wav`` stays light: no model runtime, no network stack."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["faster_whisper", "ctranslate2", "onnxruntime", "torch", "aiohttp", "soundfile", "av"]


def test_wav_imports_no_heavy_module() -> None:
    probe = (
        "import json, sys; import byoa_skills.wav; "
        "print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(done.stdout))
    assert "numpy" in loaded  # the probe really ran the import
    assert loaded.isdisjoint(HEAVY), loaded.intersection(HEAVY)
