"""The Whisper encoder on OpenVINO: its output against CTranslate2's own encoder, its words
through CTranslate2's decoder, its verified cache, the ``encoder_backend`` choice, and the
engine naming the encoder that ran. Real models from the session's cache, no mocks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from engine import TOKEN, Engine, call_http, start_engine
from fresh_import import modules_after_import
from resident import resident_kib
from speech import samples

from byoa_skills.models import model_path
from byoa_skills.pool import PoolConfig
from byoa_skills.runtimes.speech import load_backend
from byoa_skills.runtimes.speech.derived import DERIVED_ENV
from byoa_skills.runtimes.speech.encoder_choice import ENCODER_ENV, choose_encoder, has_bf16_units
from byoa_skills.runtimes.speech.phrases import normalized_words

SPEECH = Path(__file__).parent / "data" / "speech"
THREADS = 2
#: What forcing OpenVINO gives on this CPU: bf16 with bf16 units, f32 without.
FORCED = choose_encoder("openvino").label
#: /proc/cpuinfo flags of CPUs without and with bf16 units.
NO_BF16 = "fpu sse2 avx avx2 fma f16c"
AVX512_BF16 = NO_BF16 + " avx512f avx512_bf16"
AMX = NO_BF16 + " amx_bf16 amx_tile"


@pytest.fixture(scope="module")
def base_dir(engine_home: Path) -> Path:
    return model_path("base", cache_dir=engine_home / "cache" / "models")


@pytest.fixture(scope="module")
def encoded(base_dir: Path) -> dict[int, dict[str, np.ndarray]]:
    """A real clip's encoder output at the whole 30 s window and at a 10 s one (3000 and 1000
    mel frames), by OpenVINO and by CTranslate2 in float32 and int8."""
    import ctranslate2
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.feature_extractor import FeatureExtractor

    from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model
    from byoa_skills.runtimes.speech.openvino_encoder import OpenVINOEncoder

    ours = OpenVINOEncoder(cached_encoder_model(base_dir).source, threads=THREADS)
    theirs = {
        compute: ctranslate2.models.Whisper(
            str(base_dir), compute_type=compute, intra_threads=THREADS
        )
        for compute in ("float32", "int8")
    }
    features = FeatureExtractor()(samples("jfk.wav"))[:, :-1]
    outputs: dict[int, dict[str, np.ndarray]] = {}
    for frames in (3000, 1000):
        batch = pad_or_trim(features, frames)[None]
        view = ctranslate2.StorageView.from_array(batch)
        outputs[frames] = {c: np.asarray(model.encode(view)) for c, model in theirs.items()}
        outputs[frames]["openvino"] = ours.encode(batch)
    return outputs


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine similarity of each frame of ``a`` with the same frame of ``b``."""
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


@pytest.mark.parametrize("frames", [3000, 1000], ids=["30s", "10s"])
def test_the_openvino_encoder_agrees_with_ctranslate2s(
    encoded: dict[int, dict[str, np.ndarray]], frames: int
) -> None:
    out = encoded[frames]
    assert out["openvino"].shape == out["float32"].shape == (1, frames // 2, 512)
    # the same graph on the same float weights: equal up to float32 rounding, frame by frame
    assert cosines(out["openvino"], out["float32"]).min() > 0.9999
    # against the int8 default: as close as CTranslate2's own float32 encoder is (int8's
    # rounding is the whole difference; some padding frames differ much, speech frames little)
    with_int8 = cosines(out["openvino"], out["int8"])
    float32_with_int8 = cosines(out["float32"], out["int8"])
    assert with_int8.mean() > 0.98
    assert abs(with_int8.mean() - float32_with_int8.mean()) < 0.002


def test_forced_openvino_hears_the_words_of_the_ctranslate2_path(base_dir: Path) -> None:
    ct2 = load_backend(base_dir, cpu_threads=THREADS, encoder_backend="ctranslate2")
    ov = load_backend(base_dir, cpu_threads=THREADS, encoder_backend="openvino")
    for file in ("jfk.wav",):
        expected, heard = ct2.transcribe(samples(file), "en"), ov.transcribe(samples(file), "en")
        assert expected.encoder == "ctranslate2-int8"
        assert heard.encoder == FORCED
        assert heard.text and normalized_words(heard.text) == normalized_words(expected.text)


def test_a_single_threaded_encoder_never_narrows_a_thread_to_one_core(base_dir: Path) -> None:
    """Each pool worker encodes on one thread: a thread pinned to the first core while it
    encodes puts two workers' encoders on the same core (they then take turns)."""
    import threading
    import time

    from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model
    from byoa_skills.runtimes.speech.openvino_encoder import OpenVINOEncoder

    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("one core: nothing to narrow")
    encoder = OpenVINOEncoder(cached_encoder_model(base_dir).source, threads=1)
    seen: set[frozenset[int]] = set()
    encoding = threading.Event()

    def watch() -> None:
        while not encoding.is_set():
            time.sleep(0.001)
        while encoding.is_set():
            for task in os.listdir("/proc/self/task"):
                with contextlib.suppress(OSError):  # the thread ended meanwhile
                    seen.add(frozenset(os.sched_getaffinity(int(task))))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    encoding.set()
    try:
        for _ in range(3):
            encoder.encode(np.zeros((1, 80, 3000), dtype=np.float32))
    finally:
        encoding.clear()
        watcher.join()
    assert seen == {frozenset(allowed)}


@pytest.mark.parametrize("graph", ["float", "int8"])
def test_the_weights_file_stays_mapped_but_not_resident_after_each_run(
    base_dir: Path, graph: str
) -> None:
    """OpenVINO reads the mapped weights file at a shape's first run and works from its own
    copy after (the few small constants it reads at every run are copied out of the file): the
    file's pages are given back after that run, none is read again, and every later answer is
    the same, as the engine runs the graph (int8 with bf16 layers where the CPU has bf16)."""
    import openvino as ov
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.feature_extractor import FeatureExtractor

    from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model
    from byoa_skills.runtimes.speech.openvino_encoder import OpenVINOEncoder
    from byoa_skills.runtimes.speech.openvino_int8 import cached_int8_model

    cached = cached_int8_model if graph == "int8" else cached_encoder_model
    source = cached(base_dir).source
    features = FeatureExtractor()(samples("jfk.wav"))[:, :-1]
    whole, short = (pad_or_trim(features, frames)[None] for frames in (3000, 1000))
    precision = choose_encoder("openvino").precision
    encoder = OpenVINOEncoder(source, precision=precision, threads=1)
    weights = encoder.weights_file
    assert weights is not None and resident_kib(weights) is not None
    first = encoder.encode(whole)
    assert resident_kib(weights) == 0
    for _ in range(3):
        assert np.array_equal(encoder.encode(whole), first)
        assert resident_kib(weights) == 0
    short_encoded = encoder.encode(short)
    assert resident_kib(weights) == 0
    assert np.array_equal(encoder.encode(short), short_encoded)
    assert resident_kib(weights) == 0
    fresh = OpenVINOEncoder(source, precision=precision, threads=1)
    assert np.array_equal(fresh.encode(short), short_encoded)
    assert np.array_equal(fresh.encode(whole), first)
    as_read = OpenVINOEncoder(ov.Core().read_model(source), precision=precision, threads=1)
    assert as_read.weights_file is None  # compiled as read, no constant copied
    assert np.array_equal(as_read.encode(whole), first)


def folder_beside(base_dir: Path, tmp_path: Path) -> Path:
    """A model folder of its own whose files link to ``base_dir``'s."""
    folder = tmp_path / "base"
    folder.mkdir()
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        (folder / name).symlink_to(base_dir / name)
    return folder


def test_the_cached_model_is_reused_and_a_damaged_one_rebuilt(
    base_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from byoa_skills.runtimes.speech.openvino_cache import (
        BIN_NAME,
        RECORD_NAME,
        XML_NAME,
        cache_folder,
        cached_encoder_model,
    )

    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(DERIVED_ENV, raising=False)  # this home's own cache
    folder = folder_beside(base_dir, tmp_path)
    # a planted graph beside model.bin, whoever wrote it, is never read
    for name in (XML_NAME, BIN_NAME, RECORD_NAME):
        (folder / name).write_bytes(b"planted")
    first = cached_encoder_model(folder)
    cache = cache_folder(folder)
    assert first.built and first.path == cache / XML_NAME
    assert cache.is_relative_to(tmp_path / "home" / "cache" / "derived")
    assert cache.stat().st_mode & 0o077 == 0
    weights = (cache / BIN_NAME).read_bytes()
    assert not cached_encoder_model(folder).built  # built once, then reused
    damages = {
        "a flipped byte in the weights": lambda: _flip(cache / BIN_NAME),
        "a truncated graph": lambda: _truncate(cache / XML_NAME),
        "no record": lambda: (cache / RECORD_NAME).unlink(),
        "a record of another model.bin": lambda: _rewrite_record(cache / RECORD_NAME),
    }
    for damage in damages.values():
        damage()
        again = cached_encoder_model(folder)
        assert again.built and (cache / BIN_NAME).read_bytes() == weights
        assert not cached_encoder_model(folder).built  # the new files match their record
    assert "event=derived-rebuilt name=openvino-encoder" in caplog.text
    assert (folder / XML_NAME).read_bytes() == b"planted"


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def _rewrite_record(path: Path) -> None:
    record = json.loads(path.read_text())
    record["source_sha256"] = "0" * 64
    path.write_text(json.dumps(record))


def test_a_cache_folder_others_may_write_is_refused_and_the_model_built_in_memory(
    base_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model

    home = tmp_path / "home"
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(home))
    monkeypatch.delenv(DERIVED_ENV, raising=False)  # this home's own cache
    (home / "cache" / "derived").mkdir(parents=True)
    (home / "cache" / "derived").chmod(0o777)  # anyone could plant a graph there
    model = cached_encoder_model(folder_beside(base_dir, tmp_path))
    assert model.built and model.path is None and model.model is not None
    assert not any((home / "cache" / "derived").iterdir())


def test_a_graph_that_does_not_load_is_rebuilt_once_then_ctranslate2_encodes(
    base_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from byoa_skills.runtimes.speech import openvino_encoder

    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(DERIVED_ENV, raising=False)  # this home's own cache
    tries: list[object] = []

    def broken(self: object, model: object, **_: object) -> None:
        tries.append(model)
        raise RuntimeError("is_valid_weights_range: the weights end before the graph does")

    monkeypatch.setattr(openvino_encoder.OpenVINOEncoder, "__init__", broken)
    backend = load_backend(
        folder_beside(base_dir, tmp_path), cpu_threads=THREADS, encoder_backend="openvino-f32"
    )
    assert len(tries) == 2  # the cache, then a rebuilt one
    assert backend.encoder.label == "ctranslate2-int8"
    assert not backend.decoder_only  # type: ignore[attr-defined]  # the encoder's weights too
    assert (
        "did not load" in backend.encoder.reason
        and "is_valid_weights_range" in backend.encoder.reason
    )
    heard = backend.transcribe(samples("jfk.wav"), "en")
    assert heard.encoder == "ctranslate2-int8" and "country" in heard.text.lower()
    assert "event=openvino-encoder-fallback" in caplog.text


def test_auto_chooses_openvino_bf16_only_where_the_cpu_has_bf16_units(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENCODER_ENV, raising=False)  # what auto picks itself
    assert choose_encoder("auto", flags=NO_BF16).label == "ctranslate2-int8"
    assert choose_encoder("auto", flags=AVX512_BF16).label == "openvino-bf16"
    assert choose_encoder("auto", flags=AMX).label == "openvino-bf16"
    # forced: f32 where there are no bf16 units
    assert choose_encoder("openvino", flags=NO_BF16).label == "openvino-f32"
    assert choose_encoder("openvino", flags=AMX).label == "openvino-bf16"
    assert choose_encoder("ctranslate2", flags=AMX).label == "ctranslate2-int8"
    # the GPU and the torch backend keep their own encoder
    cuda = choose_encoder("auto", device="cuda", compute_type="float16", flags=AMX)
    assert cuda.label == "ctranslate2-float16"
    assert choose_encoder("auto", backend="torch", flags=AMX).label == "torch-float32"
    # without /proc/cpuinfo: what OpenVINO's CPU device reports
    assert has_bf16_units(None, ("FP32", "BF16", "INT8"))
    assert not has_bf16_units(None, ("FP32", "INT8"))
    # the precision forced too: f32 on any CPU, bf16 only where the units are
    assert choose_encoder("openvino-f32", flags=AMX).label == "openvino-f32"
    assert choose_encoder("openvino-bf16", flags=AVX512_BF16).label == "openvino-bf16"
    for refused in (
        lambda: choose_encoder("onnx"),
        lambda: choose_encoder("openvino", device="cuda"),
        lambda: choose_encoder("openvino", backend="torch"),
        lambda: choose_encoder("openvino-f32", device="cuda"),
        lambda: choose_encoder("openvino-bf16", flags=NO_BF16),
    ):
        with pytest.raises(ValueError):
            refused()


def test_the_environment_stands_in_for_auto_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENCODER_ENV, "openvino-f32")
    forced = choose_encoder("auto", flags=AMX)
    assert (forced.label, forced.reason) == ("openvino-f32", f"${ENCODER_ENV}")
    assert choose_encoder("ctranslate2", flags=AMX).label == "ctranslate2-int8"  # asked for
    assert choose_encoder("auto", backend="torch").label == "torch-float32"  # its own
    cuda = choose_encoder("auto", device="cuda", compute_type="float16")
    assert cuda.label == "ctranslate2-float16"
    monkeypatch.setenv(ENCODER_ENV, "ctranslate2")
    assert choose_encoder("auto", flags=AMX).label == "ctranslate2-int8"
    monkeypatch.setenv(ENCODER_ENV, "onnx")
    with pytest.raises(ValueError, match=ENCODER_ENV):
        choose_encoder("auto", flags=AMX)


def test_the_pool_and_the_backend_make_the_same_choice(base_dir: Path) -> None:
    config = PoolConfig(model_dir=base_dir)
    assert config.encoder_backend == "auto"
    backend = load_backend(base_dir, cpu_threads=1)
    assert backend.encoder == config.encoder == choose_encoder("auto")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="--encoder-backend"):
        PoolConfig(model_dir=base_dir, device="cuda", encoder_backend="openvino")
    with pytest.raises(ValueError, match="--encoder-backend"):
        PoolConfig(model_dir=base_dir, encoder_backend="onnx")


def test_importing_the_runtime_does_not_import_openvino() -> None:
    loaded = modules_after_import("byoa_skills.runtimes.speech")
    assert "openvino" not in loaded


def test_an_encoder_compiles_without_openvinos_conversion_api(base_dir: Path) -> None:
    """What a worker does with OpenVINO (its CPU's capabilities, the cached encoder compiled
    and run) leaves out the conversion API and the TensorFlow frontend it loads; the API can
    still be imported after."""
    from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model

    xml = cached_encoder_model(base_dir).source
    probe = f"""
import json, sys
import numpy as np
from byoa_skills.runtimes.speech.encoder_choice import openvino_capabilities
from byoa_skills.runtimes.speech.openvino_encoder import OpenVINOEncoder
capabilities = openvino_capabilities()
encoded = OpenVINOEncoder({str(xml)!r}, threads=1).encode(np.zeros((1, 80, 200), np.float32))
modules = sorted(m for m in sys.modules if m.startswith("openvino.tools"))
with open("/proc/self/maps") as maps:
    frontends = sorted({{l.split()[-1].rsplit("/", 1)[-1] for l in maps if "frontend" in l}})
from openvino.tools.ovc import convert_model
print(json.dumps([modules, frontends, len(capabilities), list(encoded.shape)]))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    modules, frontends, capabilities, shape = json.loads(done.stdout.splitlines()[-1])
    assert capabilities and shape == [1, 100, 512]
    assert modules == []
    assert frontends and all("ir_frontend" in name for name in frontends)


@pytest.fixture(scope="module")
def openvino_engine(engine_home: Path) -> Iterator[Engine]:
    """``serve`` on ``tiny.en`` with one worker, its encoder forced onto OpenVINO."""
    running = start_engine(
        engine_home,
        "--model",
        "tiny.en",
        "--workers",
        "1",
        "--encoder-backend",
        "openvino",
        log_name="serve-openvino.log",
    )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_health_and_each_answer_name_the_encoder_that_ran(openvino_engine: Engine) -> None:
    import aiohttp

    status, body = openvino_engine.get("/health", token=None)
    assert status == 200 and json.loads(body)["encoder"] == FORCED

    async def call() -> tuple[int, str, dict[str, object]]:
        clip = __import__("base64").b64encode((SPEECH / "jfk.wav").read_bytes()).decode()
        payload = {"input": {"audio": {"mime": "audio/wav", "base64": clip}}}
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{openvino_engine.url}/v1/skills/audio.transcribe",
                json=payload,
                headers={"Authorization": f"Bearer {TOKEN}"},
            ) as response,
        ):
            return response.status, response.headers["Server-Timing"], await response.json()

    status, timing, answer = asyncio.run(call())
    assert status == 200, answer
    assert "ask not what your country" in str(answer["output"]).lower()
    parts = dict(part.strip().split(";", 1) for part in timing.split(","))
    assert parts["encoder"] == f'desc="{FORCED}"'


def test_the_serve_flag_refuses_an_unknown_encoder(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "byoa_skills", "serve", "--encoder-backend", "onnx"],
        capture_output=True,
        text=True,
        env={**os.environ, "BYOA_SKILLS_HOME": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode == 2 and "--encoder-backend" in done.stderr


def test_a_damaged_cache_whose_record_vouches_for_it_never_stops_serve(
    engine_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the weights truncated and the record rewritten with the truncated file's SHA-256:
    # the cache verifies but does not load; the worker rebuilds it and serve starts
    from byoa_skills.pool.config import engine_decode_options
    from byoa_skills.runtimes.speech.openvino_cache import (
        BIN_NAME,
        RECORD_NAME,
        cache_folder,
        cached_encoder_model,
    )

    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(home))
    monkeypatch.delenv(DERIVED_ENV, raising=False)  # this home's own cache
    tiny = model_path("tiny.en", cache_dir=home / "cache" / "models")
    cached_encoder_model(tiny)
    cache = cache_folder(tiny)
    weights = (cache / BIN_NAME).read_bytes()
    (cache / BIN_NAME).write_bytes(weights[: len(weights) // 2])
    record = json.loads((cache / RECORD_NAME).read_text())
    record["files"][BIN_NAME] = hashlib.sha256(weights[: len(weights) // 2]).hexdigest()
    (cache / RECORD_NAME).write_text(json.dumps(record))

    engine = start_engine(
        home,
        "--model",
        "tiny.en",
        "--workers",
        "1",
        "--encoder-backend",
        "openvino-f32",
        log_name="damaged-cache.log",
    )
    try:
        engine.wait_ready()
        health = json.loads(engine.get("/health")[1])
        clip = base64.b64encode((SPEECH / "jfk.wav").read_bytes()).decode()
        body = {
            "input": {"audio": {"mime": "audio/wav", "base64": clip}},
            "params": {"language": "en"},
        }
        status, answer = asyncio.run(call_http(engine, "audio.transcribe", body))
        assert status == 200, answer
        heard = answer["output"]["text"]
    finally:
        engine.stop()
    log = engine.log.read_text(errors="replace")
    assert "event=openvino-encoder-rebuild" in log
    assert health["encoder"] == "openvino-f32" and "encoderNote" not in health
    assert (cache / BIN_NAME).read_bytes() == weights  # rebuilt whole
    clean = load_backend(
        tiny,
        model_name="tiny.en",
        cpu_threads=1,
        encoder_backend="openvino-f32",
        options=engine_decode_options(None, "tiny.en"),
    )
    assert heard == clean.transcribe(samples("jfk.wav"), "en").text
