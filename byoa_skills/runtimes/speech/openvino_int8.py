"""The int8 OpenVINO encoder: the float graph of :mod:`openvino_cache`, quantized after
training by NNCF on the calibration set's windows, built once and kept in this installation's
own cache folder, verified (:mod:`byoa_skills.runtimes.speech.derived`).

The matrix products and convolutions run in int8 (weights per output channel, activations
per tensor, ranges measured on :func:`calibration_windows`, SmoothQuant first as NNCF does for
transformers). The layers :data:`KEPT_FLOAT` names are kept out of that: one range measured for
all inputs did not keep the words there. Their weights are stored as int8 per output row and
their inputs are quantized at run time, per group of ``RUN_TIME_GROUP`` values of each
position (:mod:`openvino_encoder`; OpenVINO's dynamic quantization, :func:`weights_to_int8`),
as CTranslate2 quantizes its own products. Where the CPU plugin cannot do that, it widens the
weights and the product runs in float: bf16 on a CPU with bf16 units, f32 elsewhere (the
compile's inference precision). Which layers are kept out was chosen on the tune part of the
real-speech set (``scripts/measure_int8_encoder.py``; the choice and its figures are in
docs/performance.md); the calibration set is part of that tune part. A cache built from
another calibration set, another list or another NNCF is rebuilt.

Where the cache folder cannot be used nothing is quantized (it takes tens of seconds, at every
start): :class:`Int8Unavailable` says so and the runtime runs the float graph instead.

Only the standard library is imported at module level; openvino and nncf when a model is built.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from byoa_skills.runtimes.speech.derived import DerivedArtefact, model_sha256
from byoa_skills.runtimes.speech.openvino_cache import EncoderModel, cached_encoder_model
from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

XML_NAME = "openvino-encoder-int8.xml"
BIN_NAME = "openvino-encoder-int8.bin"
#: Bumped whenever the way the model is quantized changes in a way the recipe does not show
#: (2: the kept-out layers' weights int8, their inputs quantized at run time).
FORMAT = 2
ARTEFACT = DerivedArtefact("openvino-encoder-int8", (XML_NAME, BIN_NAME), FORMAT)
#: Regular expressions over the graph's node names of the layers kept out of static int8: each
#: layer's second feed-forward product, whose input is the GELU's (chosen on the tune part:
#: 3 word edits against CTranslate2 int8's on 444 words, 10 with every layer in static int8).
KEPT_FLOAT: tuple[str, ...] = (r".*ffn/linear_1",)

log = logging.getLogger("byoa_skills.runtimes")
#: The one line that says the build has begun: a command that shows only warnings (such as
#: ``transcribe``) shows this logger's too, so that half a minute of quiet is explained.
BUILD_LOGGER = "byoa_skills.runtimes.int8"
BUILD_LOG = logging.getLogger(BUILD_LOGGER)


class Int8Unavailable(RuntimeError):
    """The int8 encoder cannot be had here (no private cache folder, or NNCF missing)."""


def quantize_encoder(model: Any, windows: Sequence[Any], kept_float: Sequence[str] = ()) -> Any:
    """``model`` (an ``openvino.Model`` of the float encoder) quantized to int8 by NNCF with
    ``windows`` (feature batches [1, mel bins, frames]) as calibration data, the nodes whose
    names match a pattern of ``kept_float`` left in float."""
    import nncf

    nncf.set_log_level(logging.WARNING)  # not a line per node kept float
    ignored = nncf.IgnoredScope(patterns=list(kept_float), validate=False) if kept_float else None
    quantized = nncf.quantize(
        model,
        nncf.Dataset(list(windows)),
        model_type=nncf.ModelType.TRANSFORMER,
        preset=nncf.QuantizationPreset.MIXED,
        subset_size=len(windows),
        ignored_scope=ignored,
    )
    weights_to_int8(quantized, kept_float)
    return quantized


def weights_to_int8(model: Any, patterns: Sequence[str]) -> int:
    """Store the weights of ``model``'s matrix products whose names match one of ``patterns``
    as int8 (symmetric, one scale per output row, as CTranslate2 stores its own), in place, so
    that OpenVINO's CPU plugin can quantize their inputs at run time. Where NNCF's SmoothQuant
    put a scale on such a product's input, the scale goes back into the weights and the input
    is read unscaled: per-position run-time scales need no smoothing, and the weights are then
    the model's own. Returns how many products changed."""
    import re

    import numpy as np
    import openvino.opset13 as op

    ov = import_openvino()
    matches = [re.compile(p) for p in patterns]
    changed = 0
    for node in model.get_ordered_ops():
        if node.get_type_name() != "MatMul":
            continue
        if not any(m.fullmatch(node.get_friendly_name()) for m in matches):
            continue
        weight = _constant_under(node.input_value(1).get_node())
        if weight is None or not node.get_attributes().get("transpose_b"):
            continue  # the encoder's products all read their weights as [outputs, inputs]
        values = np.array(weight.get_data(), dtype=np.float32)
        source = node.input_value(0).get_node()
        if source.get_type_name() == "Multiply" and "smooth_quant" in source.get_friendly_name():
            smoothing = [_constant_under(i.get_node()) for i in source.input_values()]
            scale_node = next((c for c in smoothing if c is not None), None)
            if scale_node is not None:
                scale = np.array(scale_node.get_data(), dtype=np.float32).reshape(1, -1)
                values = values * scale
                unscaled = next(
                    i for i, c in zip(source.input_values(), smoothing, strict=True) if c is None
                )
                node.input(0).replace_source_output(unscaled)
        peak = np.abs(values).max(axis=1, keepdims=True)
        row_scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        rows = np.clip(np.rint(values / row_scale), -127, 127).astype(np.int8)
        widened = op.multiply(op.convert(op.constant(rows), ov.Type.f32), op.constant(row_scale))
        node.input(1).replace_source_output(widened.output(0))
        changed += 1
    return changed


def _constant_under(node: Any) -> Any:
    """``node`` if it is a constant, the constant it converts if it converts one, else None."""
    if node.get_type_name() == "Convert":
        node = node.input_value(0).get_node()
    return node if node.get_type_name() == "Constant" else None


def recipe(kept_float: Sequence[str]) -> str:
    """What the int8 model is made from besides ``model.bin``, as one string: the calibration
    set's SHA-256, the kept-float patterns, NNCF's and OpenVINO's versions."""
    from importlib.metadata import version

    from byoa_skills.runtimes.speech.calibration import calibration_sha256

    facts = {
        "calibration_sha256": calibration_sha256(),
        "kept_float": list(kept_float),
        "nncf": version("nncf"),
        "openvino": version("openvino"),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def cached_int8_model(
    model_dir: str | os.PathLike[str],
    rebuild: bool = False,
    kept_float: Sequence[str] | None = None,
) -> EncoderModel:
    """The int8 encoder model of the CTranslate2 model in ``model_dir``, from a verified cache,
    or quantized now (and cached); ``rebuild`` quantizes it even where the cache verifies;
    ``kept_float`` (default :data:`KEPT_FLOAT`) names the layers left in float.
    Raises :class:`Int8Unavailable` where the cache folder cannot be used or NNCF is not
    installed, ``FileNotFoundError`` without ``model.bin``."""
    source = Path(model_dir) / "model.bin"
    if not source.is_file():
        raise FileNotFoundError(f"no model.bin in {Path(model_dir)}")
    if kept_float is None:
        kept_float = KEPT_FLOAT
    try:
        made = recipe(kept_float)
    except ImportError as error:  # importlib's PackageNotFoundError is one
        raise Int8Unavailable(f"NNCF is not installed: {error}") from error
    source_sha256 = model_sha256(source)
    try:
        with ARTEFACT.building(source_sha256) as folder:
            if not rebuild and ARTEFACT.problem(folder, source_sha256, made) is None:
                return EncoderModel(folder / XML_NAME, None, built=False)
            float_model = cached_encoder_model(model_dir)
            if float_model.path is None:
                raise Int8Unavailable("the float encoder has no cache folder")
            _write_cache(folder, float_model.path, source_sha256, made, kept_float)
            return EncoderModel(folder / XML_NAME, None, built=True)
    except OSError as error:
        raise Int8Unavailable(f"no private cache folder for the int8 encoder: {error}") from error


def _write_cache(
    folder: Path, float_xml: Path, source_sha256: str, made: str, kept_float: Sequence[str]
) -> None:
    ov = import_openvino()

    began = time.monotonic()
    with tempfile.TemporaryDirectory(dir=folder, prefix=".int8-build-") as scratch:
        xml = Path(scratch) / XML_NAME
        windows = _quantize_in_child(float_xml, xml, kept_float)
        files = {name: (Path(scratch) / name).read_bytes() for name in (XML_NAME, BIN_NAME)}
    ARTEFACT.write(
        folder,
        source_sha256,
        files,
        recipe=made,
        calibration_windows=windows,
        kept_float=list(kept_float),
        openvino=ov.__version__,
        seconds=round(time.monotonic() - began, 1),
    )


def _quantize_in_child(float_xml: Path, xml: Path, kept_float: Sequence[str]) -> int:
    """Quantize in a process of its own (``python -m`` this module; a pool worker is a daemon
    process, which may not start multiprocessing children), waited on here: a signal to this
    process (Ctrl-C, a stop) ends the wait at once and the child with it, whatever NNCF does
    with signals, and NNCF's memory goes with the child. The calibration windows used."""
    import subprocess

    error = xml.with_suffix(".error")
    command = [sys.executable, "-m", __name__, str(float_xml), str(xml), str(os.getpid())]
    BUILD_LOG.info(
        "event=int8-encoder-building folder=%s: quantizing the encoder for this CPU, once "
        "(about half a minute)",
        xml.parent.parent,
    )
    # its output is NNCF's progress bars and notes: the line above says what runs, and a
    # failure comes back in ``.error``
    child = subprocess.Popen(
        [*command, *kept_float], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        code = child.wait()
    except BaseException:
        child.kill()
        child.wait()
        raise
    if code != 0:
        said = error.read_text(errors="replace") if error.exists() else f"exit {code}"
        raise RuntimeError(f"quantizing the encoder failed: {said}")
    return int(xml.with_suffix(".windows").read_text())


def _quantize_files(float_xml: str, xml: str, kept_float: Sequence[str], parent: int) -> int:
    """The child's work: read the float model, quantize it, save it as ``xml`` (and its
    ``.bin``), the windows' count beside it; on failure the reason in ``.error`` and 1 (the
    exit status). It ends by itself when its parent does."""
    import threading

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch_parent, daemon=True).start()
    out = Path(xml)
    try:
        ov = import_openvino()

        from byoa_skills.runtimes.speech.calibration import calibration_windows

        model = ov.Core().read_model(float_xml)
        n_mels = model.input(0).get_partial_shape()[1].get_length()
        windows = calibration_windows(n_mels)
        quantized = quantize_encoder(model, windows, kept_float)
        ov.save_model(quantized, xml, compress_to_fp16=False)
        out.with_suffix(".windows").write_text(str(len(windows)))
    except Exception as error:
        out.with_suffix(".error").write_text(f"{type(error).__name__}: {error}"[:500])
        return 1
    return 0


if __name__ == "__main__":  # the child of _quantize_in_child: FLOAT_XML XML PARENT KEPT...
    sys.exit(_quantize_files(sys.argv[1], sys.argv[2], sys.argv[4:], int(sys.argv[3])))
