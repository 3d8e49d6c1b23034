"""The local API of a real ``serve`` process: every kind of bad input over HTTP and over the
WebSocket gets its code, and the engine goes on answering."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path

import aiohttp
import pytest
from engine import TOKEN, Engine, call_http, call_ws
from wavkit import chunk, fmt_body, pcm, riff

from byoa_skills.runtimes.speech.encoder_choice import choose_encoder
from byoa_skills.wav import wav_from_int16

SPEECH = Path(__file__).parent / "data" / "speech"
#: What runs the engine's encoder here by default (``auto`` on this CPU).
ENCODER = choose_encoder("auto", compute_type="int8").label
ENCODER_PRECISION = choose_encoder("auto", compute_type="int8").precision_said
JFK = base64.b64encode((SPEECH / "jfk.wav").read_bytes()).decode()
STEREO = riff(
    chunk(b"fmt ", fmt_body(channels=2, block_align=4, byte_rate=64000)), chunk(b"data", pcm(400))
)
SIXTEEN_SECONDS = wav_from_int16(__import__("numpy").zeros(16000 * 16, "int16"))


def audio(data: bytes | str, mime: str = "audio/wav") -> dict[str, object]:
    text = data if isinstance(data, str) else base64.b64encode(data).decode()
    return {"audio": {"mime": mime, "base64": text}}


HI = {"messages": [{"role": "user", "content": "Hi"}]}
# (skill, body, expected code, expected HTTP status)
BAD_CALLS = [
    ("audio.transcribe", {"input": audio(STEREO)}, "not-mono", 400),
    ("audio.transcribe", {"input": audio(SIXTEEN_SECONDS)}, "too-long", 400),
    ("audio.transcribe", {"input": audio(b"RIFF\x04\0\0\0WAVE")}, "missing-fmt", 400),
    ("audio.transcribe", {"input": audio(JFK[:-8])}, "truncated", 400),
    ("audio.transcribe", {"input": audio("UklGR!!!")}, "bad-base64", 400),
    ("audio.transcribe", {"input": audio(JFK, mime="audio/mpeg")}, "wrong-mime", 400),
    ("audio.transcribe", {"input": {"audio": "x"}}, "bad-input", 400),
    ("audio.transcribe", {}, "bad-input", 400),
    ("audio.transcribe", {"input": audio("A" * 800_000)}, "too-large", 400),
    (
        "audio.transcribe",
        {"input": audio(JFK), "params": {"language": "english"}},
        "bad-params",
        400,
    ),
    ("audio.transcribe", {"input": audio(JFK), "params": {"language": 7}}, "bad-params", 400),
    (
        "audio.transcribe",
        {"input": audio(JFK), "params": {"language": "xx"}},
        "unsupported-language",
        400,
    ),
    ("audio.transcribe", {"input": audio(JFK), "params": []}, "bad-params", 400),
    ("audio.transcribe", {"input": audio(JFK), "deadlineSeconds": 0}, "bad-params", 400),
    ("audio.transcribe", {"input": audio(JFK), "deadlineSeconds": "soon"}, "bad-params", 400),
    ("audio.transcribe", {"input": audio(JFK), "deadlineSeconds": 121}, "bad-params", 400),
    ("image.generate", {"input": {}}, "unknown-skill", 404),
    ("text.generate", {"input": {"messages": []}}, "bad-messages", 400),
    ("text.generate", {"input": {"messages": [{"role": "user"}]}}, "bad-messages", 400),
    (
        "text.generate",
        {"input": {"messages": [{"role": "tool", "content": "x"}]}},
        "unknown-role",
        400,
    ),
    (
        "text.generate",
        {"input": {"messages": [{"role": "user", "content": "x" * 100_001}]}},
        "text-too-long",
        400,
    ),
    ("text.generate", {"input": HI, "params": {"maxTokens": 8193}}, "max-tokens-over-limit", 400),
    ("text.generate", {"input": HI, "params": {"maxTokens": 0}}, "bad-params", 400),
    ("text.generate", {"input": HI, "params": {"choices": 5}}, "bad-params", 400),
    ("text.generate", {"input": HI, "params": {"stream": "yes"}}, "bad-params", 400),
    ("text.generate", {"input": HI, "params": {"temperature": 3}}, "bad-params", 400),
    ("text.generate", {"input": HI, "params": {"model": 7}}, "bad-params", 400),
    ("text.generate", {"input": HI}, "model-required", 400),
    ("text.generate", {"input": HI, "params": {"model": "nowhere/x"}}, "unknown-source", 400),
]


@pytest.mark.parametrize(
    ("skill", "body", "code", "status"),
    BAD_CALLS,
    ids=[f"{c}-{i}" for i, (_, _, c, _) in enumerate(BAD_CALLS)],
)
def test_bad_calls_over_http(
    engine: Engine, skill: str, body: dict[str, object], code: str, status: int
) -> None:
    got_status, answer = asyncio.run(call_http(engine, skill, body))
    assert (got_status, answer["ok"], answer["code"]) == (status, False, code)
    assert answer["message"] and "\n" not in answer["message"]


def test_bad_calls_over_one_websocket(engine: Engine) -> None:
    frames = [
        {"type": "call", "id": index, "skill": skill, **body}
        for index, (skill, body, _, _) in enumerate(BAD_CALLS)
    ]
    answers = asyncio.run(call_ws(engine, frames, expect=len(frames)))
    by_id = {answer["id"]: answer for answer in answers}
    assert all(answer["type"] == "result" for answer in answers)
    for index, (_, _, code, _) in enumerate(BAD_CALLS):
        assert (by_id[index]["ok"], by_id[index]["code"]) == (False, code)


def test_bad_frames_get_their_codes_and_the_connection_goes_on(engine: Engine) -> None:
    good = {
        "type": "call",
        "id": "last",
        "skill": "audio.transcribe",
        "input": audio(JFK),
        "params": {"language": "en"},
    }
    frames = [
        "this is not JSON",
        "[1, 2, 3]",
        {"type": "call", "skill": "audio.transcribe", "input": audio(JFK)},  # no id
        {"type": "call", "id": True, "skill": "audio.transcribe"},
        json.dumps({"type": "call", "id": 9, "pad": "x" * (4 * 1024 * 1024)}),
        {"type": "ping"},
        {"type": "something-new"},
        good,
    ]
    answers = asyncio.run(call_ws(engine, frames, expect=6))
    errors = [answer["code"] for answer in answers if answer["type"] == "error"]
    assert errors == ["not-json", "bad-request", "bad-request", "bad-request", "message-too-large"]
    (result,) = [answer for answer in answers if answer["type"] == "result"]
    assert result["id"] == "last" and result["ok"] is True
    assert "ask not" in result["output"]["text"].lower()


def test_http_request_level_refusals(engine: Engine) -> None:
    async def run() -> list[tuple[int, str]]:
        big = b'{"input": "' + b"A" * (4 * 1024 * 1024) + b'"}'
        cases = [
            await call_http(engine, "audio.transcribe", None, raw=b"{not json"),
            await call_http(engine, "audio.transcribe", None, raw=b"[]"),
            await call_http(engine, "audio.transcribe", None, raw=b'{"input": NaN}'),
            await call_http(engine, "audio.transcribe", None, raw=b"[" * 100_000),
            await call_http(engine, "audio.transcribe", None, raw=big),
            await call_http(engine, "audio.transcribe", {}, token=None),
            await call_http(engine, "audio.transcribe", {}, token="wrong"),
            await call_http(engine, "audio.transcribe", {}, headers={"Host": "evil.example"}),
            await call_http(engine, "audio.transcribe", {}, headers={"Origin": "https://a.b"}),
        ]
        return [(status, body["code"]) for status, body in cases]

    assert asyncio.run(run()) == [
        (400, "not-json"),
        (400, "bad-request"),
        (400, "not-json"),  # NaN is not JSON, as JavaScript's JSON.parse says
        (400, "not-json"),  # nesting too deep to read
        (413, "message-too-large"),
        (401, "unauthorized"),
        (401, "unauthorized"),
        (403, "forbidden-host"),
        (403, "forbidden-origin"),
    ]


def test_health_ready_and_metrics(engine: Engine) -> None:
    status, health = engine.get("/health", token=None)
    assert status == 200
    said = json.loads(health)
    kernels = said.pop("ct2Kernels")
    vad = said.pop("vad")
    assert said == {
        "ok": True,
        "status": "ok",
        "store": {"ok": True, "pendingChanges": 0},
        "encoder": ENCODER,
        "encoderPrecision": ENCODER_PRECISION,
        "pid": engine.process.pid,
    }
    assert kernels == "ctranslate2" or kernels.split("-")[0] in ("mkl", "onednn")
    # the VAD runs on OpenVINO where the encoder does, else on onnxruntime
    assert vad == ("openvino" if ENCODER.startswith("openvino") else "onnxruntime")
    assert len(engine.workers()) == 2
    assert engine.get("/metrics", token=None)[0] == 401
    status, text = engine.get("/metrics")
    assert status == 200
    for name in (
        "byoa_calls_total",
        "byoa_call_seconds_bucket",
        "byoa_audio_seconds_total",
        "byoa_queue_depth",
        "byoa_worker_restarts_total",
    ):
        assert name in text
    assert engine.metric("byoa_warm_workers") == 2
    layout = next(line for line in text.splitlines() if line.startswith("byoa_pool_layout_info"))
    assert 'workers="2"' in layout and 'encoder_seconds="30"' in layout
    assert 'idle_release_seconds="0"' in layout and layout.endswith(" 1.0")


def test_workers_run_numpy_blas_on_one_thread(engine: Engine) -> None:
    for pid in engine.workers():
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"OPENBLAS_NUM_THREADS=1" in environ


def test_websocket_needs_the_token(engine: Engine) -> None:
    async def run() -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.ws_connect(f"{engine.url}/v1/ws"):
                    return 101
            except aiohttp.WSServerHandshakeError as error:
                return error.status

    assert asyncio.run(run()) == 401
    assert TOKEN not in engine.log.read_text()


def test_outcomes_are_counted_by_code(engine: Engine) -> None:
    before = engine.metric("byoa_calls_total", skill="audio.transcribe", outcome="not-mono")
    asyncio.run(call_http(engine, "audio.transcribe", {"input": audio(STEREO)}))
    after = engine.metric("byoa_calls_total", skill="audio.transcribe", outcome="not-mono")
    assert after == before + 1


def test_an_answer_says_its_queue_and_model_time(engine: Engine) -> None:
    async def run() -> tuple[int, str, float]:
        body = json.dumps({"input": audio(JFK), "params": {"language": "en"}})
        headers = {"Authorization": f"Bearer {TOKEN}"}
        began = time.perf_counter()
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{engine.url}/v1/skills/audio.transcribe", data=body, headers=headers
            ) as response,
        ):
            await response.read()
            waited_ms = (time.perf_counter() - began) * 1000
            return response.status, response.headers.get("Server-Timing", ""), waited_ms

    status, timing, waited_ms = asyncio.run(run())
    assert status == 200
    parts = dict(part.strip().split(";", 1) for part in timing.split(","))
    phases = ("features", "encode", "detect", "decode")
    assert set(parts) == {"queue", "infer", "window", "encoder", "handoff", *phases}
    ms = {
        name: float(value.removeprefix("dur="))
        for name, value in parts.items()
        if value.startswith("dur=")
    }
    # all in milliseconds, and all inside the wait the client saw
    assert ms["queue"] >= 0 and ms["infer"] > 0 and ms["handoff"] >= 0
    assert ms["queue"] + ms["infer"] + ms["handoff"] <= waited_ms
    # the model's phases inside its time (each rounded to 0.1 ms); a language was given
    assert ms["encode"] > 0 and ms["decode"] > 0 and ms["features"] > 0 and ms["detect"] == 0
    assert sum(ms[name] for name in phases) <= ms["infer"] + 0.2
    assert parts["window"] == 'desc="30s"'  # the default: the whole window
    assert parts["encoder"] == f'desc="{ENCODER}"'  # auto: OpenVINO only with int8 or bf16 units
