"""The one exception the model functions raise, and the codes it may carry."""

from __future__ import annotations

from byoa_skills.protocol.refusal import Refusal

#: Every code a :class:`ModelError` can carry, with what it means. Stable: callers match on them.
CODES: dict[str, str] = {
    "unknown-model": "the catalog has no model of that name",
    "unsupported-language": "the model cannot transcribe that language",
    "model-missing": "the model is not in the cache and no source of it is available",
    "model-corrupt": "the cached model's files do not have the catalog's sizes or checksums",
    "source-corrupt": "a source's files do not have the catalog's sizes or checksums",
    "download-unavailable": "a hub download was asked for but huggingface_hub is not installed",
    "download-failed": "the hub download did not complete",
    "cache-unwritable": "the cache folder cannot be created or written",
}


class ModelError(Refusal):
    """A model that cannot be served: a stable kebab-case ``code``, the ``model`` name (when one
    was given) and a one-line ``message`` that says what to do about it."""

    def __init__(self, code: str, message: str, *, model: str | None = None) -> None:
        if code not in CODES:
            raise AssertionError(f"unknown model error code {code!r}")
        super().__init__(code, message)
        self.model = model
