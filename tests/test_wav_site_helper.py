"""What the site guide's ``wavBase64`` helper writes, run in Node, must pass, and our writer must
write the same bytes."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from byoa_skills.wav import WavError, clip_from_skill_input, float_to_int16, wav_base64

HELPER = Path(__file__).parent / "data" / "wavBase64.mjs"


def run_site_helper(batches: list[list[float]]) -> list[str]:
    """Base64 texts that the guide's JavaScript helper writes for each batch of samples."""
    node = shutil.which("node")
    assert node, "Node.js is needed to run the site guide's helper (see README: set-up)"
    done = subprocess.run(
        [node, str(HELPER)],
        input=json.dumps(batches),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


def float32_values(values: np.ndarray) -> list[float]:
    """Samples as the Float32Array an AudioWorklet hands the page."""
    return [float(x) for x in values.astype(np.float32)]


def test_helper_output_passes_and_matches_our_writer() -> None:
    rng = np.random.default_rng(7)
    t = np.arange(16000 * 3) / 16000
    batches = [
        float32_values(0.6 * np.sin(2 * math.pi * 440 * t)),
        float32_values(rng.uniform(-1.5, 1.5, size=16000)),  # clipped by the helper
        float32_values(np.array([-1.0, -0.5, -1e-6, 0.0, 1e-6, 0.5, 1.0])),
        float32_values(rng.normal(0, 0.3, size=16000 * 15)),  # the longest clip
        [0.0],
    ]
    texts = run_site_helper(batches)
    for samples, text in zip(batches, texts, strict=True):
        clip = clip_from_skill_input({"audio": {"mime": "audio/wav", "base64": text}})
        assert clip.frames == len(samples)
        assert clip.samples.tolist() == float_to_int16(np.float32(samples)).tolist()
        assert wav_base64(np.float32(samples)) == text


def test_helper_output_of_a_clip_over_15_seconds_is_refused() -> None:
    (text,) = run_site_helper([[0.1] * (16000 * 15 + 1)])
    with pytest.raises(WavError) as caught:
        clip_from_skill_input({"audio": {"mime": "audio/wav", "base64": text}})
    assert caught.value.code == "too-long"
