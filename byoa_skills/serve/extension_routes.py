"""The extension's routes on the local API, for the native host (the API token):

- ``POST /v1/extension/request`` ``{origin, manifest, userActivation}`` → ``{grant}``, the
  grant ``{grantId, skills, expiresAt}`` or null;
- ``POST /v1/extension/call`` ``{origin, grantId, skill, input, params}`` → ``{ok: true,
  output}`` or ``{ok: false}``;
- ``POST /v1/extension/release`` ``{origin, grantId}`` → ``{ok}``.

The answers carry exactly what the page is given: no code and no reason, so nothing on the
way (host, extension) can tell a page why.
"""

from __future__ import annotations

from aiohttp import web

from byoa_skills.extension.requests import PageRequests
from byoa_skills.serve.bodies import json_body

PREFIX = "/v1/extension/"
REQUESTS_KEY = web.AppKey("page_requests", PageRequests)


def add_routes(app: web.Application, requests: PageRequests) -> None:
    """Add the three routes to the local API's application."""
    app[REQUESTS_KEY] = requests
    app.router.add_post(PREFIX + "request", _request)
    app.router.add_post(PREFIX + "call", _call)
    app.router.add_post(PREFIX + "release", _release)


async def _request(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    grant = await request.app[REQUESTS_KEY].request(
        body.get("origin"), body.get("manifest"), body.get("userActivation")
    )
    return web.json_response({"grant": grant})


async def _call(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    answer = await request.app[REQUESTS_KEY].call(
        body.get("origin"),
        body.get("grantId"),
        body.get("skill"),
        body.get("input"),
        body.get("params"),
    )
    return web.json_response(answer)


async def _release(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    released = request.app[REQUESTS_KEY].release(body.get("origin"), body.get("grantId"))
    return web.json_response({"ok": released})
