"""The local API described in OpenAPI 3.1, served at ``GET /openapi.json`` (no token, like
``/health``) and kept in ``docs/openapi.json``.

Each group of routes is one function that returns its ``paths`` entries; :func:`description`
joins them. A new route gets its entry in the function of its group (or a new function added
to :data:`PATH_GROUPS`); ``tests/test_openapi_fuzz.py`` checks the live engine against what is
written here, and that ``docs/openapi.json`` is this description.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from byoa_skills import __version__
from byoa_skills.store.problems import STORE_CODES

Schema = dict[str, Any]

#: Every refusal of the local API: ``{"ok": false, "code", "message"}`` and, from the gate, the
#: decision and its reasons.
REFUSAL: Schema = {
    "type": "object",
    "required": ["ok", "code", "message"],
    "properties": {
        "ok": {"const": False},
        "code": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
        "message": {"type": "string"},
        "decision": {"enum": ["allowed", "warn", "ask", "blocked"]},
        "reasons": {"type": "array", "items": {"type": "object"}},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
}
#: A call's answer: the skill's output and receipt, or a refusal (the local API shows why).
CALL_RESULT: Schema = {
    "oneOf": [
        {
            "type": "object",
            "required": ["ok", "output", "receipt"],
            "properties": {
                "ok": {"const": True},
                "output": {"type": "object"},
                "receipt": {"type": "object"},
            },
        },
        {"$ref": "#/components/schemas/Refusal"},
    ]
}
GRANT_SUMMARY: Schema = {
    "type": "object",
    "required": ["ok", "grantId", "skills", "expiresAt", "limits"],
    "properties": {
        "ok": {"const": True},
        "grantId": {"type": "string"},
        "skills": {"type": "array", "items": {"type": "string"}},
        "expiresAt": {"type": "string"},
        "limits": {"type": "object"},
        "models": {"type": "array", "items": {"type": "string"}},
        "record": {"type": "object"},
    },
}
LINK_ANSWER: Schema = {
    "type": "object",
    "required": ["ok"],
    "properties": {
        "ok": {"type": "boolean"},
        "state": {"enum": ["connected", "connecting"]},
        "code": {"type": "string"},
        "message": {"type": "string"},
        "origin": {"type": ["string", "null"]},
        "grantId": {"type": "string"},
    },
}
OK: Schema = {"type": "object", "required": ["ok"], "properties": {"ok": {"const": True}}}
HEALTH: Schema = {
    "type": "object",
    "required": ["ok", "status", "store"],
    "properties": {
        "ok": {"const": True},
        "status": {"enum": ["ok", "degraded"]},
        "store": {
            "type": "object",
            "required": ["ok", "pendingChanges"],
            "properties": {
                "ok": {"type": "boolean"},
                "code": {"enum": sorted(STORE_CODES)},
                "message": {"type": "string"},
                "pendingChanges": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "pauses and blocks in force, not yet written",
                },
            },
        },
        "encoder": {
            "type": "string",
            "examples": ["ctranslate2-int8", "openvino-bf16", "openvino-int8"],
            "description": "what runs the speech workers' encoder and in which "
            "precision (absent when the engine runs no speech model)",
        },
        "encoderPrecision": {
            "type": "string",
            "examples": ["int8", "bf16", "int8, float layers bf16"],
            "description": "the encoder's precision in words; for OpenVINO int8, the "
            "precision of the layers kept float too",
        },
        "ct2Kernels": {
            "type": "string",
            "examples": ["ctranslate2", "mkl-avx2", "mkl-avx512", "onednn-avx2"],
            "description": "the CTranslate2 CPU kernels the speech workers decode with: "
            "ctranslate2 for its own pick, else the set measured faster on this machine with "
            "the same words (docs/runtime.md); absent off the CPU",
        },
        "vad": {
            "type": "string",
            "enum": ["openvino", "onnxruntime"],
            "description": "what runs the speech workers' VAD: OpenVINO where their encoder "
            "does, else onnxruntime (docs/runtime.md); absent when they run none",
        },
        "encoderNote": {
            "type": "string",
            "description": "why the workers run another encoder than the one chosen (the "
            "OpenVINO encoder did not load)",
        },
        "pid": {
            "type": "integer",
            "description": "the engine's process id, which its "
            "record in the home it serves names (docs/api.md)",
        },
    },
}

_SKILL_CALL_BODY: Schema = {
    "type": "object",
    "properties": {
        "input": {},
        "params": {"type": "object"},
        "grantId": {"type": "string"},
        "registration": {"type": "string"},
        "deadlineSeconds": {"type": "number"},
    },
}


def _json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _refused(description: str) -> Schema:
    return _json({"$ref": "#/components/schemas/Refusal"}, description)


def _body(schema: Schema) -> Schema:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


#: The answers every route guarded by the token may give besides its own.
_GUARDED = {
    "401": _refused("no valid bearer token"),
    "403": _refused("a Host that is not loopback, or a request from a web page (Origin)"),
}
#: The answers of a route that reads a JSON body.
_BODY_REFUSALS = {
    "400": _refused("the body is not a JSON object (`not-json`, `bad-request`)"),
    "413": _refused("the body is over 4 MB (`message-too-large`)"),
}
_SECURED = [{"bearer": []}]


def health_paths() -> dict[str, Schema]:
    """``/health``, ``/ready``, ``/metrics`` and this description."""
    return {
        "/health": {
            "get": {
                "summary": "The engine answers, and whether the wallet's store works",
                "description": "Always 200 while the engine runs. `status` is `degraded` while "
                "the wallet's store cannot be used (then every site is refused `site-unreadable`; "
                "the visitor's own calls work) or a pause or block waits to be written; `store` "
                "says why, with one of the codes of docs/activity-and-sites.md.",
                "security": [],
                "responses": {"200": _json(HEALTH, "always")},
            }
        },
        "/ready": {
            "get": {
                "summary": "Whether calls are taken (at least one worker is warm)",
                "security": [],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["ready", "workers", "warm"],
                            "properties": {
                                "ready": {"const": True},
                                "workers": {
                                    "type": "array",
                                    "items": {"type": "integer"},
                                    "description": "live workers' process ids",
                                },
                                "warm": {
                                    "type": "integer",
                                    "minimum": 0,
                                    "description": "workers warm now",
                                },
                            },
                        },
                        "ready",
                    ),
                    "503": _json(
                        {
                            "type": "object",
                            "required": ["ready"],
                            "properties": {"ready": {"const": False}},
                        },
                        "still warming",
                    ),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus text exposition",
                "security": _SECURED,
                "responses": {
                    "200": {
                        "description": "the metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_GUARDED,
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This description",
                "security": [],
                "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1")},
            }
        },
    }


def call_paths() -> dict[str, Schema]:
    """``POST /v1/skills/{skill}`` and the WebSocket ``/v1/ws``."""
    return {
        "/v1/skills/{skill}": {
            "post": {
                "summary": "Call one skill: under a grant (`grantId`), for a paired platform "
                "(`registration`), or the wallet's own call",
                "security": _SECURED,
                "parameters": [
                    {"name": "skill", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "requestBody": _body(_SKILL_CALL_BODY),
                "responses": {
                    "200": _json({"$ref": "#/components/schemas/CallResult"}, "answered"),
                    "400": _refused("bad input or params, or a body that is not a JSON object"),
                    "403": _refused("refused by the gate, the site's state, or the Host/Origin"),
                    "401": _refused("no valid bearer token"),
                    "404": _refused("unknown skill, grant or registration"),
                    "409": _refused("the call cannot run now"),
                    "413": _refused("the body or the clip is too large"),
                    "429": _refused("too many calls at once, or over the rate"),
                    "502": _refused("the text source failed"),
                    "503": _refused("the engine is not ready or its queue is full"),
                    "504": _refused("the call passed its deadline"),
                },
            }
        },
        "/v1/ws": {
            "get": {
                "summary": "WebSocket: `call` frames answered with `result` (and `chunk`) frames; "
                "at most 64 calls pending per connection, one more is answered "
                "`too-many-pending-calls`; a client that does not read is closed (1008)",
                "security": _SECURED,
                "responses": {
                    "101": {"description": "switched to the WebSocket protocol"},
                    "400": {"description": "not a WebSocket handshake"},
                    **_GUARDED,
                },
            }
        },
    }


def grant_paths() -> dict[str, Schema]:
    """Grants and links: what the visitor allowed a site."""
    grant_id = [{"name": "grant_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    unknown = {"404": _refused("no live grant has this id (`unknown-grant`)")}
    return {
        "/v1/grants": {
            "post": {
                "summary": "Take a grant the visitor gave a site",
                "security": _SECURED,
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {
                            "origin": {"type": "string"},
                            "manifest": {"type": "object"},
                            "grant": {"type": "object"},
                        },
                    }
                ),
                "responses": {
                    "200": _json({"$ref": "#/components/schemas/GrantSummary"}, "taken"),
                    "400": _refused("the manifest or the grant breaks the rules"),
                    "403": _refused("the site is paused, blocked or unreadable; Host or Origin"),
                    "401": _refused("no valid bearer token"),
                    "413": _BODY_REFUSALS["413"],
                },
            }
        },
        "/v1/grants/{grant_id}": {
            "get": {
                "summary": "A live grant and its running record",
                "security": _SECURED,
                "parameters": grant_id,
                "responses": {
                    "200": _json({"$ref": "#/components/schemas/GrantSummary"}, "the grant"),
                    **unknown,
                    **_GUARDED,
                },
            },
            "delete": {
                "summary": "Release a grant (calls already running finish)",
                "security": _SECURED,
                "parameters": grant_id,
                "responses": {"200": _json(OK, "released"), **unknown, **_GUARDED},
            },
        },
        "/v1/sites/change": {
            "post": {
                "summary": 'Pause, resume, block or forget a site, or set its "decide on my own" '
                "(docs/consent.md): in force at once, told to the site, written",
                "security": _SECURED,
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["action", "origin"],
                        "properties": {
                            "action": {
                                "type": "string",
                                "enum": ["pause", "resume", "block", "forget", "decide-on-my-own"],
                            },
                            "origin": {"type": "string"},
                            "setting": {"type": "boolean"},
                        },
                    }
                ),
                "responses": {
                    "200": _json({"type": "object", "required": ["ok", "changed"]}, "done"),
                    "400": _refused("not an action or not an origin"),
                    "401": _refused("no valid bearer token"),
                    "403": _refused("Host or Origin"),
                },
            }
        },
        "/v1/sites/limits": {
            "post": {
                "summary": "Make every live grant of a site stricter (docs/models-block.md)",
                "security": _SECURED,
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {
                            "origin": {"type": "string"},
                            "choices": {
                                "type": "object",
                                "properties": {
                                    "limits": {"type": "object"},
                                    "budget": {"type": "string"},
                                    "expiresInMinutes": {"type": "number"},
                                    "models": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        },
                    }
                ),
                "responses": {
                    "200": _json({"type": "object", "required": ["ok", "grants"]}, "changed"),
                    "400": _refused("wider than the site's, or not valid (`limit-wider`, ...)"),
                    "404": _refused("the site holds no live grant (`no-live-grant`)"),
                    "401": _refused("no valid bearer token"),
                    "403": _refused("Host or Origin"),
                    "413": _BODY_REFUSALS["413"],
                },
            }
        },
        "/v1/links": {
            "post": {
                "summary": "Take a bringyourownagent:// link the visitor decided on",
                "security": _SECURED,
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {
                            "link": {"type": "string"},
                            "decision": {"enum": ["allow", "decide-on-my-own", "decline", "ask"]},
                        },
                    }
                ),
                "responses": {
                    "200": _json(LINK_ANSWER, "connected or connecting"),
                    "403": _json(LINK_ANSWER, "refused (the code says why), or Host/Origin"),
                    "401": _refused("no valid bearer token"),
                    **_BODY_REFUSALS,
                },
            }
        },
    }


#: An error in OpenAI's shape, as the OpenAI-compatible routes answer it.
OPENAI_ERROR: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"type": ["string", "null"]},
                "param": {},
            },
        }
    },
}


def _openai_refused(description: str) -> Schema:
    return _json(OPENAI_ERROR, description)


def openai_paths() -> dict[str, Schema]:
    """The OpenAI-compatible transcription API for the visitor's own tools (docs/openai.md)."""
    form = {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "model"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "model": {"type": "string"},
                        "language": {"type": "string"},
                        "prompt": {"type": "string"},
                        "response_format": {"enum": ["json", "text", "verbose_json", "srt", "vtt"]},
                        "temperature": {"type": "number"},
                        "stream": {"type": "boolean"},
                        "timestamp_granularities[]": {
                            "type": "array",
                            "items": {"enum": ["segment", "word"]},
                        },
                    },
                }
            }
        },
    }
    answers = {
        "200": {
            "description": "the text, in the asked format (or an event stream)",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/plain": {"schema": {"type": "string"}},
                "text/event-stream": {"schema": {"type": "string"}},
            },
        },
        "400": _openai_refused("a bad form or a file no decoder reads"),
        "401": _openai_refused("no valid API key (the engine's token)"),
        "403": _openai_refused("a Host that is not loopback, or a request from a web page"),
        "404": _openai_refused("an unknown model"),
        "413": _openai_refused("a file over the size limit (`file-too-large`)"),
        "422": _openai_refused("a recording over the duration limit (`audio-too-long`)"),
        "500": _openai_refused("the model failed on this file"),
        "503": _openai_refused("no speech model is ready"),
        "504": _openai_refused("the deadline passed"),
    }
    operation = {"security": _SECURED, "requestBody": form, "responses": answers}
    return {
        "/v1/audio/transcriptions": {"post": {"summary": "Speech to text", **operation}},
        "/v1/audio/translations": {"post": {"summary": "Speech to English text", **operation}},
        "/v1/models": {
            "get": {
                "summary": "The speech models, and the text sources' models",
                "security": _SECURED,
                "responses": {
                    "200": _json({"type": "object", "required": ["object", "data"]}, "the list"),
                    "401": _openai_refused("no valid API key"),
                    "403": _openai_refused("Host or Origin"),
                },
            }
        },
    }


def extension_paths() -> dict[str, Schema]:
    """What the browser extension's native host relays (docs/extension.md). The answers hold
    only what a page is given: a grant or null, ``ok`` and an output, never a reason."""
    grant_or_null = {
        "type": "object",
        "required": ["grant"],
        "properties": {"grant": {"type": ["object", "null"]}},
    }
    page_answer = {
        "type": "object",
        "required": ["ok"],
        "properties": {"ok": {"type": "boolean"}, "output": {"type": "object"}},
    }

    def route(summary: str, answer: Schema) -> Schema:
        return {
            "post": {
                "summary": summary,
                "security": _SECURED,
                "requestBody": _body({"type": "object"}),
                "responses": {
                    "200": _json(answer, "the page's answer"),
                    **_BODY_REFUSALS,
                    **_GUARDED,
                },
            }
        }

    return {
        "/v1/extension/request": route("A page's request for a grant", grant_or_null),
        "/v1/extension/call": route("A page's call under its grant", page_answer),
        "/v1/extension/release": route("A page releases its grant", page_answer),
    }


def wallet_paths() -> dict[str, Schema]:
    """The wallet page (docs/wallet.md): a ticket with the token, then the page's own routes,
    which take only the page's origin and its session cookie."""
    page_only = {
        "401": _refused("no session (`no-session`)"),
        "403": _refused("not the page's own origin, or a change without it"),
    }
    cookie = [{"walletSession": []}]
    #: A route that reads or writes the wallet's store answers its code when it cannot.
    store_down = {"503": _refused("the wallet's store cannot be used (`store-damaged`...)")}

    def read(summary: str, extra: dict[str, Schema] | None = None) -> Schema:
        return {
            "get": {
                "summary": summary,
                "security": cookie,
                "responses": {
                    "200": _json({"type": "object"}, "the view"),
                    **page_only,
                    **(extra or {}),
                },
            }
        }

    def change(summary: str, extra: dict[str, Schema] | None = None) -> Schema:
        return {
            "post": {
                "summary": summary,
                "security": cookie,
                "requestBody": _body({"type": "object"}),
                "responses": {
                    "200": _json(OK, "done"),
                    **page_only,
                    **_BODY_REFUSALS,
                    **(extra or {}),
                },
            }
        }

    def named(name: str) -> list[Schema]:
        return [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}]

    paths = {
        "/v1/wallet/tickets": {
            "post": {
                "summary": "A one-time ticket and the page's address",
                "security": _SECURED,
                "responses": {
                    "200": _json(
                        {"type": "object", "required": ["ok", "url"]},
                        "the address, with the ticket in its fragment",
                    ),
                    **_GUARDED,
                },
            }
        },
        "/wallet/": {
            "get": {
                "summary": "The wallet page",
                "security": [],
                "responses": {"200": {"description": "the page (HTML)"}},
            }
        },
        "/wallet/api/session": change(
            "Trade a ticket for the session cookie",
            {"403": _refused("a used, expired or forged ticket (`bad-ticket`), or the origin")},
        ),
        "/wallet/api/logout": change("End the session"),
        "/wallet/api/consents": read("The consents waiting"),
        "/wallet/api/consents/{consent_id}": change(
            "Answer a consent", {"404": _refused("answered or timed out (`no-such-consent`)")}
        ),
        "/wallet/api/sites": {
            **read("The sites, their grants and use", store_down),
            **change("Pause, resume, block, forget; decide on my own", store_down),
        },
        "/wallet/api/grants/{grant_id}/release": change(
            "Release a grant", {"404": _refused("no live grant has this id")}
        ),
        "/wallet/api/grants/{grant_id}/change": change(
            "Make a live grant stricter: limits, budget, end, models kept; the site is told",
            {"404": _refused("no live grant has this id (`unknown-grant`)")},
        ),
        "/wallet/api/activity": read("The activity log, newest first, filtered", store_down),
        "/wallet/api/engine": read("The engine: models, workers, text sources, memory"),
        "/wallet/api/judge": {
            **read("The purpose judge: default, model, whether its source answers", store_down),
            **change("Set the purpose judge's default (on, model, mismatch)", store_down),
        },
        "/wallet/api/pairings": read("The BYOAg pairings"),
        "/wallet/api/pairings/{platform}/revoke": change(
            "Revoke a pairing", {"404": _refused("not paired (`not-paired`)")}
        ),
        "/wallet/api/live": {
            "get": {
                "summary": "The page's live feed (WebSocket)",
                "security": cookie,
                "responses": {"101": {"description": "switching"}, **page_only},
            }
        },
    }
    paths["/wallet/api/consents/{consent_id}"]["post"]["parameters"] = named("consent_id")
    paths["/wallet/api/grants/{grant_id}/release"]["post"]["parameters"] = named("grant_id")
    paths["/wallet/api/grants/{grant_id}/change"]["post"]["parameters"] = named("grant_id")
    paths["/wallet/api/pairings/{platform}/revoke"]["post"]["parameters"] = named("platform")
    return paths


#: The functions whose ``paths`` entries make the description, in order.
PATH_GROUPS: list[Callable[[], dict[str, Schema]]] = [
    health_paths,
    call_paths,
    grant_paths,
    openai_paths,
    extension_paths,
    wallet_paths,
]


def description() -> Schema:
    """The OpenAPI 3.1 document of the local API as this engine serves it."""
    paths: dict[str, Schema] = {}
    for group in PATH_GROUPS:
        paths.update(group())
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "byoa-skills local API",
            "version": __version__,
            "description": "The engine's API on loopback. Every route but /health, /ready and "
            "/openapi.json needs `Authorization: Bearer TOKEN`; only loopback Host names are "
            "served and a request with an Origin is refused. A refusal is "
            '`{"ok": false, "code", "message"}` with a stable kebab-case code.',
        },
        "servers": [{"url": "http://127.0.0.1:8787"}],
        "security": _SECURED,
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "walletSession": {"type": "apiKey", "in": "cookie", "name": "byoa_wallet"},
            },
            "schemas": {
                "Refusal": REFUSAL,
                "CallResult": CALL_RESULT,
                "GrantSummary": GRANT_SUMMARY,
            },
        },
    }


def description_text() -> str:
    """The description as ``docs/openapi.json`` holds it (indented, sorted, one newline)."""
    return json.dumps(description(), indent=2, sort_keys=True) + "\n"


async def openapi_handler(request: web.Request) -> web.Response:
    """``GET /openapi.json``."""
    return web.Response(text=description_text(), content_type="application/json")
