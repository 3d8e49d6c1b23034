"""Speech models: the catalog, where each model's files come from, and the verified per-user
cache a runtime loads them from.

A runtime calls :func:`ensure_model` for the folder of a ready model and
:func:`require_language` to refuse a language the model cannot do. Every failure is a
:class:`ModelError` with a stable ``code``. Only the standard library is imported here.
"""

from __future__ import annotations

from byoa_skills.models.cache import (
    MANIFEST_NAME,
    MODELS_ENV,
    CacheStatus,
    PullResult,
    cache_status,
    ensure_model,
    leftovers,
    model_path,
    models_dir,
    pull_model,
    verify_model,
)
from byoa_skills.models.catalog import (
    CATALOG,
    DEFAULT_MODEL,
    WHISPER_LANGUAGES,
    HubRepo,
    ModelFile,
    ModelSpec,
    PackageBundle,
    PackagePiece,
    get_model,
    list_models,
    model_languages,
    require_language,
    supports_language,
)
from byoa_skills.models.errors import CODES, ModelError
from byoa_skills.models.progress import PHASES, Progress, ProgressFn
from byoa_skills.models.sources import MODEL_DIRS_ENV, Source, available_sources, find_sources

__all__ = [
    "CATALOG",
    "CODES",
    "DEFAULT_MODEL",
    "MANIFEST_NAME",
    "MODELS_ENV",
    "MODEL_DIRS_ENV",
    "PHASES",
    "WHISPER_LANGUAGES",
    "CacheStatus",
    "HubRepo",
    "ModelError",
    "ModelFile",
    "ModelSpec",
    "PackageBundle",
    "PackagePiece",
    "Progress",
    "ProgressFn",
    "PullResult",
    "Source",
    "available_sources",
    "cache_status",
    "ensure_model",
    "find_sources",
    "get_model",
    "leftovers",
    "list_models",
    "model_languages",
    "model_path",
    "models_dir",
    "pull_model",
    "require_language",
    "supports_language",
    "verify_model",
]
