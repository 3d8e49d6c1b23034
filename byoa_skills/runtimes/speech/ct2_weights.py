"""Read the variables of a CTranslate2 ``model.bin`` back into numpy arrays, and write them.

CTranslate2 writes its models with ``ModelSpec._serialize`` (python/ctranslate2/specs/
model_spec.py) and reads them with ``load_model`` (src/models/model.cc); no library reads them
back into Python. The layout, all integers little-endian:

    uint32 binary version (1 to 6)
    [version >= 2] string spec name, uint32 spec revision
    uint32 variable count, then for each variable:
        string name, uint8 rank, rank uint32 dimensions,
        [version >= 4] uint8 type id, uint32 byte count
        [version < 4]  uint8 item size, uint32 item count
        the raw bytes, C order
    [version >= 3] uint32 alias count, then for each: string alias, string variable name

A string is a uint16 length that counts a final NUL byte, then the bytes and the NUL. Type ids
follow CTranslate2's ``DataType`` enum: float32, int8, int16, int32, float16, bfloat16.

Only numpy and the standard library are imported.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: The newest binary version this reader knows (CTranslate2's ``CURRENT_BINARY_VERSION``).
MAX_BINARY_VERSION = 6

#: numpy dtypes by CTranslate2 type id; bfloat16 (5) has no numpy dtype and is widened.
_DTYPES: dict[int, np.dtype] = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
}
_BFLOAT16 = 5
#: Type ids by numpy dtype, for writing.
_TYPE_IDS = {dtype: type_id for type_id, dtype in _DTYPES.items()}
#: Before binary version 4 a variable names its item size, not its type.
_DTYPES_BY_ITEM_SIZE = {1: np.dtype("i1"), 2: np.dtype("<f2"), 4: np.dtype("<f4")}


class Ct2FormatError(ValueError):
    """The file is not a CTranslate2 model this reader understands: truncated, damaged, or
    of a newer binary version."""


@dataclass(frozen=True)
class Ct2Model:
    """The content of one ``model.bin``.

    ``variables`` maps each stored name to its array (read-only, sharing the file's bytes);
    ``aliases`` maps each alias to the stored name it stands for, as CTranslate2 writes it
    for a tensor used twice (a tied embedding, for one).
    """

    binary_version: int
    spec: str
    revision: int
    variables: dict[str, np.ndarray] = field(repr=False)
    aliases: dict[str, str] = field(default_factory=dict)

    def resolved(self) -> dict[str, np.ndarray]:
        """Every name, the aliases included, mapped to its array."""
        names = dict(self.variables)
        for alias, target in self.aliases.items():
            if target not in self.variables:
                raise Ct2FormatError(f"alias {alias!r} names no variable ({target!r})")
            names[alias] = self.variables[target]
        return names


def read_ct2_model(path: str | os.PathLike[str]) -> Ct2Model:
    """The binary version, spec, revision, variables and aliases of the ``model.bin`` at
    ``path``.

    Arrays keep the stored dtype (float16 weights stay float16), except bfloat16, which numpy
    lacks: those are widened to float32 exactly. Raises :class:`Ct2FormatError` for a file this
    reader cannot take whole, ``OSError`` when it cannot be read.
    """
    return _Reader(Path(path).read_bytes()).model()


def read_ct2_variables(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Name → array for every variable and alias of the ``model.bin`` at ``path``; see
    :func:`read_ct2_model`."""
    return read_ct2_model(path).resolved()


def write_ct2_model(model: Ct2Model) -> bytes:
    """The bytes of a ``model.bin`` holding ``model`` in binary version
    :data:`MAX_BINARY_VERSION` (what :func:`read_ct2_model` reads back; a bfloat16 variable,
    widened on reading, is written as float32). Raises :class:`Ct2FormatError` for a variable
    of a dtype CTranslate2 has no type for."""
    parts = [
        struct.pack("<I", MAX_BINARY_VERSION),
        _string(model.spec),
        struct.pack("<II", model.revision, len(model.variables)),
    ]
    for name, value in model.variables.items():
        array = np.asarray(value)  # ascontiguousarray would make a scalar 1-D
        dtype = array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype
        if dtype not in _TYPE_IDS:
            raise Ct2FormatError(
                f"variable {name!r} has dtype {array.dtype}, not a CTranslate2 type"
            )
        parts += [
            _string(name),
            struct.pack(f"<B{array.ndim}I", array.ndim, *array.shape),
            struct.pack("<BI", _TYPE_IDS[dtype], array.nbytes),
            array.astype(dtype, copy=False).tobytes(order="C"),
        ]
    parts.append(struct.pack("<I", len(model.aliases)))
    for alias, target in model.aliases.items():
        parts += [_string(alias), _string(target)]
    return b"".join(parts)


def _string(text: str) -> bytes:
    data = text.encode("utf-8") + b"\0"
    return struct.pack("<H", len(data)) + data


class _Reader:
    """A cursor over the file's bytes that reports where a short read happened."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def model(self) -> Ct2Model:
        version = self.uint(4)
        if not 1 <= version <= MAX_BINARY_VERSION:
            raise Ct2FormatError(
                f"binary version {version} is not one this reader knows (1 to {MAX_BINARY_VERSION})"
            )
        spec, revision = (self.string(), self.uint(4)) if version >= 2 else ("", 1)
        variables: dict[str, np.ndarray] = {}
        for _ in range(self.uint(4)):
            name = self.string()
            if name in variables:
                raise Ct2FormatError(f"variable {name!r} is stored twice")
            variables[name] = self.array(version, name)
        aliases: dict[str, str] = {}
        if version >= 3:
            for _ in range(self.uint(4)):
                alias = self.string()
                aliases[alias] = self.string()
        if self.offset != len(self.data):
            raise Ct2FormatError(f"{len(self.data) - self.offset} bytes follow the model's end")
        return Ct2Model(version, spec, revision, variables, aliases)

    def array(self, version: int, name: str) -> np.ndarray:
        rank = self.uint(1)
        shape = tuple(struct.unpack_from(f"<{rank}I", self.take(4 * rank, name)))
        if version >= 4:
            type_id, size = self.uint(1), self.uint(4)
            if type_id == _BFLOAT16:
                raw = self.items(np.dtype("<u2"), size, shape, name)
                return (raw.astype("<u4") << 16).view("<f4")
            if type_id not in _DTYPES:
                raise Ct2FormatError(f"variable {name!r} has unknown type id {type_id}")
            dtype = _DTYPES[type_id]
        else:
            item_size, count = self.uint(1), self.uint(4)
            if item_size not in _DTYPES_BY_ITEM_SIZE:
                raise Ct2FormatError(f"variable {name!r} has unknown item size {item_size}")
            dtype = _DTYPES_BY_ITEM_SIZE[item_size]
            size = count * item_size
        return self.items(dtype, size, shape, name)

    def items(self, dtype: np.dtype, size: int, shape: tuple[int, ...], name: str) -> np.ndarray:
        count = int(np.prod(shape, dtype=np.int64))
        if size != count * dtype.itemsize:
            raise Ct2FormatError(f"variable {name!r} has {size} bytes for shape {shape}")
        return np.frombuffer(self.take(size, name), dtype=dtype).reshape(shape)

    def string(self) -> str:
        length = self.uint(2)
        if length == 0:
            raise Ct2FormatError(f"empty string at byte {self.offset - 2}")
        raw = self.take(length, "a name")
        if raw[-1] != 0:
            raise Ct2FormatError(f"unterminated string at byte {self.offset - length}")
        return bytes(raw[:-1]).decode("utf-8")

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size, "a header field"), "little")

    def take(self, size: int, what: str) -> memoryview:
        end = self.offset + size
        if end > len(self.data):
            raise Ct2FormatError(
                f"the file ends at byte {len(self.data)} inside {what} (byte {self.offset}, "
                f"{size} bytes)"
            )
        chunk = memoryview(self.data)[self.offset : end]
        self.offset = end
        return chunk
