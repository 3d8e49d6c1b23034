"""The torch backend on real speech, against the CTranslate2 backend on the same weights.

Real models from the test run's verified model cache, real inference.
``BYOA_TEST_TORCH_DEVICE=cuda`` runs the torch backend on a GPU (scripts/gpu-check.sh); the
reference is always CTranslate2 on the CPU in float32, which the torch backend matches exactly
on the CPU.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: nothing from the hub

import numpy as np
import pytest
from speech import samples

from byoa_skills.models import model_path
from byoa_skills.runtimes.speech import (
    DecodeOptions,
    RuntimeRefusal,
    SpeechBackend,
    Transcript,
    WhisperCT2Backend,
    WhisperTorchBackend,
    load_backend,
)
from byoa_skills.runtimes.speech import devices as devices_module
from byoa_skills.runtimes.speech.ct2_weights import read_ct2_variables
from byoa_skills.runtimes.speech.derived import DERIVED_ENV
from byoa_skills.runtimes.speech.devices import resolve_device
from byoa_skills.runtimes.speech.torch_weights import (
    CACHE_NAME,
    RECORD_NAME,
    cache_folder,
    load_whisper_weights,
)

SPEECH = Path(__file__).parent / "data" / "speech"
CLIPS = json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))
DEVICE = os.environ.get("BYOA_TEST_TORCH_DEVICE", "cpu")
#: PyTorch's threads (process-wide): 1 keeps it from spinning on cores other work shares.
TORCH_THREADS = 1
THREADS = 2
GREEDY = DecodeOptions(beam_size=1)
#: transformers' layer-norm names → CTranslate2's.
BLOCKS = {"self_attn": "self_attention", "encoder_attn": "attention", "final": "ffn"}
NORMS = {"weight": "gamma", "bias": "beta"}


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@pytest.fixture(scope="module")
def model_dir(engine_home: Path) -> Callable[[str], Path]:
    return lambda name: model_path(name, cache_dir=engine_home / "cache" / "models")


@pytest.fixture(scope="module")
def torch_tiny(model_dir: Callable[[str], Path]) -> WhisperTorchBackend:
    backend = load_backend(
        model_dir("tiny.en"),
        model_name="tiny.en",
        device=DEVICE,
        cpu_threads=TORCH_THREADS,
        backend="torch",
    )
    assert isinstance(backend, WhisperTorchBackend)
    return backend


@pytest.fixture(scope="module")
def torch_base(model_dir: Callable[[str], Path]) -> WhisperTorchBackend:
    backend = WhisperTorchBackend(model_dir("base"), device=DEVICE, cpu_threads=TORCH_THREADS)
    backend.load()
    return backend


def ct2_float32(folder: Path, name: str) -> SpeechBackend:
    """CTranslate2 in float32, encoder included: like with like for torch's float32 (with
    ``auto`` a CPU with bf16 units would encode in OpenVINO bf16, another encoder)."""
    return load_backend(
        folder,
        model_name=name,
        compute_type="float32",
        cpu_threads=THREADS,
        options=GREEDY,
        encoder_backend="ctranslate2",
    )


@pytest.fixture(scope="module")
def ct2_tiny(model_dir: Callable[[str], Path]) -> SpeechBackend:
    return ct2_float32(model_dir("tiny.en"), "tiny.en")


@pytest.fixture(scope="module")
def ct2_base(model_dir: Callable[[str], Path]) -> SpeechBackend:
    return ct2_float32(model_dir("base"), "base")


@pytest.fixture(scope="module")
def tiny_answers(torch_tiny: WhisperTorchBackend) -> dict[str, Transcript]:
    """Every clip transcribed alone by the torch backend (language ``en``)."""
    return {clip["file"]: torch_tiny.transcribe(samples(clip["file"]), "en") for clip in CLIPS}


def same_text(torch_text: str, ct2_text: str) -> bool:
    """Exactly equal on the CPU; on a GPU (float16) the words may differ a little."""
    if DEVICE == "cpu":
        return torch_text == ct2_text
    said, heard = words(ct2_text), set(words(torch_text))
    return sum(w in heard for w in said) >= 0.7 * len(said)


# --- weights -------------------------------------------------------------------------------


def test_conversion_is_exact_for_every_parameter(
    torch_tiny: WhisperTorchBackend, model_dir: Callable[[str], Path]
) -> None:
    import torch

    ct2 = read_ct2_variables(model_dir("tiny.en") / "model.bin")
    state = torch_tiny.model.state_dict()
    d = 384
    rules = [  # transformers' name → CTranslate2's name and the rows it takes
        (
            r"model\.(encoder|decoder)\.layers\.(\d+)\.self_attn\.([qkv])_proj\.(weight|bias)",
            lambda m: (f"{m[1]}/layer_{m[2]}/self_attention/linear_0/{m[4]}", "qkv".index(m[3])),
        ),
        (
            r"model\.decoder\.layers\.(\d+)\.encoder_attn\.q_proj\.(weight|bias)",
            lambda m: (f"decoder/layer_{m[1]}/attention/linear_0/{m[2]}", None),
        ),
        (
            r"model\.decoder\.layers\.(\d+)\.encoder_attn\.([kv])_proj\.(weight|bias)",
            lambda m: (f"decoder/layer_{m[1]}/attention/linear_1/{m[3]}", "kv".index(m[2])),
        ),
        (
            r"model\.(encoder|decoder)\.layers\.(\d+)\.self_attn\.out_proj\.(weight|bias)",
            lambda m: (f"{m[1]}/layer_{m[2]}/self_attention/linear_1/{m[3]}", None),
        ),
        (
            r"model\.decoder\.layers\.(\d+)\.encoder_attn\.out_proj\.(weight|bias)",
            lambda m: (f"decoder/layer_{m[1]}/attention/linear_2/{m[2]}", None),
        ),
        (
            r"model\.(encoder|decoder)\.layers\.(\d+)\.fc([12])\.(weight|bias)",
            lambda m: (f"{m[1]}/layer_{m[2]}/ffn/linear_{int(m[3]) - 1}/{m[4]}", None),
        ),
        (
            r"model\.(encoder|decoder)\.layers\.(\d+)\.(self_attn|encoder_attn|final)_layer_norm\."
            r"(weight|bias)",
            lambda m: (f"{m[1]}/layer_{m[2]}/{BLOCKS[m[3]]}/layer_norm/{NORMS[m[4]]}", None),
        ),
        (
            r"model\.(encoder|decoder)\.layer_norm\.(weight|bias)",
            lambda m: (f"{m[1]}/layer_norm/{NORMS[m[2]]}", None),
        ),
        (
            r"model\.(encoder|decoder)\.embed_positions\.weight",
            lambda m: (f"{m[1]}/position_encodings/encodings", None),
        ),
        (r"model\.encoder\.(conv[12])\.(weight|bias)", lambda m: (f"encoder/{m[1]}/{m[2]}", None)),
        (r"model\.decoder\.embed_tokens\.weight", lambda m: ("decoder/embeddings/weight", None)),
        (r"proj_out\.weight", lambda m: ("decoder/projection/weight", None)),
    ]
    used: set[str] = set()
    for name, tensor in state.items():
        source, part = next(
            rule(match) for pattern, rule in rules if (match := re.fullmatch(pattern, name))
        )
        expected = ct2[source] if part is None else ct2[source][part * d : (part + 1) * d]
        used.add(source)
        assert tuple(tensor.shape) == expected.shape, name
        if DEVICE == "cpu":
            assert tensor.dtype == torch.float32
            assert np.array_equal(tensor.numpy(), expected.astype(np.float32)), name
        else:  # float16 on the GPU: the stored values themselves
            assert np.array_equal(tensor.cpu().numpy(), expected), name
    weights = {n for n, v in ct2.items() if v.ndim > 0}
    assert used == weights  # every CTranslate2 weight went somewhere
    # transformers has no k bias: the converter stored zeros there.
    for i in range(4):
        assert not ct2[f"encoder/layer_{i}/self_attention/linear_0/bias"][d : 2 * d].any()
    assert "model.decoder.layers.0.self_attn.k_proj.bias" not in state


def test_the_converted_state_dict_loads_strictly(
    torch_tiny: WhisperTorchBackend, model_dir: Callable[[str], Path]
) -> None:
    import torch
    from transformers import WhisperForConditionalGeneration

    weights = load_whisper_weights(model_dir("tiny.en"))
    fresh = WhisperForConditionalGeneration(torch_tiny.model.config)
    tensors = {n: torch.from_numpy(v) for n, v in weights.state.items()}
    result = fresh.load_state_dict(tensors, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    assert fresh.proj_out.weight.data_ptr() == fresh.model.decoder.embed_tokens.weight.data_ptr()


def test_the_cache_is_reused_and_a_damaged_one_is_rebuilt(
    model_dir: Callable[[str], Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(DERIVED_ENV, raising=False)  # this home's own cache
    model = tmp_path / "tiny.en"
    model.mkdir()
    for file in ("model.bin", "config.json", "tokenizer.json"):
        (model / file).symlink_to(model_dir("tiny.en") / file)
    (model / CACHE_NAME).write_bytes(b"planted beside model.bin: never read")
    first = load_whisper_weights(model)
    assert first.converted
    folder = cache_folder(model)  # this installation's own cache folder
    assert folder.is_relative_to(tmp_path / "home" / "cache" / "derived")
    record = json.loads((folder / RECORD_NAME).read_text())
    manifest = json.loads((model_dir("tiny.en") / ".byoa-model.json").read_text())
    assert record["source_sha256"] == manifest["files"]["model.bin"]["sha256"]
    again = load_whisper_weights(model)
    assert not again.converted
    assert again.state.keys() == first.state.keys()
    assert all(np.array_equal(again.state[n], first.state[n]) for n in first.state)

    cache = folder / CACHE_NAME
    data = bytearray(cache.read_bytes())
    data[-100] ^= 0x01  # one flipped bit in a weight
    cache.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="byoa_skills.runtimes"):
        rebuilt = load_whisper_weights(model)
    assert rebuilt.converted
    assert "differs from its record" in caplog.text
    assert cache.read_bytes() != bytes(data)
    assert not load_whisper_weights(model).converted

    record = json.loads((folder / RECORD_NAME).read_text())
    record["source_sha256"] = "0" * 64  # as if model.bin had been replaced
    (folder / RECORD_NAME).write_text(json.dumps(record))
    assert load_whisper_weights(model).converted
    (folder / RECORD_NAME).unlink()
    assert load_whisper_weights(model).converted
    assert not load_whisper_weights(model).converted


# --- transcripts ---------------------------------------------------------------------------


def test_transcribes_jfk(tiny_answers: dict[str, Transcript]) -> None:
    answer = tiny_answers["jfk.wav"]
    assert "ask not what your country can do" in " ".join(words(answer.text))
    assert (answer.language, answer.language_probability) == ("en", 1.0)
    assert answer.seconds > 0


def test_greedy_text_equals_ct2_on_every_clip(
    tiny_answers: dict[str, Transcript], ct2_tiny: SpeechBackend
) -> None:
    for clip in CLIPS:
        expected = ct2_tiny.transcribe(samples(clip["file"]), "en")
        got = tiny_answers[clip["file"]]
        assert same_text(got.text, expected.text), (clip["file"], got.text, expected.text)
        assert got.language == expected.language
    assert tiny_answers["silence-1s.wav"].text == tiny_answers["noise-2s.wav"].text == ""


def test_a_batch_equals_one_by_one(
    torch_tiny: WhisperTorchBackend, tiny_answers: dict[str, Transcript]
) -> None:
    files = [clip["file"] for clip in CLIPS]
    batch = torch_tiny.transcribe_batch([(samples(f), "en") for f in files])
    assert [(a.text, a.language) for a in batch] == [
        (tiny_answers[f].text, tiny_answers[f].language) for f in files
    ]
    assert len({a.seconds for a in batch}) == 1  # the batch's wall time


def test_multilingual_detection_and_a_mixed_batch(
    torch_base: WhisperTorchBackend, ct2_base: SpeechBackend
) -> None:
    items = [
        (samples("ru-thanks.wav"), None),
        (samples("jfk.wav"), None),
        (samples("sk-weather.wav"), "sk"),
        (samples("silence-1s.wav"), None),
        (samples("en-hello.wav"), "en"),
    ]
    alone = [torch_base.transcribe(s, lang) for s, lang in items]
    assert alone[0].language == "ru" and "спасибо" in words(alone[0].text)
    assert alone[1].language == "en" and alone[1].language_probability > 0.8
    assert (alone[3].text, alone[3].language, alone[3].language_probability) == ("", None, 0.0)
    for (s, lang), got in zip(items, alone, strict=True):
        expected = ct2_base.transcribe(s, lang)
        assert got.language == expected.language
        assert same_text(got.text, expected.text), (got.text, expected.text)
        assert got.language_probability == pytest.approx(expected.language_probability, abs=0.02)
    batch = torch_base.transcribe_batch(items)
    for one, many in zip(alone, batch, strict=True):
        assert isinstance(many, Transcript)
        assert (many.text, many.language) == (one.text, one.language)
        assert many.language_probability == pytest.approx(one.language_probability, rel=1e-4)


def test_a_batch_answers_a_bad_item_in_its_place(torch_base: WhisperTorchBackend) -> None:
    good = samples("en-hello.wav")
    answers = torch_base.transcribe_batch(
        [(good, "xx"), (good, "en"), (good.astype(np.float64), None)]  # type: ignore[list-item]
    )
    assert [getattr(a, "code", None) for a in answers] == [
        "unsupported-language",
        None,
        "bad-samples",
    ]
    assert isinstance(answers[1], Transcript) and answers[1].text


# --- the contract --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "language", "code"),
    [
        (np.zeros(160, dtype=np.int16), "en", "bad-samples"),
        (np.zeros((2, 160), dtype=np.float32), "en", "bad-samples"),
        (np.array([0.0, np.nan], dtype=np.float32), "en", "bad-samples"),
        ([0.0, 0.1], "en", "bad-samples"),
        (np.zeros(160, dtype=np.float32), "ru", "unsupported-language"),
        (np.zeros(160, dtype=np.float32), "EN", "unsupported-language"),
    ],
)
def test_refusals(torch_tiny: WhisperTorchBackend, bad: object, language: str, code: str) -> None:
    with pytest.raises(RuntimeRefusal) as refused:
        torch_tiny.transcribe(bad, language)  # type: ignore[arg-type]
    assert refused.value.code == code
    assert torch_tiny.transcribe(np.zeros(0, dtype=np.float32), "en").text == ""


def test_languages_and_options(
    torch_tiny: WhisperTorchBackend, torch_base: WhisperTorchBackend, ct2_base: SpeechBackend
) -> None:
    assert torch_tiny.languages == frozenset({"en"}) and not torch_tiny.multilingual
    assert torch_base.multilingual
    assert torch_base.languages == ct2_base.languages
    assert torch_base.max_batch_size >= 1
    with pytest.raises(ValueError, match="greedily"):
        WhisperTorchBackend(torch_tiny.model_dir, options=DecodeOptions(beam_size=5))
    with pytest.raises(RuntimeError, match="load"):
        WhisperTorchBackend(torch_tiny.model_dir).transcribe(np.zeros(1, np.float32))
    with pytest.raises(FileNotFoundError):
        WhisperTorchBackend(torch_tiny.model_dir.parent / "nothing").load()
    with pytest.raises(ValueError, match="backend"):
        load_backend(torch_tiny.model_dir, backend="onnx")


def test_the_pool_worker_and_the_cli_load_the_torch_backend(
    model_dir: Callable[[str], Path],
    engine_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from byoa_skills.cli import main
    from byoa_skills.pool.config import PoolConfig
    from byoa_skills.pool.worker_main import _load_backend

    config = PoolConfig(model_dir=model_dir("tiny.en"), model_name="tiny.en", backend="torch")
    backend = _load_backend(config)
    assert isinstance(backend, WhisperTorchBackend) and backend.options.beam_size == 1
    assert not isinstance(backend, WhisperCT2Backend)

    monkeypatch.setenv("BYOA_SKILLS_HOME", str(engine_home))
    status = main(
        [
            "transcribe",
            "--backend",
            "torch",
            "--model",
            "tiny.en",
            "--threads",
            "1",
            "--json",
            str(SPEECH / "jfk.wav"),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["ok"]
    assert "ask not what your country can do" in " ".join(words(report["text"]))


# --- devices -------------------------------------------------------------------------------


def test_device_auto_uses_the_gpu_only_when_it_computes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import torch

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto", "torch") == expected
    assert resolve_device("cpu", "torch") == "cpu"
    assert resolve_device("cuda", "ct2") == "cuda"  # named: taken as it is

    def broken(backend: str) -> None:
        raise RuntimeError("CUDA error: initialization error")

    monkeypatch.setattr(devices_module, "probe_cuda", broken)
    with caplog.at_level(logging.INFO, logger="byoa_skills"):
        assert resolve_device("auto", "torch") == "cpu"
        from byoa_skills.commands.common import resolve_device as cli_resolve

        assert cli_resolve("auto", "ct2") == "cpu"
    assert "event=device-auto backend=torch chosen=cpu" in caplog.text
    assert "initialization error" in caplog.text
    with pytest.raises(ValueError):
        resolve_device("tpu", "torch")


def test_a_cache_folder_others_may_write_is_refused_and_converts_in_memory(
    model_dir: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(DERIVED_ENV, raising=False)  # this home's own cache
    (tmp_path / "home" / "cache" / "derived").mkdir(parents=True)
    (tmp_path / "home" / "cache" / "derived").chmod(0o777)  # anyone could plant weights there
    folder = tmp_path / "tiny.en"
    folder.mkdir()
    (folder / "model.bin").symlink_to(model_dir("tiny.en") / "model.bin")
    weights = load_whisper_weights(folder)
    assert weights.converted and "proj_out.weight" in weights.state
    assert not any((tmp_path / "home" / "cache" / "derived").iterdir())
