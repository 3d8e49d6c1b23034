"""``import byoa_skills.wav`` stays light: no model runtime, no network stack."""

from __future__ import annotations

from fresh_import import modules_after_import

HEAVY = ["faster_whisper", "ctranslate2", "onnxruntime", "torch", "aiohttp", "soundfile", "av"]


def test_wav_imports_no_heavy_module() -> None:
    loaded = modules_after_import("byoa_skills.wav")
    assert "numpy" in loaded  # the probe really ran the import
    assert loaded.isdisjoint(HEAVY), loaded.intersection(HEAVY)
