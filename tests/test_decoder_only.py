"""CTranslate2's model without the encoder's weights, in a worker whose encoder runs on
OpenVINO: the model file written back byte for byte, the cut model's verified cache, the
words of plain and timestamped calls through it, and the whole model where the cut one
cannot be had. Real models, no mocks.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from speech import samples

from byoa_skills.models import model_path
from byoa_skills.runtimes.speech import DecodeRequest, load_backend
from byoa_skills.runtimes.speech.ct2_weights import read_ct2_model, write_ct2_model
from byoa_skills.runtimes.speech.decoder_only import MODEL_BIN, decoder_only_folder
from byoa_skills.runtimes.speech.derived import DERIVED_ENV
from byoa_skills.runtimes.speech.phrases import normalized_words


@pytest.fixture(scope="module")
def tiny_dir(engine_home: Path) -> Path:
    return model_path("tiny.en", cache_dir=engine_home / "cache" / "models")


@pytest.fixture
def own_derived(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "derived"
    monkeypatch.setenv(DERIVED_ENV, str(folder))
    return folder


def test_a_model_file_is_written_back_byte_for_byte(tiny_dir: Path) -> None:
    source = (tiny_dir / MODEL_BIN).read_bytes()
    assert write_ct2_model(read_ct2_model(tiny_dir / MODEL_BIN)) == source


def test_the_cut_model_keeps_the_decoder_and_drops_the_encoders_layers(
    tiny_dir: Path, own_derived: Path
) -> None:
    folder = decoder_only_folder(tiny_dir)
    whole = read_ct2_model(tiny_dir / MODEL_BIN).variables
    cut = read_ct2_model(folder / MODEL_BIN).variables
    assert cut.keys() == whole.keys()
    for name, value in whole.items():
        if name.startswith("decoder/") or name.startswith("encoder/conv1/"):
            assert np.array_equal(cut[name], value), name
    layers = [name for name in whole if re.match(r"encoder/(conv2|layer_\d+)/", name)]
    assert layers and all(cut[name].size == 1 for name in layers)
    assert (folder / MODEL_BIN).stat().st_size < 0.85 * (tiny_dir / MODEL_BIN).stat().st_size
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        assert (folder / name).read_bytes() == (tiny_dir / name).read_bytes()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


def test_a_damaged_cut_model_is_made_again(tiny_dir: Path, own_derived: Path) -> None:
    folder = decoder_only_folder(tiny_dir)
    made = (folder / MODEL_BIN).read_bytes()
    with open(folder / MODEL_BIN, "r+b") as file:
        file.seek(len(made) // 2)
        file.write(bytes([made[len(made) // 2] ^ 0xFF]))
    assert decoder_only_folder(tiny_dir) == folder
    assert (folder / MODEL_BIN).read_bytes() == made


def test_an_openvino_worker_decodes_with_the_cut_model_and_hears_the_same_words(
    tiny_dir: Path,
) -> None:
    whole = load_backend(tiny_dir, cpu_threads=2, encoder_backend="ctranslate2")
    cut = load_backend(tiny_dir, cpu_threads=2, encoder_backend="openvino")
    assert cut.decoder_only and not whole.decoder_only  # type: ignore[attr-defined]
    expected = whole.transcribe(samples("jfk.wav"), "en")
    heard = cut.transcribe(samples("jfk.wav"), "en")
    assert heard.text and normalized_words(heard.text) == normalized_words(expected.text)
    # timestamps run faster-whisper's own transcribe: its encoder passes go to OpenVINO too
    # (the cut model's own encoder has no weights to hear anything with)
    detailed = cut.transcribe_detailed(
        samples("jfk.wav"), "en", DecodeRequest(timestamps="segment")
    )
    assert detailed.encoder == cut.encoder.label  # type: ignore[attr-defined]
    assert normalized_words(detailed.text) == normalized_words(expected.text)
    assert detailed.segments and detailed.segments[-1].end > 9.0


def test_the_decoder_loads_before_the_encoder_compiles(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading CTranslate2's model takes about 100 MiB more than it keeps: done first, that
    peak does not come on top of the compiled encoder's memory."""
    import faster_whisper

    from byoa_skills.runtimes.speech import openvino_encoder

    loaded: list[str] = []
    whisper_init = faster_whisper.WhisperModel.__init__
    encoder_init = openvino_encoder.OpenVINOEncoder.__init__

    def whisper(self: object, folder: str, *args: object, **kwargs: object) -> None:
        loaded.append(Path(folder).name)
        whisper_init(self, folder, *args, **kwargs)  # type: ignore[arg-type]

    def encoder(self: object, *args: object, **kwargs: object) -> None:
        loaded.append("openvino")
        encoder_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(faster_whisper.WhisperModel, "__init__", whisper)
    monkeypatch.setattr(openvino_encoder.OpenVINOEncoder, "__init__", encoder)
    backend = load_backend(tiny_dir, cpu_threads=2, encoder_backend="openvino")
    assert backend.decoder_only  # type: ignore[attr-defined]
    assert loaded == ["ct2-decoder", "openvino"]
    assert "country" in backend.transcribe(samples("jfk.wav"), "en").text.lower()


def test_where_the_cache_cannot_be_used_the_whole_model_decodes(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # writable by every user: refused
    monkeypatch.setenv(DERIVED_ENV, str(shared))
    backend = load_backend(tiny_dir, cpu_threads=2, encoder_backend="openvino")
    assert not backend.decoder_only  # type: ignore[attr-defined]
    assert "country" in backend.transcribe(samples("jfk.wav"), "en").text.lower()
    assert not any(shared.iterdir())
