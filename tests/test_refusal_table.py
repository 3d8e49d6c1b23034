"""One refusal type and one table of HTTP statuses: every code the engine can give has one
status, whichever route or door answers it, and every refusal the engine raises is a
:class:`~byoa_skills.protocol.refusal.Refusal`."""

from __future__ import annotations

import asyncio
import base64
import inspect
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import bringyourownagent.gate
import pytest
from aiohttp import web

import byoa_skills
from byoa_skills.byoag import errors as byoag_errors
from byoa_skills.directlink import addresses, check
from byoa_skills.extension import framing
from byoa_skills.extension import requests as extension_requests
from byoa_skills.models import errors as model_errors
from byoa_skills.pool import PoolConfig, WorkerPool
from byoa_skills.pool import errors as pool_errors
from byoa_skills.protocol import codes, frames
from byoa_skills.protocol.refusal import Refusal
from byoa_skills.recordings import errors as recording_errors
from byoa_skills.recordings import service as recording_service
from byoa_skills.runtimes.speech import errors as speech_errors
from byoa_skills.runtimes.text import errors as text_errors
from byoa_skills.serve import openai_api
from byoa_skills.serve.app import build_app
from byoa_skills.serve.metrics import EngineMetrics
from byoa_skills.serve.openai_api import shape as openai_shape
from byoa_skills.skills import CallResult, SkillEngine, http_status
from byoa_skills.store import errors as store_errors
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.problems import STORE_CODES
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim import grants
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wav import errors as wav_errors

TOKEN = "t" * 43
GATE_SOURCE = inspect.getsource(bringyourownagent.gate)
JFK = Path(__file__).parent / "data" / "speech" / "jfk.wav"
#: The modules that hold the engine's refusal types.
ERROR_MODULES = (
    wav_errors,
    pool_errors,
    recording_errors,
    store_errors,
    byoag_errors,
    model_errors,
    text_errors,
    speech_errors,
    grants,
    extension_requests,
    framing,
    addresses,
    check,
    frames,
    openai_api,
    openai_shape,
    recording_service,
)
#: Every refusal type, by name: the classes of those modules that carry a code.
REFUSAL_TYPES = {
    f"{module.__name__}.{name}": kind
    for module in ERROR_MODULES
    for name, kind in vars(module).items()
    if isinstance(kind, type)
    and issubclass(kind, Exception)
    and kind.__module__ == module.__name__
    and (
        "code" in vars(kind)
        or "self.code = " in inspect.getsource(kind)
        or issubclass(kind, Refusal)
    )
}
#: Refusal codes that the engine gives as a string, not as one of its lists.
SPOKEN_CODES = {
    "unknown-skill",
    "skill-unavailable",
    "bad-params",
    "not-ready",
    "shutting-down",
    "unauthorized",
    "forbidden-host",
    "forbidden-origin",
    "not-found",
    "method-not-allowed",
    "bad-request",
    "missing-file",
    "unknown-grant",
    "not-registered",
    "outside-registration-scope",
    "too-many-parallel-calls",
    "site-paused",
    "site-blocked",
    "site-unreadable",
    "too-many-links",
}


def every_code() -> dict[str, set[str]]:
    """Every code the engine can give, by where it is listed."""
    return {
        "wav": set(wav_errors.CODES),
        "text": set(text_errors.CODES),
        "speech": set(speech_errors.CODES),
        "models": set(model_errors.CODES),
        "recordings": set(recording_errors.CODES),
        "store": set(STORE_CODES),
        "frames": set(frames.CODES),
        "pool": {
            kind.code
            for kind in vars(pool_errors).values()
            if isinstance(kind, type) and issubclass(kind, pool_errors.CallFailure)
        },
        "table": set(codes.HTTP_STATUS),
        "spoken": SPOKEN_CODES,
        "gate": set(re.findall(r'(?:add|_reason)\(\s*"([a-z0-9-]+)"', GATE_SOURCE)),
    }


def all_codes() -> list[str]:
    return sorted(set().union(*every_code().values()))


def test_the_table_lists_only_codes_the_engine_gives() -> None:
    listed = set().union(*(found for where, found in every_code().items() if where != "table"))
    assert set(codes.HTTP_STATUS) - listed == set()
    assert set(codes.HTTP_STATUS) >= codes.ROUTE_CODES


def test_the_engine_writes_no_status_beside_the_table() -> None:
    """No module keeps its own status table, and no skill declares statuses."""
    for path in (Path(byoa_skills.__file__).parent).rglob("*.py"):
        text = path.read_text()
        assert "STATUS.get(" not in text or path.name == "codes.py", path
        assert "statuses: ClassVar" not in text, path
    assert not hasattr(openai_api, "STATUS")


@pytest.mark.parametrize("code", all_codes())
def test_each_code_has_one_status_on_every_route(code: str) -> None:
    status = codes.status_of(code)
    on_skills = http_status(CallResult.refused(code, "refused"))
    on_audio = openai_api.refused(code, "refused").status
    assert (on_skills, on_audio) == (status, status), code
    assert status == 400 or code in codes.HTTP_STATUS
    assert Refusal(code, "refused").status == status


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("not-ready", 503),
        ("queue-full", 503),
        ("unknown-model", 404),
        ("worker-crashed", 500),
        ("source-down", 503),
        ("file-too-large", 413),
        ("deadline-exceeded", 504),
        ("site-unreadable", 403),
        ("not-mono", 400),
    ],
)
def test_the_codes_that_drifted_have_one_status(code: str, status: int) -> None:
    assert http_status(CallResult.refused(code, "refused")) == status
    assert openai_api.refused(code, "refused").status == status


def test_a_grant_refusal_keeps_403_unless_its_code_has_its_own() -> None:
    blocked = replace(CallResult.refused("text-too-long", "over the limit"), decision="blocked")
    assert http_status(blocked) == codes.GATE_STATUS
    asked = replace(CallResult.refused("rate-exceeded", "too many calls"), decision="ask")
    assert http_status(asked) == 429
    assert http_status(CallResult.refused("text-too-long", "over 100,000")) == 400


@pytest.mark.parametrize("name", sorted(REFUSAL_TYPES))
def test_every_refusal_type_is_a_refusal(name: str) -> None:
    assert issubclass(REFUSAL_TYPES[name], Refusal), name


def test_the_refusals_keep_their_words() -> None:
    """The shared base changed no refusal's text, code or other fields."""
    queue = pool_errors.QueueFull("64 calls are already waiting")
    assert (str(queue), queue.code, queue.message, queue.status) == (
        "64 calls are already waiting",
        "queue-full",
        "64 calls are already waiting",
        503,
    )
    refused = pool_errors.TranscribeFailed("no such language", code="unsupported-language")
    assert (refused.code, refused.status) == ("unsupported-language", 400)
    store = store_errors.StoreError("the disk is read-only", "store-read-only")
    assert (str(store), store.code, store.message) == (
        "the disk is read-only",
        "store-read-only",
        "the disk is read-only",
    )
    assert store_errors.StoreError("gone").code == "store-unreadable"
    wav = wav_errors.WavError("not-mono", "2 channels, not 1")
    assert str(wav) == "not-mono: 2 channels, not 1" and isinstance(wav, ValueError)
    grant = grants.GrantRefusal("site-blocked", "blocked", [{"code": "x"}])
    assert (str(grant), grant.errors, grant.status) == (
        "site-blocked: blocked",
        [{"code": "x"}],
        403,
    )
    address = addresses.AddressRefused("10.0.0.1 is private", unresolved=True)
    assert (str(address), address.code, address.unresolved) == (
        "10.0.0.1 is private",
        "endpoint-private-address",
        True,
    )
    page = extension_requests.Refused("no-click", ["x"])
    assert (str(page), page.code, page.details) == ("no-click", "no-click", ["x"])
    model = model_errors.ModelError("unknown-model", "no such model", model="m")
    assert (str(model), model.model, model.status) == ("unknown-model: no such model", "m", 404)
    assert check.check_link("x").code == "not-a-link"


# The same code through both doors, on a real pool whose workers are still loading


async def both_routes(shim: WalletShim) -> tuple[tuple[int, Any], tuple[int, Any], int]:
    runner = web.AppRunner(build_app(shim.engine, EngineMetrics(), TOKEN, shim))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    clip = {"audio": {"mime": "audio/wav", "base64": base64.b64encode(JFK.read_bytes()).decode()}}
    form = aiohttp.FormData()
    form.add_field("model", "whisper-1")
    form.add_field("file", JFK.read_bytes(), filename="jfk.wav", content_type="audio/wav")
    try:
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.post(f"{base}/v1/skills/audio.transcribe", json={"input": clip}) as r:
                skills = (r.status, await r.json())
            async with http.post(f"{base}/v1/audio/transcriptions", data=form) as r:
                audio = (r.status, await r.json())
            async with http.get(f"{base}/ready") as r:
                ready = r.status
    finally:
        await runner.cleanup()
    return skills, audio, ready


def test_not_ready_is_503_on_v1_skills_and_on_v1_audio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path))

    async def main() -> tuple[tuple[int, Any], tuple[int, Any], int]:
        pool = WorkerPool(PoolConfig(model_dir=tmp_path / "models", model_name="tiny.en"))
        shim = WalletShim(SkillEngine(pool), SiteStore(), ActivityLog())
        return await both_routes(shim)  # the pool was never started: still loading

    (skills_status, skills), (audio_status, audio), ready = asyncio.run(main())
    assert skills["code"] == "not-ready" and audio["error"]["code"] == "not-ready"
    assert (skills_status, audio_status, ready) == (503, 503, 503)
    assert audio["error"]["type"] == "server_error"
