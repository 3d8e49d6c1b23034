"""The local API's OpenAPI description, and a schema-driven fuzz of the live engine with it:
every answer has a documented status and shape, and none is a 500."""

from __future__ import annotations

import json
from pathlib import Path

import schemathesis
from engine import TOKEN, Engine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from byoa_skills.consent.desk import ConsentDesk
from byoa_skills.directlink.intake import LinkIntake
from byoa_skills.extension.requests import PageRequests
from byoa_skills.serve.app import build_app
from byoa_skills.serve.metrics import EngineMetrics
from byoa_skills.serve.openapi import description, description_text
from byoa_skills.serve.wallet.routes import WalletPage
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim

DOCS = Path(__file__).resolve().parent.parent / "docs" / "openapi.json"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
#: Routes the fuzz leaves out: the WebSockets (their own tests speak them), a page's request
#: (a valid one waits up to 120 s for the visitor), and the wallet page's routes, which need a
#: browser's session (tests/test_wallet_page.py).
LEFT_OUT = {"/v1/ws", "/v1/extension/request", "/wallet/api/live"}


def test_docs_hold_the_served_description(engine: Engine) -> None:
    status, body = engine.get("/openapi.json", token=None)
    assert status == 200
    assert json.loads(body) == description()
    assert DOCS.read_text() == description_text(), (
        "run: python -c 'from byoa_skills.serve."
        'openapi import description_text; print(description_text(), end="")\' > docs/openapi.json'
    )


def test_every_route_of_the_engine_is_described(tmp_path: Path) -> None:
    """The application ``serve`` builds, route by route, against the description."""
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    engine = SkillEngine(None)
    shim = WalletShim(engine, SiteStore(database), ActivityLog(database))
    consents = ConsentDesk()
    intake = LinkIntake(shim, consents=consents)
    page = WalletPage(engine, shim, intake, consents)
    app = build_app(
        engine,
        EngineMetrics(),
        TOKEN,
        shim,
        intake,
        page=page,
        requests=PageRequests(shim, consents),
    )
    # the page's files are one route, /wallet/{name}; /wallet only redirects to /wallet/
    aliases = {"/wallet/{name}": "/wallet/", "/wallet": None}
    served: set[tuple[str, str]] = set()
    for route in app.router.routes():
        path = aliases.get(route.resource.canonical, route.resource.canonical)
        if path is not None and route.method != "HEAD":
            served.add((path, route.method.lower()))
    described = {
        (path, method)
        for path, operations in description()["paths"].items()
        for method in operations
    }
    assert served == described


def _schema() -> schemathesis.schemas.BaseSchema:
    document = description()
    document["paths"] = {k: v for k, v in document["paths"].items() if k not in LEFT_OUT}
    return schemathesis.openapi.from_dict(document)


SCHEMA = _schema()


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(data=st.data())
def test_fuzz_the_live_engine(engine: Engine, data: st.DataObject) -> None:
    case = data.draw(SCHEMA.as_strategy())
    case.call_and_validate(
        base_url=engine.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        checks=CHECKS,
        timeout=30,
    )


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_without_a_token(engine: Engine, data: st.DataObject) -> None:
    case = data.draw(SCHEMA.as_strategy())
    case.call_and_validate(base_url=engine.url, checks=CHECKS, timeout=30)
