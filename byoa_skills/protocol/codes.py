"""The refusal codes every skill shares, with their HTTP status on the local API.

A skill's own runtime codes (a text source down, a worker that crashed) are declared by the
skill (:attr:`byoa_skills.skills.base.Skill.statuses`); a code named nowhere is bad input, 400.
"""

from __future__ import annotations

#: HTTP status of a refused call, by code, for the codes of the engine, the grant and a
#: paired platform's registration.
HTTP_STATUS: dict[str, int] = {
    "unknown-skill": 404,
    "shutting-down": 503,
    "skill-unavailable": 503,
    "deadline-exceeded": 504,
    "unknown-grant": 404,
    "too-many-parallel-calls": 429,
    "rate-exceeded": 429,
    "site-paused": 403,
    "site-blocked": 403,
    "site-unreadable": 403,
    "not-registered": 404,
    "outside-registration-scope": 403,
}
#: The status of a refusal the visitor's grant decided (the gate's decision blocked or ask).
GATE_STATUS = 403
#: The status of any other refusal: bad input.
BAD_INPUT_STATUS = 400
