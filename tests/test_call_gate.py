"""One road for every call: :meth:`SkillEngine.call` with a gate runs the skill's check, the
grant's terms, the gate, the run within the terms' seconds and the gate's finish, in that
order, and never runs a call the gate refused. The skills here are third ones, added the way
a newcomer adds one: a module (this file) and one line in the registry (``SKILLS``); what
they declare (what they run on, whether they fit a manifest, which measurement is audio) is
all the shim, the extension and the metrics go by."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from grants import GEO_MANIFEST, grant

from byoa_skills.consent.fit import fitting_skills
from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.serve.metrics import EngineMetrics
from byoa_skills.skills import (
    LOCAL_RECEIPT,
    SKILLS,
    Admitted,
    CallResult,
    GrantTerms,
    PreparedCall,
    Runtimes,
    Skill,
    SkillEngine,
)
from byoa_skills.skills.registry import judged, models_skills, uses_models
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.models_block import block_problems
from byoa_skills.wallet_shim.shim import WalletShim


class Echo(Skill):
    """``test.echo``: ``{text}`` back as it came; measures ``textChars``."""

    name: ClassVar[str] = "test.echo"

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.hold = asyncio.Event()
        self.holding = False

    def prepare(
        self, runtimes: Runtimes, skill_input: Any, params: dict[str, Any], deadline: float | None
    ) -> PreparedCall | CallResult:
        text = skill_input.get("text") if isinstance(skill_input, dict) else None
        if not isinstance(text, str):
            return CallResult.refused("bad-input", "input.text must be a string")
        self.events.append("prepare")
        return PreparedCall(
            self.name,
            params,
            deadline,
            measured={"textChars": len(text)},
            messages=[{"role": "user", "content": text}],
        )

    def under_grant(self, call: PreparedCall, terms: GrantTerms) -> PreparedCall:
        self.events.append(("under_grant", terms.max_answer_tokens))
        return replace(call, model=terms.models.get("m1"))

    async def run(
        self, runtimes: Runtimes, call: PreparedCall, on_chunk: ChunkHook | None
    ) -> CallResult:
        self.events.append(("run", call.deadline, call.model))
        if self.holding:
            await self.hold.wait()
        text = (call.messages or [{}])[0].get("content", "")
        return CallResult(ok=True, output={"text": text}, receipt=dict(LOCAL_RECEIPT))


class Gate:
    """A gate that records what the engine asks of it; ``refusal`` refuses every call."""

    def __init__(self, events: list[Any], terms: GrantTerms, refusal: CallResult | None = None):
        self.events = events
        self._terms = terms
        self.refusal = refusal

    @property
    def terms(self) -> GrantTerms:
        return self._terms

    async def admit(self, call: PreparedCall) -> Admitted | CallResult:
        self.events.append(("admit", call.model, dict(call.measured)))
        if self.refusal is not None:
            return self.refusal
        return Admitted("warn", [{"code": "spend-high", "decision": "warn", "message": "m"}])

    async def supervise(self, call: PreparedCall, run: Any, on_chunk: Any) -> CallResult:
        self.events.append(("supervise", call.skill))
        return await run(on_chunk)

    def finish(self, result: CallResult | None) -> None:
        self.events.append(("finish", None if result is None else result.ok))


TERMS = GrantTerms(max_call_seconds=30.0, max_answer_tokens=64, models={"m1": "local/echo"})


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the third skill and the gate saw, in order; the skill is in the registry."""
    seen: list[Any] = []
    monkeypatch.setitem(SKILLS, Echo.name, Echo(seen))
    return seen


def test_a_call_under_a_gate_takes_the_one_road_in_order(events: list[Any]) -> None:
    reported: list[tuple[str, str]] = []
    engine = SkillEngine(None, on_call=lambda skill, outcome, *_: reported.append((skill, outcome)))
    result = asyncio.run(
        engine.call("test.echo", {"text": "hello"}, {}, 60, gate=Gate(events, TERMS))
    )
    assert events == [
        "prepare",
        ("under_grant", 64),
        ("admit", "local/echo", {"textChars": 5}),
        ("supervise", "test.echo"),  # the gate runs the admitted call
        ("run", 30.0, "local/echo"),  # the terms' seconds bound the call's 60
        ("finish", True),
    ]
    assert result.ok and result.output == {"text": "hello"}
    assert result.decision == "warn" and [r["code"] for r in result.reasons or []] == ["spend-high"]
    assert result.measured == {"textChars": 5}
    assert reported == [("test.echo", "ok")]


def test_the_calls_own_shorter_deadline_is_kept(events: list[Any]) -> None:
    engine = SkillEngine(None)
    asyncio.run(engine.call("test.echo", {"text": "hi"}, {}, 2.5, gate=Gate(events, TERMS)))
    assert ("run", 2.5, "local/echo") in events


def test_a_call_the_gate_refuses_never_runs_and_keeps_its_measurements(
    events: list[Any],
) -> None:
    refusal = CallResult(
        ok=False,
        code="budget-exceeded",
        message="over",
        decision="blocked",
        reasons=[{"code": "budget-exceeded", "decision": "blocked", "message": "over"}],
    )
    engine = SkillEngine(None)
    result = asyncio.run(
        engine.call("test.echo", {"text": "hello"}, gate=Gate(events, TERMS, refusal))
    )
    assert result.code == "budget-exceeded" and result.decision == "blocked"
    assert result.measured == {"textChars": 5}
    assert not any(isinstance(e, tuple) and e[0] in ("run", "finish") for e in events), events


def test_a_bad_input_is_refused_before_the_gate_is_asked(events: list[Any]) -> None:
    engine = SkillEngine(None)
    result = asyncio.run(engine.call("test.echo", {"text": 5}, gate=Gate(events, TERMS)))
    assert result.code == "bad-input" and events == []


def test_a_call_cancelled_while_it_runs_tells_the_gate_it_was_cut_short(
    events: list[Any],
) -> None:
    SKILLS["test.echo"].holding = True  # type: ignore[attr-defined]
    engine = SkillEngine(None)

    async def main() -> None:
        running = asyncio.create_task(
            engine.call("test.echo", {"text": "hello"}, gate=Gate(events, TERMS))
        )
        while not any(isinstance(e, tuple) and e[0] == "run" for e in events):
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(main())
    assert events[-1] == ("finish", None)


class Listen(Echo):
    """``test.listen``: as ``test.echo``, but it carries audio (``listenSeconds``), runs on
    something that must be warm, and fits a manifest's entry only when it says ``ok``."""

    name: ClassVar[str] = "test.listen"
    audio_measure: ClassVar[str] = "listenSeconds"

    def prepare(
        self, runtimes: Runtimes, skill_input: Any, params: dict[str, Any], deadline: float | None
    ) -> PreparedCall | CallResult:
        prepared = super().prepare(runtimes, skill_input, params, deadline)
        if isinstance(prepared, CallResult):
            return prepared
        return replace(prepared, skill=self.name, measured={"listenSeconds": 2.5})

    async def fits(self, runtimes: Runtimes, entry: Any) -> bool:
        return isinstance(entry, dict) and entry.get("ok") is True

    async def warm_up(self, runtimes: Runtimes) -> None:
        self.events.append("warm_up")


@pytest.fixture
def listened(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What ``test.listen`` saw; it is in the registry."""
    seen: list[Any] = []
    monkeypatch.setitem(SKILLS, Listen.name, Listen(seen))
    return seen


def test_a_third_skill_is_warm_before_its_grant_is_answered(
    listened: list[Any], tmp_path: Path
) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    shim = WalletShim(SkillEngine(None), SiteStore(database), ActivityLog(database))
    manifest = copy.deepcopy(GEO_MANIFEST)
    manifest["skills"]["test.listen"] = {"required": False}
    summary = asyncio.run(
        shim.grant_when_warm("https://geo.example.org", manifest, grant(skills=["test.listen"]))
    )
    assert summary["skills"] == ["test.listen"] and listened == ["warm_up"]
    asyncio.run(
        shim.grant_when_warm("https://geo.example.org", manifest, grant(skills=["text.generate"]))
    )
    assert listened == ["warm_up"], "warmed for a grant without it"


def test_a_third_skill_says_itself_whether_it_fits_a_manifest(listened: list[Any]) -> None:
    engine = SkillEngine(None)
    fits = {"test.listen": {"ok": True}, "text.generate": {}, "no.such": {}}
    assert asyncio.run(fitting_skills(engine, {"skills": fits})) == {"test.listen"}
    unfit = {"test.listen": {"ok": False}}
    assert asyncio.run(fitting_skills(engine, {"skills": unfit})) == set()


def test_the_metrics_count_the_audio_a_third_skill_declares(listened: list[Any]) -> None:
    metrics = EngineMetrics()
    engine = SkillEngine(None, on_call=metrics.record_call)
    asyncio.run(engine.call("test.listen", {"text": "hello"}))
    asyncio.run(engine.call("text.generate", {}))  # refused; it carries no audio
    assert metrics.registry.get_sample_value("byoa_audio_seconds_total") == 2.5
    calls = metrics.registry.get_sample_value(
        "byoa_calls_total", {"skill": "test.listen", "outcome": "ok"}
    )
    assert calls == 1


def test_the_policy_asks_a_skill_what_it_declares_never_its_name(
    events: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a skill's calls run beside the purpose judge and whether its manifest entry
    may carry a ``models`` block are the skill's own declarations (``judged``,
    ``uses_models``), which the shim and consent read through the registry."""
    assert (judged("text.generate"), uses_models("text.generate")) == (True, True)
    assert (judged("audio.transcribe"), uses_models("audio.transcribe")) == (False, False)
    assert (judged("test.echo"), uses_models("test.echo"), judged("no.such")) == (False,) * 3
    block = {"skills": {"test.echo": {"required": True, "models": {"count": 1}}}}
    assert [p["code"] for p in block_problems(block)] == ["models-not-for-skill"]
    monkeypatch.setattr(Echo, "judged", True)
    monkeypatch.setattr(Echo, "uses_models", True)
    assert judged("test.echo") and uses_models("test.echo")
    assert "test.echo" in models_skills()
    assert "models-not-for-skill" not in [p["code"] for p in block_problems(block)]
