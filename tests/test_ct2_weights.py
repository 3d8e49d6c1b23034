"""The CTranslate2 model.bin reader: files written here byte by byte as CTranslate2's
``ModelSpec._serialize`` writes them, and the catalog's real ``tiny.en``."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from byoa_skills.models import model_path
from byoa_skills.runtimes.speech.ct2_weights import (
    Ct2FormatError,
    read_ct2_model,
    read_ct2_variables,
)

TYPE_IDS = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 4}


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<H", len(raw) + 1) + raw + b"\0"


def model_bin(
    variables: dict[str, np.ndarray],
    aliases: dict[str, str] | None = None,
    *,
    version: int = 6,
    raw: dict[str, tuple[int, tuple[int, ...], bytes]] | None = None,
) -> bytes:
    """A model.bin as CTranslate2 writes it (``raw``: name → type id, shape, bytes)."""
    out = struct.pack("<I", version) + _string("TestSpec") + struct.pack("<I", 2)
    entries = [(n, TYPE_IDS[str(v.dtype)], v.shape, v.tobytes()) for n, v in variables.items()]
    entries += [(n, *spec) for n, spec in (raw or {}).items()]
    out += struct.pack("<I", len(entries))
    for name, type_id, shape, data in entries:
        out += _string(name) + struct.pack("<B", len(shape))
        out += struct.pack(f"<{len(shape)}I", *shape)
        if version >= 4:
            out += struct.pack("<BI", type_id, len(data))
        else:
            item = {0: 4, 1: 1, 4: 2}[type_id]
            out += struct.pack("<BI", item, len(data) // item)
        out += data
    if version >= 3:
        out += struct.pack("<I", len(aliases or {}))
        for alias, target in (aliases or {}).items():
            out += _string(alias) + _string(target)
    return out


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "model.bin"
    path.write_bytes(data)
    return path


def test_reads_every_dtype_shape_and_alias(tmp_path: Path) -> None:
    variables = {
        "a/weight": np.arange(6, dtype=np.float16).reshape(2, 3),
        "a/bias": np.array([1.5, -2.0], dtype=np.float32),
        "flags/int8": np.array(3, dtype=np.int8),
        "heads": np.array(6, dtype=np.int16),
        "ids": np.array([1, 2, 3], dtype=np.int32),
    }
    path = write(tmp_path, model_bin(variables, {"b/weight": "a/weight"}))
    model = read_ct2_model(path)
    assert (model.binary_version, model.spec, model.revision) == (6, "TestSpec", 2)
    assert model.aliases == {"b/weight": "a/weight"}
    for name, value in variables.items():
        got = model.variables[name]
        assert got.dtype == value.dtype and got.shape == value.shape
        assert np.array_equal(got, value)
    resolved = read_ct2_variables(path)
    assert resolved["b/weight"] is resolved["a/weight"]


def test_bfloat16_is_widened_to_float32_exactly(tmp_path: Path) -> None:
    values = np.array([1.0, -2.5, 3.140625, 0.0], dtype=np.float32)
    bits = (values.view(np.uint32) >> 16).astype("<u2")
    path = write(tmp_path, model_bin({}, raw={"w": (5, (4,), bits.tobytes())}))
    got = read_ct2_variables(path)["w"]
    assert got.dtype == np.float32
    assert np.array_equal(got, values)


def test_reads_the_older_item_size_layout(tmp_path: Path) -> None:
    value = np.array([[1.0, 2.0]], dtype=np.float32)
    path = write(tmp_path, model_bin({"w": value}, version=3))
    assert np.array_equal(read_ct2_variables(path)["w"], value)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-3], "ends at byte"),
        (lambda data: data + b"\0", "follow the model's end"),
        (lambda data: struct.pack("<I", 7) + data[4:], "binary version 7"),
        (lambda data: struct.pack("<I", 0) + data[4:], "binary version 0"),
    ],
)
def test_damaged_files_are_refused(
    tmp_path: Path, damage: Callable[[bytes], bytes], message: str
) -> None:
    data = model_bin({"w": np.ones((2, 2), dtype=np.float16)})
    with pytest.raises(Ct2FormatError, match=message):
        read_ct2_model(write(tmp_path, damage(data)))


def test_a_size_that_does_not_match_the_shape_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, model_bin({}, raw={"w": (4, (3,), b"\0" * 4)}))
    with pytest.raises(Ct2FormatError, match="4 bytes for shape"):
        read_ct2_model(path)


def test_an_alias_to_nothing_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, model_bin({"w": np.ones(2, np.float32)}, {"v": "missing"}))
    with pytest.raises(Ct2FormatError, match="names no variable"):
        read_ct2_variables(path)


def test_reads_the_catalog_tiny_en(engine_home: Path) -> None:
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    model = read_ct2_model(folder / "model.bin")
    assert (model.binary_version, model.spec, model.revision) == (6, "WhisperSpec", 3)
    assert model.aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    weights = {n: v for n, v in model.variables.items() if v.ndim > 0}
    assert {str(v.dtype) for v in weights.values()} == {"float16"}  # a float16 conversion
    assert weights["decoder/embeddings/weight"].shape == (51864, 384)
    assert weights["encoder/conv1/weight"].shape == (384, 80, 3)
    assert weights["encoder/layer_0/self_attention/linear_0/weight"].shape == (3 * 384, 384)
    assert int(model.variables["encoder/num_heads"]) == 6
