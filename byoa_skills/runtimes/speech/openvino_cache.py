"""The OpenVINO encoder model, built once from ``model.bin`` and kept in this installation's
own cache folder, verified (:mod:`byoa_skills.runtimes.speech.derived`).

:func:`cached_encoder_model` builds the model (:func:`build_encoder_model`) the first time and
saves it with ``openvino.save_model`` as ``openvino-encoder.xml`` and ``openvino-encoder.bin``,
with the record ``openvino-encoder.json``. A cache whose source changed, whose files differ from
the record or whose record is missing or of another format is rebuilt, never used; so is one
asked to be rebuilt (a cache that verified but did not load). Where the folder cannot be used
the model is built in memory at each load.

Only numpy and the standard library are imported at module level; openvino when a model is
built or saved.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byoa_skills.runtimes.speech.ct2_weights import read_ct2_variables
from byoa_skills.runtimes.speech.derived import DerivedArtefact, model_sha256
from byoa_skills.runtimes.speech.openvino_encoder import build_encoder_model
from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

#: The cached model, its weights and its record.
XML_NAME = "openvino-encoder.xml"
BIN_NAME = "openvino-encoder.bin"
RECORD_NAME = "openvino-encoder.json"
#: Bumped whenever the graph changes, so that older caches are rebuilt.
FORMAT = 3
ARTEFACT = DerivedArtefact("openvino-encoder", (XML_NAME, BIN_NAME), FORMAT)

log = logging.getLogger("byoa_skills.runtimes")


@dataclass(frozen=True)
class EncoderModel:
    """The encoder model to compile: the cached ``.xml`` (``path``) or, where the folder
    cannot be used, an ``openvino.Model`` built in memory (``model``); ``built`` says
    whether it was built by this call (``False``: read from a verified cache)."""

    path: Path | None
    model: Any
    built: bool

    @property
    def source(self) -> Any:
        """What ``openvino.Core.compile_model`` takes: the path, or the in-memory model."""
        return str(self.path) if self.path is not None else self.model


def cached_encoder_model(model_dir: str | os.PathLike[str], rebuild: bool = False) -> EncoderModel:
    """The OpenVINO encoder model of the CTranslate2 model in ``model_dir``, from a verified
    cache, or built now (and cached); ``rebuild`` builds it even where the cache verifies.
    Raises ``FileNotFoundError`` without ``model.bin`` and the builder's errors for a
    model.bin that is not a Whisper model."""
    source = Path(model_dir) / "model.bin"
    if not source.is_file():
        raise FileNotFoundError(f"no model.bin in {Path(model_dir)}")
    source_sha256 = model_sha256(source)
    try:
        with ARTEFACT.building(source_sha256) as folder:
            if not rebuild and ARTEFACT.problem(folder, source_sha256) is None:
                return EncoderModel(folder / XML_NAME, None, built=False)
            _write_cache(folder, source, source_sha256)
            return EncoderModel(folder / XML_NAME, None, built=True)
    except OSError as error:  # no folder of our own to keep it in: built in memory
        log.warning("event=openvino-cache-unwritable reason=%r", str(error))
        return EncoderModel(None, build_encoder_model(read_ct2_variables(source)), built=True)


def cache_folder(model_dir: str | os.PathLike[str]) -> Path:
    """Where the cache of the model in ``model_dir`` lives (made private now)."""
    return ARTEFACT.folder(model_sha256(Path(model_dir) / "model.bin"))


def _write_cache(folder: Path, source: Path, source_sha256: str) -> None:
    ov = import_openvino()

    variables = read_ct2_variables(source)
    model = build_encoder_model(variables)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".openvino-build-") as scratch:
        xml = Path(scratch) / XML_NAME
        # fp16 storage is exact for the catalog's float16 conversions; an int8 or float32
        # model.bin keeps float32 weights
        ov.save_model(model, str(xml), compress_to_fp16=_all_float16(variables))
        files = {name: (Path(scratch) / name).read_bytes() for name in (XML_NAME, BIN_NAME)}
    ARTEFACT.write(folder, source_sha256, files, openvino=ov.__version__)


def _all_float16(variables: dict[str, Any]) -> bool:
    return all(
        v.dtype.kind != "f" or v.dtype.itemsize == 2
        for name, v in variables.items()
        if name.startswith("encoder/")
    )
