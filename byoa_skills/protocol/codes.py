"""The one table of HTTP statuses: every refusal code whose status on the local API is not
400, for every route and door (``/v1/skills``, ``/v1/grants``, ``/v1/links``, the OpenAI
routes, the guard). A code named nowhere is bad input, 400; a refusal the visitor's grant
decided is 403 unless its code is here (:func:`byoa_skills.skills.registry.http_status`).
"""

from __future__ import annotations

#: HTTP status of a refusal, by code: one status per code, on every route.
HTTP_STATUS: dict[str, int] = {
    # the local API's guard and routes
    "unauthorized": 401,
    "forbidden-host": 403,
    "forbidden-origin": 403,
    "not-found": 404,
    "method-not-allowed": 405,
    "message-too-large": 413,
    # the engine
    "unknown-skill": 404,
    "unknown-model": 404,
    "shutting-down": 503,
    "skill-unavailable": 503,
    "deadline-exceeded": 504,
    # the Whisper pool
    "not-ready": 503,
    "queue-full": 503,
    "worker-crashed": 500,
    "transcribe-failed": 500,
    # the text sources
    "source-down": 503,
    "upstream-refused": 502,
    "upstream-failed": 502,
    "upstream-malformed": 502,
    "upstream-error": 502,
    "model-mismatch": 502,
    # a recording on the OpenAI routes
    "file-too-large": 413,
    "audio-too-long": 413,
    "uploads-full": 503,
    # a grant, a site and a paired platform's registration
    "unknown-grant": 404,
    "too-many-parallel-calls": 429,
    "rate-exceeded": 429,
    "site-paused": 403,
    "site-blocked": 403,
    "site-unreadable": 403,
    "not-registered": 404,
    "outside-registration-scope": 403,
    # the wallet's store cannot be used: what the visitor's own page is answered
    "store-unsafe": 503,
    "store-damaged": 503,
    "store-too-new": 503,
    "store-read-only": 503,
    "store-full": 503,
    "store-unreadable": 503,
}
#: The codes only the local API's routes answer (a request, never a call): no activity entry
#: records them.
ROUTE_CODES: frozenset[str] = frozenset({"not-found", "method-not-allowed"})
#: The status of a refusal the visitor's grant decided (the gate's decision blocked or ask),
#: and of a refused link, when its code has no status of its own.
GATE_STATUS = 403
#: The status of any other refusal: bad input.
BAD_INPUT_STATUS = 400


def status_of(code: str, otherwise: int = BAD_INPUT_STATUS) -> int:
    """The HTTP status of the refusal ``code``: its own from :data:`HTTP_STATUS`, else
    ``otherwise`` (bad input, 400, unless the caller's rule says another)."""
    return HTTP_STATUS.get(code, otherwise)
