"""Grants and every limit and refusal of the shim, through the real local API and pool."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from typing import Any

import aiohttp
import pytest
from engine import TOKEN, Engine, call_ws
from grants import GEO_MANIFEST, grant, in_seconds, manifest
from speech import skill_input

from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore

JFK = skill_input("jfk.wav")  # 11 s of speech
HELLO = skill_input("en-hello.wav")
ORIGIN = "https://geo.example.org"
_SITES = itertools.count(1)


async def api(engine: Engine, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, engine.url + path, json=body, headers=headers) as response,
    ):
        return response.status, await response.json()


def request(engine: Engine, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return asyncio.run(api(engine, method, path, body))


def post_grant(engine: Engine, origin: Any, manifest_doc: Any, grant_doc: Any) -> tuple[int, Any]:
    body = {"origin": origin, "manifest": manifest_doc, "grant": grant_doc}
    return request(engine, "POST", "/v1/grants", body)


def new_grant(
    engine: Engine, origin: str | None = None, manifest_doc: Any = None, **changes: Any
) -> str:
    """A grant of its own: a site holds one grant, so each grant here is for an origin of
    its own unless ``origin`` is given."""
    origin = origin or f"https://geo-{next(_SITES)}.example.org"
    status, answer = request(
        engine,
        "POST",
        "/v1/grants",
        {
            "origin": origin,
            "manifest": manifest_doc or GEO_MANIFEST,
            "grant": grant(**changes),
        },
    )
    assert status == 200, answer
    return answer["grantId"]


def call(
    engine: Engine, grant_id: str, skill: str, skill_input: Any, **params: Any
) -> tuple[int, Any]:
    body = {"grantId": grant_id, "input": skill_input, "params": params}
    return request(engine, "POST", f"/v1/skills/{skill}", body)


def messages(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


# -- taking grants ---------------------------------------------------------------------------


def test_a_grant_is_taken_and_released(engine: Engine) -> None:
    status, answer = request(
        engine,
        "POST",
        "/v1/grants",
        {
            "origin": "https://GEO.example.org:443",
            "manifest": GEO_MANIFEST,
            "grant": grant(limits={"maxParallelCalls": 3, "maxClipSeconds": 12}),
        },
    )
    assert status == 200
    assert answer["skills"] == ["audio.transcribe", "text.generate"]
    assert answer["limits"] == {  # in force: the stricter of manifest and grant
        "maxClipSeconds": 12,
        "maxCallsPerMinute": 40,
        "maxParallelCalls": 3,
        "maxCallSeconds": 120,
    }
    grant_id = answer["grantId"]
    assert call(engine, grant_id, "audio.transcribe", HELLO, language="en")[0] == 200
    assert request(engine, "DELETE", f"/v1/grants/{grant_id}") == (200, {"ok": True})
    status, answer = call(engine, grant_id, "audio.transcribe", HELLO)
    assert (status, answer["code"]) == (404, "unknown-grant")
    assert request(engine, "DELETE", f"/v1/grants/{grant_id}")[0] == 404


def test_the_default_parallel_limit_is_the_wallets_eight(engine: Engine) -> None:
    status, answer = request(engine, "GET", f"/v1/grants/{new_grant(engine)}")
    assert status == 200 and answer["limits"]["maxParallelCalls"] == 8


BAD_GRANTS = [
    # (manifest, grant, code, a path the refusal names)
    ({"byoa": "0.1-draft"}, grant(), "manifest-invalid", "/purpose"),
    (GEO_MANIFEST, grant(colour="blue"), "grant-invalid", "/colour"),
    (GEO_MANIFEST, grant(budget={"perSession": "lots"}), "grant-invalid", "/budget/perSession"),
    (
        GEO_MANIFEST,
        grant(limits={"maxParallelCalls": 0}),
        "limit-invalid",
        "/limits/maxParallelCalls",
    ),
    (manifest(maxCallSeconds=-1), grant(), "limit-invalid", "/purpose/limits/maxCallSeconds"),
    (GEO_MANIFEST, grant(models={"x1": "some/model"}), "grant-invalid", "/models/x1"),
    (GEO_MANIFEST, grant(skills=["audio.speak"]), "skill-not-declared", "/skills/0"),
    (GEO_MANIFEST, grant(expiresAt="2020-01-01T00:00:00Z"), "grant-expired", "/expiresAt"),
]


@pytest.mark.parametrize(
    ("manifest_doc", "grant_doc", "code", "path"),
    BAD_GRANTS,
    ids=[f"{c}-{i}" for i, (_, _, c, _) in enumerate(BAD_GRANTS)],
)
def test_bad_grants_are_refused_with_codes_and_paths(
    engine: Engine, manifest_doc: Any, grant_doc: Any, code: str, path: str
) -> None:
    status, answer = post_grant(engine, ORIGIN, manifest_doc, grant_doc)
    assert (status, answer["ok"], answer["code"]) == (400, False, code)
    assert path in [error["path"] for error in answer["errors"]]


def test_a_bad_origin_is_refused(engine: Engine) -> None:
    status, answer = post_grant(engine, "geo.example.org/x", GEO_MANIFEST, grant())
    assert (status, answer["code"]) == (400, "origin-invalid")


# -- every limit, on calls -------------------------------------------------------------------


def test_an_expired_grant(engine: Engine) -> None:
    grant_id = new_grant(engine, expiresAt=in_seconds(1.0))
    time.sleep(1.2)  # let the grant expire
    status, answer = call(engine, grant_id, "audio.transcribe", HELLO)
    assert (status, answer["code"], answer["decision"]) == (403, "grant-expired", "blocked")


def test_a_skill_not_granted_or_not_declared(engine: Engine) -> None:
    only_audio = new_grant(engine, skills=["audio.transcribe"])
    status, answer = call(engine, only_audio, "text.generate", messages("Hi"))
    assert (status, answer["code"]) == (403, "skill-not-granted")
    audio_manifest = json.loads(json.dumps(GEO_MANIFEST))
    del audio_manifest["skills"]["text.generate"]
    audio_site = new_grant(engine, manifest_doc=audio_manifest, skills=["audio.transcribe"])
    status, answer = call(engine, audio_site, "text.generate", messages("Hi"))
    assert answer["code"] == "skill-not-declared"
    assert {"skill-not-declared", "skill-not-granted"} <= {r["code"] for r in answer["reasons"]}


def test_the_clip_is_measured_not_taken_from_the_call(engine: Engine) -> None:
    grant_id = new_grant(engine, limits={"maxClipSeconds": 5})
    claims_short = {**JFK, "clipSeconds": 1}
    status, answer = call(engine, grant_id, "audio.transcribe", claims_short, clipSeconds=1)
    assert (status, answer["code"]) == (403, "clip-too-long")
    assert "11 seconds" in answer["message"]
    assert call(engine, grant_id, "audio.transcribe", HELLO, language="en")[0] == 200


def test_text_too_long_counts_code_points(engine: Engine) -> None:
    grant_id = new_grant(engine, limits={"maxTextChars": 10})
    status, answer = call(engine, grant_id, "text.generate", messages("ёжик" * 3))  # 12
    assert (status, answer["code"]) == (403, "text-too-long")
    status, answer = call(engine, grant_id, "text.generate", messages("ёжик" * 2))  # 8
    assert answer["code"] == "model-required"  # it passed the gate; no model is named


def test_the_rate_limit(engine: Engine) -> None:
    grant_id = new_grant(engine, limits={"maxCallsPerMinute": 2})
    codes = [
        call(engine, grant_id, "audio.transcribe", HELLO, language="en")[1].get("code")
        for _ in range(3)
    ]
    assert codes == [None, None, "rate-exceeded"]


def test_a_paused_or_blocked_site_gets_nothing(engine: Engine) -> None:
    origin = "https://paused.example.org"
    grant_id = new_grant(engine, origin=origin)
    sites = SiteStore(WalletDatabase(engine.home / "data" / "wallet.sqlite3"))
    sites.pause(origin)
    status, answer = call(engine, grant_id, "audio.transcribe", HELLO)
    assert (status, answer["code"]) == (403, "site-paused")
    sites.block(origin)
    status, answer = post_grant(engine, origin, GEO_MANIFEST, grant())
    assert (status, answer["code"]) == (403, "site-blocked")
    sites.resume(origin)
    assert call(engine, grant_id, "audio.transcribe", HELLO, language="en")[0] == 200


def test_max_call_seconds_is_the_deadline(engine: Engine) -> None:
    grant_id = new_grant(engine, limits={"maxCallSeconds": 0.2})
    status, answer = call(engine, grant_id, "audio.transcribe", JFK, language="en")
    assert (status, answer["code"]) == (504, "deadline-exceeded")


def test_models_and_answer_tokens(engine: Engine) -> None:
    grant_id = new_grant(engine, models={"m1": "llama-3.2-3b"}, limits={"maxAnswerTokens": 50})
    assert call(engine, grant_id, "text.generate", messages("Hi"), model="m2")[1]["code"] == (
        "model-not-granted"
    )
    assert call(engine, grant_id, "text.generate", messages("Hi"))[1]["code"] == "model-not-granted"
    answer = call(engine, grant_id, "text.generate", messages("Hi"), model="m1", maxTokens=51)[1]
    assert answer["code"] == "answer-tokens-exceeded"
    answer = call(engine, grant_id, "text.generate", messages("Hi"), model="m1", maxTokens=50)[1]
    assert answer["code"] == "unknown-source"  # the code's model was used: no such source


def test_parallel_calls_beyond_the_limit_are_refused_at_once(engine: Engine) -> None:
    grant_id = new_grant(engine, limits={"maxParallelCalls": 3, "maxCallsPerMinute": 100})
    frames = [
        {
            "type": "call",
            "id": index,
            "grantId": grant_id,
            "skill": "audio.transcribe",
            "input": JFK,
            "params": {"language": "en"},
        }
        for index in range(50)
    ]
    answers = asyncio.run(call_ws(engine, frames, expect=50))
    codes = [answer.get("code") for answer in answers]
    assert codes.count(None) >= 3
    assert codes.count(None) + codes.count("too-many-parallel-calls") == 50
    status, state = request(engine, "GET", f"/v1/grants/{grant_id}")
    assert status == 200
    assert state["record"]["peakInFlight"] == 3
    assert state["record"]["inFlight"] == 0


def test_every_call_leaves_an_activity_entry_without_audio_or_text(engine: Engine) -> None:
    grant_id = new_grant(engine, origin="https://logged.example.org")
    call(engine, grant_id, "audio.transcribe", HELLO, language="en")
    call(engine, grant_id, "text.generate", messages("a secret sentence"))

    def of_grant(rows: list[str]) -> list[dict[str, Any]]:
        return [e for e in map(json.loads, rows) if e.get("grant") == grant_id]

    rows = engine.activity_once(lambda rows: len(of_grant(rows)) >= 3)
    lines = "\n".join(rows)
    mine = of_grant(rows)
    assert [(e["kind"], e["outcome"]) for e in mine] == [
        ("grant", "ok"),
        ("call", "ok"),
        ("call", "model-required"),
    ]
    assert mine[1]["clipSeconds"] == pytest.approx(1.052, abs=0.01)
    assert mine[2]["textChars"] == len("a secret sentence")
    assert "secret" not in lines and "UklGR" not in lines and "Hello" not in lines


def test_a_warning_runs_and_is_logged(engine: Engine) -> None:
    grant_id = new_grant(engine, warnIf={"sendsText": True})
    _, answer = call(engine, grant_id, "text.generate", messages("Hi"))
    assert answer["code"] == "model-required"  # it passed the gate, with a warning
    assert f"event=gate-warn grant={grant_id} codes=text-sent" in engine.log.read_text()


def test_the_activity_and_sites_commands_read_what_the_engine_wrote(engine: Engine) -> None:
    origin = "https://cli.example.org"
    grant_id = new_grant(engine, origin=origin)
    call(engine, grant_id, "audio.transcribe", HELLO, language="en")
    env = {**os.environ, "BYOA_SKILLS_HOME": str(engine.home), "BYOA_SKILLS_TOKEN": TOKEN}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "byoa_skills", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    shown = cli("activity", "--origin", origin, "--json")
    assert shown.returncode == 0, shown.stderr
    entries = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(e["kind"], e["outcome"]) for e in entries] == [("grant", "ok"), ("call", "ok")]
    assert cli("sites", "block", origin).returncode == 0
    listed = json.loads(cli("sites", "list", "--json").stdout)
    assert {"origin": origin, "state": "blocked"}.items() <= next(
        site for site in listed if site["origin"] == origin
    ).items()
    # the command found the running engine (its record) and told it: the grant ended
    status, answer = call(engine, grant_id, "audio.transcribe", HELLO)
    assert (status, answer["code"]) == (404, "unknown-grant")
