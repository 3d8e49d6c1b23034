"""The int8 OpenVINO encoder: ``auto``'s choice for each kind of CPU, the quantized model's
verified cache (reused, a damaged or stale one rebuilt, an unusable folder, two processes
building at once), the float graph taking over where int8 cannot be had, its words through
CTranslate2's decoder, and ``/health`` naming the precision. Real models, real NNCF, no mocks
of what runs.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
from speech import samples

from byoa_skills.models import model_path
from byoa_skills.runtimes.speech import load_backend
from byoa_skills.runtimes.speech.derived import DERIVED_ENV
from byoa_skills.runtimes.speech.encoder_choice import ENCODER_ENV, choose_encoder
from byoa_skills.runtimes.speech.phrases import normalized_words

SPEECH = Path(__file__).parent / "data" / "speech"
#: /proc/cpuinfo flags of the kinds of CPU auto tells apart.
AVX2 = "fpu sse2 avx avx2 fma f16c"
AVX512 = AVX2 + " avx512f avx512bw"
AVX512_VNNI = AVX512 + " avx512_vnni"
ALDER_LAKE = AVX2 + " avx_vnni"  # VNNI on 256-bit vectors, no AVX-512
ZEN4 = AVX512_VNNI + " avx512_bf16"  # bf16 units, no AMX
SAPPHIRE_RAPIDS = ZEN4 + " amx_bf16 amx_int8 amx_tile"


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of its own whose cache keeps the derived files (not the run's shared folder)."""
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(DERIVED_ENV, raising=False)
    return tmp_path / "home" / "cache" / "derived"


@pytest.fixture(scope="module")
def tiny_dir(engine_home: Path) -> Path:
    return model_path("tiny.en", cache_dir=engine_home / "cache" / "models")


def test_auto_runs_int8_where_the_cpu_has_int8_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENCODER_ENV, raising=False)  # what auto picks itself
    chosen = {
        flags: choose_encoder("auto", flags=flags)
        for flags in (AVX2, AVX512, AVX512_VNNI, ALDER_LAKE, ZEN4, SAPPHIRE_RAPIDS)
    }
    said = {flags: (c.label, c.inference, c.precision_said) for flags, c in chosen.items()}
    assert said[AVX2] == ("ctranslate2-int8", "", "int8")
    assert said[AVX512] == ("ctranslate2-int8", "", "int8")
    # int8 with f32 layers missed the words goal on held-out speech: not chosen by itself
    assert said[AVX512_VNNI] == ("ctranslate2-int8", "", "int8")
    assert said[ALDER_LAKE] == ("ctranslate2-int8", "", "int8")
    assert said[ZEN4] == ("openvino-int8", "bf16", "int8, float layers bf16")
    assert said[SAPPHIRE_RAPIDS] == ("openvino-int8", "bf16", "int8, float layers bf16")
    assert "int8 and bf16 units" in chosen[ZEN4].reason and "neither" in chosen[AVX2].reason
    assert "missed the words goal" in chosen[AVX512_VNNI].reason
    # forced: int8 on any CPU, its float layers f32 without bf16 units; the float graph stays
    forced = choose_encoder("openvino-int8", flags=AVX512_VNNI)
    assert (forced.label, forced.precision_said) == ("openvino-int8", "int8, float layers f32")
    assert choose_encoder("openvino-int8", flags=AVX2).label == "openvino-int8"
    assert choose_encoder("openvino", flags=SAPPHIRE_RAPIDS).label == "openvino-bf16"
    assert choose_encoder("openvino-f32", flags=SAPPHIRE_RAPIDS).label == "openvino-f32"
    assert choose_encoder("ctranslate2", flags=SAPPHIRE_RAPIDS).label == "ctranslate2-int8"
    assert choose_encoder("auto", device="cuda", compute_type="float16").label == (
        "ctranslate2-float16"
    )
    with pytest.raises(ValueError):
        choose_encoder("openvino-int8", device="cuda")


def _build(model_dir: str, home: str, out: multiprocessing.Queue) -> None:
    os.environ["BYOA_SKILLS_HOME"] = home
    os.environ.pop(DERIVED_ENV, None)
    from byoa_skills.runtimes.speech.openvino_int8 import cached_int8_model

    out.put(cached_int8_model(model_dir).built)


def test_built_once_by_two_at_once_reused_and_a_damaged_or_stale_one_rebuilt(
    tiny_dir: Path, own_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from byoa_skills.runtimes.speech.derived import file_sha256
    from byoa_skills.runtimes.speech.openvino_int8 import (
        ARTEFACT,
        BIN_NAME,
        KEPT_FLOAT,
        XML_NAME,
        cached_int8_model,
        recipe,
    )

    # two processes asking at once: one quantizes, the other waits and reads its files
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = context.Queue()
    home = os.environ["BYOA_SKILLS_HOME"]
    builders = [context.Process(target=_build, args=(str(tiny_dir), home, out)) for _ in (1, 2)]
    for builder in builders:
        builder.start()
    built = sorted(out.get(timeout=600) for _ in builders)
    for builder in builders:
        builder.join(timeout=60)
    assert built == [False, True] and [b.exitcode for b in builders] == [0, 0]

    first = cached_int8_model(tiny_dir)
    assert not first.built and first.path is not None and first.path.name == XML_NAME
    folder = first.path.parent
    assert folder.is_relative_to(own_cache) and folder.stat().st_mode & 0o077 == 0
    assert "FakeQuantize" in (folder / XML_NAME).read_text()  # quantized, not the float graph
    _assert_kept_out_layers_read_int8_weights(folder / XML_NAME)
    weights = (folder / BIN_NAME).read_bytes()

    data = bytearray(weights)
    data[len(data) // 2] ^= 0xFF
    (folder / BIN_NAME).write_bytes(bytes(data))
    assert cached_int8_model(tiny_dir).built
    assert (folder / BIN_NAME).read_bytes() == weights  # the same calibration, the same model
    assert "event=derived-rebuilt name=openvino-encoder-int8" in caplog.text

    # made another way (another kept-float list, calibration set or NNCF): stale, not used
    source = file_sha256(tiny_dir / "model.bin")
    assert ARTEFACT.problem(folder, source, recipe(KEPT_FLOAT)) is None
    other = recipe((".*layer_0/self_attention/linear_1",))
    assert other != recipe(KEPT_FLOAT)
    assert "recipe changed" in (ARTEFACT.problem(folder, source, other) or "")


def _assert_kept_out_layers_read_int8_weights(xml: Path) -> None:
    """Each layer kept out of static int8 reads int8 weights (widened by one scale per row) and
    its input without SmoothQuant's scale, so that OpenVINO quantizes that input at run time."""
    import re

    from byoa_skills.runtimes.speech.openvino_int8 import KEPT_FLOAT
    from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

    model = import_openvino().Core().read_model(xml)
    kept = [
        node
        for node in model.get_ordered_ops()
        if node.get_type_name() == "MatMul"
        and any(re.fullmatch(p, node.get_friendly_name()) for p in KEPT_FLOAT)
    ]
    assert len(kept) == 4  # tiny.en's four layers
    for node in kept:
        widen = node.input_value(1).get_node()
        assert widen.get_type_name() == "Multiply", node.get_friendly_name()
        convert = widen.input_value(0).get_node()
        assert convert.get_type_name() == "Convert"
        assert convert.input_value(0).get_element_type().get_type_name() == "i8"
        assert "smooth_quant" not in node.input_value(0).get_node().get_friendly_name()


def test_weights_to_int8_keeps_what_a_product_computes_and_only_where_named() -> None:
    import numpy as np
    import openvino.opset13 as op

    from byoa_skills.runtimes.speech.openvino_int8 import weights_to_int8
    from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

    ov = import_openvino()
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((2, 48, 32)).astype(np.float32)
    smoothing = (rng.random(32) + 0.5).astype(np.float32)

    def model() -> object:
        x = op.parameter([1, 5, 32], ov.Type.f32, name="x")
        smoothed = op.multiply(x, op.constant(1 / smoothing))
        smoothed.set_friendly_name("gelu/nncf_smooth_quant")
        named = op.matmul(smoothed, op.constant(weights[0] * smoothing), False, True)
        named.set_friendly_name("encoder/layer_0/ffn/linear_1")
        other = op.matmul(x, op.constant(weights[1]), False, True)
        other.set_friendly_name("encoder/layer_0/ffn/linear_0")
        return ov.Model([op.result(named), op.result(other)], [x])

    before, after = model(), model()
    assert weights_to_int8(after, (r".*ffn/linear_1",)) == 1
    inputs = rng.standard_normal((1, 5, 32)).astype(np.float32)
    core = ov.Core()
    old = core.compile_model(before, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({0: inputs})
    new = core.compile_model(after, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({0: inputs})
    exact = inputs[0] @ weights[0].T
    assert np.abs(new[0][0] - exact).max() < 0.02 * np.abs(exact).max()  # int8 weights' error
    assert np.array_equal(new[1], old[1])  # the product not named is as it was
    kinds = {n.get_friendly_name(): n for n in after.get_ordered_ops()}
    named = kinds["encoder/layer_0/ffn/linear_1"]
    assert named.input_value(0).get_node().get_type_name() == "Parameter"  # smoothing undone
    assert named.input_value(1).get_node().get_type_name() == "Multiply"  # int8 rows widened


def test_inputs_are_quantized_at_run_time_only_where_the_cpu_has_int8_units() -> None:
    from byoa_skills.runtimes.speech.openvino_encoder import RUN_TIME_GROUP, run_time_group

    assert [run_time_group(f) for f in (ZEN4, SAPPHIRE_RAPIDS, AVX512_VNNI, ALDER_LAKE)] == [
        RUN_TIME_GROUP
    ] * 4
    assert [run_time_group(f) for f in (AVX2, AVX512, None)] == [0, 0, 0]


def test_ctrl_c_while_the_int8_encoder_is_built_stops_at_once_with_its_child(
    engine_home: Path, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    import psutil

    derived = tmp_path / "derived"
    env = {
        **os.environ,
        "BYOA_SKILLS_HOME": str(engine_home),
        DERIVED_ENV: str(derived),
        ENCODER_ENV: "openvino-int8",
    }
    clip = str(SPEECH / "jfk.wav")
    running = subprocess.Popen(
        [sys.executable, "-m", "byoa_skills", "transcribe", "--model", "tiny.en", clip],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # as from a terminal, whatever this process inherited (a background start ignores it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        children: list[psutil.Process] = []
        for _ in range(1200):  # until the quantizer runs in its own process
            if list(derived.glob("*/.int8-build-*")):
                children = psutil.Process(running.pid).children(recursive=True)
                if children:
                    break
            time.sleep(0.05)
        assert children, "the int8 build never started"
        running.send_signal(signal.SIGINT)
        _out, err = running.communicate(timeout=60)
    finally:
        running.kill()
    assert running.returncode == 130, err
    said = err.strip().splitlines()
    assert said[-1] == "byoa-skills transcribe: stopped", err
    assert len(said) == 2 and "quantizing the encoder for this CPU, once" in said[0], err
    _gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive  # the quantizer ended with the command
    assert not list(derived.glob("*/openvino-encoder-int8.json"))  # nothing half-made kept
    assert not list(derived.glob("*/.int8-build-*"))


def test_without_a_private_cache_folder_the_float_graph_runs_and_says_why(
    tiny_dir: Path, own_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from byoa_skills.runtimes.speech.openvino_int8 import Int8Unavailable, cached_int8_model

    own_cache.mkdir(parents=True)
    own_cache.chmod(0o777)  # anyone could plant a model there
    with pytest.raises(Int8Unavailable, match="no private cache folder"):
        cached_int8_model(tiny_dir)
    backend = load_backend(tiny_dir, cpu_threads=2, encoder_backend="openvino-int8")
    rest = choose_encoder("openvino-int8").inference
    assert backend.encoder.label == f"openvino-{rest}"  # the float graph, built in memory
    assert "int8 encoder did not load" in backend.encoder.reason
    assert "no private cache folder" in backend.encoder.reason
    heard = backend.transcribe(samples("jfk.wav"), "en")
    assert "country" in heard.text.lower() and heard.encoder == f"openvino-{rest}"
    assert not any(own_cache.iterdir())
    assert "event=int8-encoder-fallback" in caplog.text


def test_the_int8_encoder_hears_the_words_of_ctranslate2s(engine_home: Path) -> None:
    # real speech: JFK's sentence word for word, and the held-out English sentences (speech the
    # calibration never saw) within 5 % word edits of CTranslate2 int8's transcripts
    import soundfile

    from byoa_skills.bench.clips import REAL_DIR, real_records
    from byoa_skills.bench.scenarios.longform import word_errors

    base = model_path("base", cache_dir=engine_home / "cache" / "models")
    int8 = load_backend(base, cpu_threads=2, encoder_backend="openvino-int8")
    ct2 = load_backend(base, cpu_threads=2, encoder_backend="ctranslate2")
    assert int8.encoder.label == "openvino-int8"
    ours, theirs = (
        int8.transcribe(samples("jfk.wav"), "en"),
        ct2.transcribe(samples("jfk.wav"), "en"),
    )
    assert ours.encoder == "openvino-int8"
    assert normalized_words(ours.text) == normalized_words(theirs.text)
    held_out = [r for r in real_records("held-out") if r["language"] == "en" and not r["short"]]
    edits = words = 0
    for record in held_out:
        clip, _ = soundfile.read(REAL_DIR / record["file"], dtype="float32")
        wrong, total = word_errors(
            ct2.transcribe(clip, "en").text, int8.transcribe(clip, "en").text
        )
        edits, words = edits + wrong, words + total
    assert len(held_out) >= 5 and words > 50
    assert edits <= 0.05 * words, (edits, words)


def test_health_the_engine_view_and_each_answer_name_int8_and_its_precision(
    engine_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a folder of its own: the engine's worker (a daemon process) quantizes it itself
    import asyncio
    import base64

    from engine import call_http, start_engine
    from test_store_damaged import wallet_api

    monkeypatch.setenv(DERIVED_ENV, str(tmp_path / "derived"))
    rest = choose_encoder("openvino-int8").inference
    engine = start_engine(
        engine_home,
        "--model",
        "tiny.en",
        "--workers",
        "1",
        "--encoder-backend",
        "openvino-int8",
        log_name="serve-int8.log",
    )
    try:
        engine.wait_ready()
        health = json.loads(engine.get("/health", token=None)[1])
        [(_, view)] = asyncio.run(wallet_api(engine, [("GET", "/wallet/api/engine", None)]))
        clip = base64.b64encode((SPEECH / "jfk.wav").read_bytes()).decode()
        body = {"input": {"audio": {"mime": "audio/wav", "base64": clip}}}
        status, answer = asyncio.run(call_http(engine, "audio.transcribe", body))
    finally:
        engine.stop()
    assert health["encoder"] == "openvino-int8" and "encoderNote" not in health
    assert health["encoderPrecision"] == f"int8, float layers {rest}"
    speech = view["speech"]
    assert (speech["encoder"], speech["encoderPrecision"]) == (
        "openvino-int8",
        f"int8, float layers {rest}",
    )
    assert status == 200 and "country" in answer["output"]["text"].lower()
