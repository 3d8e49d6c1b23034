"""The OpenVINO encoder model, built once from ``model.bin`` and kept beside it, verified.

:func:`cached_encoder_model` builds the model (:func:`build_encoder_model`) the first time and
saves it with ``openvino.save_model`` as ``openvino-encoder.xml`` and ``openvino-encoder.bin``
next to ``model.bin``, with ``openvino-encoder.json``, which records the SHA-256 of the
``model.bin`` it came from and of both files. A cache whose source changed, whose files differ
from the record (a damaged or truncated file) or whose record is missing or of another format
is rebuilt, never used. Building runs under a lock, so workers starting together build once. A
folder that cannot be written gets a model built in memory at each load.

Only numpy and the standard library are imported at module level; openvino when a model is
built or saved.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byoa_skills.runtimes.speech.ct2_weights import read_ct2_variables
from byoa_skills.runtimes.speech.openvino_encoder import build_encoder_model
from byoa_skills.runtimes.speech.torch_weights import weights_sha256
from byoa_skills.store.files import locked, write_private

#: The cached model, its weights and its record, next to ``model.bin``.
XML_NAME = "openvino-encoder.xml"
BIN_NAME = "openvino-encoder.bin"
RECORD_NAME = "openvino-encoder.json"
LOCK_NAME = ".openvino-encoder.lock"
#: Bumped whenever the graph changes, so that older caches are rebuilt.
FORMAT = 1

log = logging.getLogger("byoa_skills.runtimes")


@dataclass(frozen=True)
class EncoderModel:
    """The encoder model to compile: the cached ``.xml`` (``path``) or, where the folder
    cannot be written, an ``openvino.Model`` built in memory (``model``); ``built`` says
    whether it was built by this call (``False``: read from a verified cache)."""

    path: Path | None
    model: Any
    built: bool

    @property
    def source(self) -> Any:
        """What ``openvino.Core.compile_model`` takes: the path, or the in-memory model."""
        return str(self.path) if self.path is not None else self.model


def cached_encoder_model(model_dir: str | os.PathLike[str]) -> EncoderModel:
    """The OpenVINO encoder model of the CTranslate2 model in ``model_dir``, from a verified
    cache, or built now (and cached). Raises ``FileNotFoundError`` without ``model.bin`` and
    the builder's errors for a model.bin that is not a Whisper model."""
    folder = Path(model_dir)
    source = folder / "model.bin"
    if not source.is_file():
        raise FileNotFoundError(f"no model.bin in {folder}")
    try:
        with locked(folder / LOCK_NAME):
            source_sha256 = weights_sha256(source)
            if _cache_problem(folder, source_sha256) is None:
                return EncoderModel(folder / XML_NAME, None, built=False)
            _write_cache(folder, source, source_sha256)
            return EncoderModel(folder / XML_NAME, None, built=True)
    except OSError as error:  # a read-only folder: no lock, no cache
        log.warning("event=openvino-cache-unwritable folder=%s reason=%r", folder, str(error))
        return EncoderModel(None, build_encoder_model(read_ct2_variables(source)), built=True)


def _cache_problem(folder: Path, source_sha256: str) -> str | None:
    """Why the cache in ``folder`` cannot be used (logged, except a cache not made yet), or
    None when it matches its record and ``model.bin``."""
    try:
        record = json.loads((folder / RECORD_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "no cache yet"
    except (OSError, ValueError) as error:
        return _stale(folder, f"unreadable record: {error}")
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return _stale(folder, "a record of another format")
    if record.get("source_sha256") != source_sha256:
        return _stale(folder, "model.bin changed since the build")
    for name in (XML_NAME, BIN_NAME):
        try:
            digest = weights_sha256(folder / name)
        except OSError as error:
            return _stale(folder, f"{name} unreadable: {error}")
        if record.get("files", {}).get(name) != digest:
            return _stale(folder, f"{name} differs from its record")
    return None


def _write_cache(folder: Path, source: Path, source_sha256: str) -> None:
    import openvino as ov

    variables = read_ct2_variables(source)
    model = build_encoder_model(variables)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".openvino-build-") as scratch:
        xml = Path(scratch) / XML_NAME
        # fp16 storage is exact for the catalog's float16 conversions; an int8 or float32
        # model.bin keeps float32 weights
        ov.save_model(model, str(xml), compress_to_fp16=_all_float16(variables))
        files = {name: (Path(scratch) / name).read_bytes() for name in (BIN_NAME, XML_NAME)}
    for name, data in files.items():
        write_private(folder / name, data)
    record = {
        "format": FORMAT,
        "source": "model.bin",
        "source_sha256": source_sha256,
        "openvino": ov.__version__,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
        "bytes": sum(len(data) for data in files.values()),
    }
    write_private(folder / RECORD_NAME, (json.dumps(record, indent=2) + "\n").encode())
    log.info("event=openvino-cache-written folder=%s bytes=%d", folder, record["bytes"])


def _all_float16(variables: dict[str, Any]) -> bool:
    return all(
        v.dtype.kind != "f" or v.dtype.itemsize == 2
        for name, v in variables.items()
        if name.startswith("encoder/")
    )


def _stale(folder: Path, reason: str) -> str:
    log.warning("event=openvino-cache-rebuilt folder=%s reason=%r", folder, reason)
    return reason
