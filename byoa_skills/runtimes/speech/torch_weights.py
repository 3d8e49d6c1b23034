"""Whisper's transformers state dict, made from a CTranslate2 model folder and cached beside it.

CTranslate2's converter (``WhisperLoader`` in python/ctranslate2/converters/transformers.py)
renames transformers' ``WhisperForConditionalGeneration`` weights, fuses some and drops one;
:func:`hf_state_dict` undoes exactly that:

- self-attention q, k, v are one ``linear_0`` (rows q, then k, then v), cross-attention k, v
  one ``linear_1``; transformers' ``k_proj`` has no bias, so the converter wrote zeros there,
  which are checked and dropped;
- layer norms are ``gamma``/``beta`` (``weight``/``bias``), position embeddings
  ``position_encodings/encodings``, linear layers ``linear_N``, the feed-forward ``ffn``;
- ``proj_out`` is tied to the decoder's token embedding (an alias in ``model.bin``).

The result keeps the stored dtype (float16 for the catalog's models): widening to float32 is
exact and happens when a backend builds its model. It is cached as ``torch-model.safetensors``
with ``torch-model.json`` in this installation's own cache folder
(:mod:`byoa_skills.runtimes.speech.derived`), which records the SHA-256 of the ``model.bin`` it
came from and of itself: a cache whose source changed, or whose bytes differ from the record,
is rebuilt, never used. Only numpy and the standard library are imported at module level;
safetensors when the cache is read or written.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from byoa_skills.runtimes.speech.ct2_weights import read_ct2_model
from byoa_skills.runtimes.speech.derived import DerivedArtefact, model_sha256

#: The cached state dict and its record.
CACHE_NAME = "torch-model.safetensors"
RECORD_NAME = "torch-model.json"
#: Bumped whenever the conversion changes, so that older caches are rebuilt.
FORMAT = 2
ARTEFACT = DerivedArtefact("torch-model", (CACHE_NAME,), FORMAT)
#: Parameters transformers ties to another one; stored once.
TIED = {"proj_out.weight": "model.decoder.embed_tokens.weight"}
#: CTranslate2's ``Activation.GELU``, the only activation a Whisper spec has.
_GELU = 3

log = logging.getLogger("byoa_skills.runtimes")


class ConversionError(ValueError):
    """``model.bin`` is not a float CTranslate2 Whisper model this conversion understands."""


@dataclass(frozen=True)
class WhisperWeights:
    """A converted model: transformers' parameter names → arrays (the tied ``proj_out.weight``
    included), the attention heads the shapes cannot tell, and whether it was converted now
    (``False``: read from a verified cache)."""

    state: dict[str, np.ndarray]
    encoder_heads: int
    decoder_heads: int
    converted: bool


def load_whisper_weights(model_dir: str | os.PathLike[str]) -> WhisperWeights:
    """The converted weights of the CTranslate2 model in ``model_dir``.

    A cache that matches ``model.bin`` and its own record is read; otherwise ``model.bin`` is
    converted and the cache (re)written atomically under a lock, so that processes starting
    together convert once. A folder that cannot be written is converted in memory each time.
    Raises ``FileNotFoundError`` without ``model.bin``, :class:`ConversionError` (or the
    reader's ``Ct2FormatError``) for a model that cannot be converted.
    """
    source = Path(model_dir) / "model.bin"
    if not source.is_file():
        raise FileNotFoundError(f"no model.bin in {Path(model_dir)}")
    source_sha256 = model_sha256(source)
    try:
        with ARTEFACT.building(source_sha256) as folder:
            return _cached_or_converted(folder, source, source_sha256)
    except OSError as error:  # no folder of our own to keep it in: converted in memory
        log.warning("event=torch-cache-unwritable reason=%r", str(error))
        return convert_model_bin(source)


def cache_folder(model_dir: str | os.PathLike[str]) -> Path:
    """Where the cache of the model in ``model_dir`` lives (made private now)."""
    return ARTEFACT.folder(model_sha256(Path(model_dir) / "model.bin"))


def convert_model_bin(path: str | os.PathLike[str]) -> WhisperWeights:
    """Convert the ``model.bin`` at ``path`` without touching any cache."""
    model = read_ct2_model(path)
    if model.spec != "WhisperSpec":
        raise ConversionError(f"model.bin holds a {model.spec or 'unnamed'} model, not Whisper")
    variables = model.resolved()
    _check_spec_constants(variables)
    return WhisperWeights(
        state=hf_state_dict(variables),
        encoder_heads=int(variables["encoder/num_heads"]),
        decoder_heads=int(variables["decoder/num_heads"]),
        converted=True,
    )


def hf_state_dict(variables: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers' ``WhisperForConditionalGeneration`` parameters from CTranslate2's Whisper
    variables (aliases resolved), each a writable copy in the stored dtype.

    Every weight of ``variables`` is used exactly once; a weight left over, a fused bias whose
    ``k`` part is not zero, or quantized (integer) weights raise :class:`ConversionError`.
    """
    taken: set[str] = set()

    def take(name: str) -> np.ndarray:
        if name not in variables:
            raise ConversionError(f"model.bin has no variable {name!r}")
        value = variables[name]
        if value.dtype.kind != "f":
            raise ConversionError(
                f"{name} holds {value.dtype} weights (a quantized conversion); the torch "
                "backend needs a float16 or float32 model.bin"
            )
        taken.add(name)
        return value

    state: dict[str, np.ndarray] = {}
    for side in ("encoder", "decoder"):
        hf = f"model.{side}"
        if side == "encoder":
            for conv in ("conv1", "conv2"):
                state[f"{hf}.{conv}.weight"] = take(f"encoder/{conv}/weight")
                state[f"{hf}.{conv}.bias"] = take(f"encoder/{conv}/bias")
        else:
            state[f"{hf}.embed_tokens.weight"] = take("decoder/embeddings/weight")
        state[f"{hf}.embed_positions.weight"] = take(f"{side}/position_encodings/encodings")
        for i in range(_layer_count(variables, side)):
            ct2, layer = f"{side}/layer_{i}", f"{hf}.layers.{i}"
            _attention(state, take, f"{ct2}/self_attention", f"{layer}.self_attn", fused_q=True)
            _layer_norm(state, take, f"{ct2}/self_attention", f"{layer}.self_attn_layer_norm")
            if side == "decoder":
                _attention(state, take, f"{ct2}/attention", f"{layer}.encoder_attn", fused_q=False)
                _layer_norm(state, take, f"{ct2}/attention", f"{layer}.encoder_attn_layer_norm")
            _linear(state, take, f"{ct2}/ffn/linear_0", f"{layer}.fc1")
            _linear(state, take, f"{ct2}/ffn/linear_1", f"{layer}.fc2")
            _layer_norm(state, take, f"{ct2}/ffn", f"{layer}.final_layer_norm")
        _layer_norm(state, take, side, f"{hf}.layer_norm")
    projection = "decoder/projection/weight"
    if projection in variables and not np.array_equal(
        variables[projection], variables["decoder/embeddings/weight"]
    ):
        raise ConversionError("the output projection is not tied to the token embedding")
    taken.add(projection)
    left = sorted(n for n, v in variables.items() if n not in taken and v.ndim > 0)
    if left:
        raise ConversionError(f"model.bin has weights this conversion does not know: {left[:5]}")
    state = {name: np.array(value, copy=True) for name, value in state.items()}
    for tied, target in TIED.items():
        state[tied] = state[target]
    return state


def _cached_or_converted(folder: Path, source: Path, source_sha256: str) -> WhisperWeights:
    cached = _read_cache(folder, source_sha256)
    if cached is not None:
        return cached
    weights = convert_model_bin(source)
    _write_cache(folder, weights, source_sha256)
    return weights


def _read_cache(folder: Path, source_sha256: str) -> WhisperWeights | None:
    """The cached weights when the cache matches its record and ``model.bin``; else None, with
    the reason logged (none when there is simply no cache yet)."""
    from safetensors.numpy import load

    if ARTEFACT.problem(folder, source_sha256) is not None:
        return None
    try:
        data = (folder / CACHE_NAME).read_bytes()
        metadata = _safetensors_metadata(data)
        state = load(data)
        heads = int(metadata["encoder_heads"]), int(metadata["decoder_heads"])
    except (OSError, ValueError, KeyError, struct.error) as error:
        log.warning("event=derived-rebuilt name=torch-model reason=%r", f"unreadable: {error}")
        return None
    for tied, target in TIED.items():
        state[tied] = state[target]
    return WhisperWeights(state, heads[0], heads[1], converted=False)


def _write_cache(folder: Path, weights: WhisperWeights, source_sha256: str) -> None:
    from safetensors.numpy import save

    stored = {n: v for n, v in weights.state.items() if n not in TIED}
    metadata = {
        "format": str(FORMAT),
        "encoder_heads": str(weights.encoder_heads),
        "decoder_heads": str(weights.decoder_heads),
    }
    ARTEFACT.write(folder, source_sha256, {CACHE_NAME: save(stored, metadata=metadata)})


def _safetensors_metadata(data: bytes) -> dict[str, str]:
    # A safetensors file starts with the length of its JSON header (little-endian uint64).
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(bytes(data[8 : 8 + length]))
    return dict(header.get("__metadata__") or {})


def _check_spec_constants(variables: Mapping[str, np.ndarray]) -> None:
    """The spec's fixed choices that transformers' Whisper also makes; anything else would
    convert without error and then compute something else."""
    expected = {
        "decoder/activation": _GELU,
        "decoder/pre_norm": 1,
        "decoder/scale_embeddings": 0,
        "decoder/alibi": 0,
    }
    for name, value in expected.items():
        if name in variables and int(variables[name]) != value:
            raise ConversionError(f"{name} is {int(variables[name])}, Whisper's is {value}")
    for name in ("encoder/num_heads", "decoder/num_heads"):
        if name not in variables:
            raise ConversionError(f"model.bin has no {name}")


def _layer_count(variables: Mapping[str, np.ndarray], side: str) -> int:
    pattern = re.compile(rf"{side}/layer_(\d+)/")
    found = {int(m.group(1)) for name in variables if (m := pattern.match(name))}
    if found != set(range(len(found))):
        raise ConversionError(f"the {side} layers are not numbered 0 to {len(found) - 1}")
    return len(found)


def _attention(state, take, ct2: str, hf: str, *, fused_q: bool) -> None:  # type: ignore[no-untyped-def]
    """q, k, v and out projections. Self-attention: ``linear_0`` is q|k|v, ``linear_1`` the
    output. Cross-attention: ``linear_0`` q, ``linear_1`` k|v, ``linear_2`` the output."""
    if fused_q:
        names, fused, out = ("q", "k", "v"), f"{ct2}/linear_0", f"{ct2}/linear_1"
    else:
        _linear(state, take, f"{ct2}/linear_0", f"{hf}.q_proj")
        names, fused, out = ("k", "v"), f"{ct2}/linear_1", f"{ct2}/linear_2"
    weight, bias = take(f"{fused}/weight"), take(f"{fused}/bias")
    rows = weight.shape[0] // len(names)
    if weight.shape[0] != rows * len(names) or bias.shape != (weight.shape[0],):
        raise ConversionError(f"{fused} has shape {weight.shape}, not {len(names)} equal parts")
    for i, name in enumerate(names):
        part = slice(i * rows, (i + 1) * rows)
        state[f"{hf}.{name}_proj.weight"] = weight[part]
        if name == "k":
            if np.any(bias[part]):
                raise ConversionError(f"{fused}/bias is not zero where transformers has no bias")
        else:
            state[f"{hf}.{name}_proj.bias"] = bias[part]
    _linear(state, take, out, f"{hf}.out_proj")


def _linear(state, take, ct2: str, hf: str) -> None:  # type: ignore[no-untyped-def]
    state[f"{hf}.weight"] = take(f"{ct2}/weight")
    state[f"{hf}.bias"] = take(f"{ct2}/bias")


def _layer_norm(state, take, ct2: str, hf: str) -> None:  # type: ignore[no-untyped-def]
    state[f"{hf}.weight"] = take(f"{ct2}/layer_norm/gamma")
    state[f"{hf}.bias"] = take(f"{ct2}/layer_norm/beta")
