"""The frames of the local API and the direct link: a call frame carrying a 15 s clip,
encoded by a site and read by the engine, and the result frame back.

    pytest benchmarks/test_frame_speed.py --benchmark-enable
"""

from __future__ import annotations

import base64

import numpy as np
import pytest

from byoa_skills.protocol.frames import call_frame, encode, read_frame, result_frame
from byoa_skills.skills import LOCAL_RECEIPT, CallResult
from byoa_skills.wav import clip_from_skill_input, wav_from_int16

SAMPLES = np.random.default_rng(1).integers(-20000, 20000, 16000 * 15, dtype=np.int16)
CLIP = {
    "audio": {"mime": "audio/wav", "base64": base64.b64encode(wav_from_int16(SAMPLES)).decode()}
}
CALL = call_frame(1, "audio.transcribe", CLIP, {"language": "en"})
CALL_TEXT = encode(CALL)
RESULT = CallResult(ok=True, output={"text": "And so my fellow Americans"}, receipt=LOCAL_RECEIPT)


@pytest.mark.benchmark(group="frames")
def test_encode_a_call_frame(benchmark) -> None:  # type: ignore[no-untyped-def]
    text = benchmark(encode, CALL)
    assert len(text) > 640_000


@pytest.mark.benchmark(group="frames")
def test_read_a_call_frame_and_its_clip(benchmark) -> None:  # type: ignore[no-untyped-def]
    def read() -> int:
        return clip_from_skill_input(read_frame(CALL_TEXT).input).frames

    assert benchmark(read) == len(SAMPLES)


@pytest.mark.benchmark(group="frames")
def test_read_a_frame_of_non_ascii_text(benchmark) -> None:  # type: ignore[no-untyped-def]
    text = (
        '{"type": "result", "id": 1, "ok": true, "output": {"text": "' + "Перу " * 200_000 + '"}}'
    )
    frame = benchmark(read_frame, text)
    assert len(frame.output["text"]) == 1_000_000


@pytest.mark.benchmark(group="frames")
def test_encode_a_result_frame(benchmark) -> None:  # type: ignore[no-untyped-def]
    text = benchmark(lambda: encode(result_frame(1, RESULT.to_json(False))))
    assert '"ok": true' in text
