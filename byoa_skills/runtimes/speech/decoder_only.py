"""CTranslate2's Whisper without the encoder's weights, for a worker whose encoder runs on
OpenVINO: CTranslate2 then only decodes, and a copy of weights it never uses would take memory
in every worker.

The model is a folder in this installation's own cache (:mod:`derived`): a ``model.bin`` with
every variable of the encoder's convolution ``conv2`` and transformer layers cut to one
element, and copies of the model's ``config.json``, ``tokenizer.json``, ``vocabulary.txt``
(and ``preprocessor_config.json`` where it has one). What CTranslate2 reads to check an encoder
output's shape (``conv1``, the position encodings, the final layer norm) stays whole. The
record vouches for every file; a changed ``model.bin`` or companion file rebuilds it.

Such a model cannot encode: its ``encode`` is never called (the worker's
:class:`~byoa_skills.runtimes.speech.whisper_ct2.WhisperCT2Backend` gives faster-whisper the
OpenVINO encoder's output instead). Only numpy and the standard library are imported.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from byoa_skills.runtimes.speech.ct2_weights import Ct2Model, read_ct2_model, write_ct2_model
from byoa_skills.runtimes.speech.derived import DerivedArtefact, model_sha256

MODEL_BIN = "model.bin"
#: The model folder's files the decoder-only folder copies, where they exist.
COMPANIONS = ("config.json", "tokenizer.json", "vocabulary.txt", "preprocessor_config.json")
#: Bumped whenever the way the model is cut changes.
FORMAT = 1
#: The variables cut to one element: the encoder's second convolution and its layers.
CUT = re.compile(r"encoder/(conv2|layer_\d+)/")


def without_encoder(model: Ct2Model) -> Ct2Model:
    """``model`` with every variable :data:`CUT` matches cut to one element (same rank and
    dtype, value 0); the others, and the aliases, as they are."""
    variables = {
        name: np.zeros((1,) * value.ndim, dtype=value.dtype) if CUT.match(name) else value
        for name, value in model.variables.items()
    }
    return Ct2Model(model.binary_version, model.spec, model.revision, variables, model.aliases)


def decoder_only_folder(model_dir: str | os.PathLike[str]) -> Path:
    """The folder of the decoder-only model of the Whisper model in ``model_dir``, from a
    verified cache or made now. Raises ``OSError`` where the cache folder cannot be used and
    ``FileNotFoundError`` without ``model.bin``; the caller then loads the whole model."""
    source = Path(model_dir) / MODEL_BIN
    if not source.is_file():
        raise FileNotFoundError(f"no {MODEL_BIN} in {Path(model_dir)}")
    source_sha256 = model_sha256(source)
    companions = {
        name: (Path(model_dir) / name).read_bytes()
        for name in COMPANIONS
        if (Path(model_dir) / name).is_file()
    }
    recipe = ";".join(
        f"{name}={hashlib.sha256(data).hexdigest()}" for name, data in companions.items()
    )
    artefact = DerivedArtefact(
        "ct2-decoder", (MODEL_BIN, *companions), FORMAT, subfolder="ct2-decoder"
    )
    with artefact.building(source_sha256) as folder:
        if artefact.problem(folder, source_sha256, recipe) is not None:
            model = write_ct2_model(without_encoder(read_ct2_model(source)))
            artefact.write(folder, source_sha256, {MODEL_BIN: model, **companions}, recipe)
        return folder
