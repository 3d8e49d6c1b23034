"""Where the purpose judge runs, as the visitor decides: a default for every site (on or off,
the model that judges, what a mismatch gives) and a switch per site; the judge a call gets.

The model is the visitor's choice. Left to the wallet, it is a local one: the first model of
the first source that runs on this computer (``local-model``), never a paid one; a paid model
judges only when the visitor picks it, and its cost is the visitor's (recorded with the call's
activity entry, never counted against the site's budget) up to the visitor's spend per day
(``dailySpend``, USD; 0 until the visitor sets it, so a paid judge asks nothing and every
call gets ``ask`` with ``purpose-judge-spent``). A local source is not limited.

The judge fails closed: while it is on for a site and no source answers for its model (or
there is no model), the site's text calls get ``ask`` with ``purpose-judge-unavailable``,
never run unjudged; the wallet page says so.
"""

from __future__ import annotations

import logging
from decimal import Decimal, InvalidOperation
from typing import Any

from byoa_skills.judge import (
    DailySpend,
    JudgeSettings,
    OpinionCache,
    PurposeJudge,
    SiteSlots,
    UnavailableJudge,
    can_judge,
)
from byoa_skills.judge.recommended import RECOMMENDED
from byoa_skills.runtimes.text import TextFailure, TextRuntime, TextSource
from byoa_skills.store.judge_settings import JudgeSettingsStore
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal

log = logging.getLogger("byoa_skills.judge")

#: Whether the judge runs for a site the visitor set nothing for, before they set a default.
DEFAULT_ON = False
#: What a mismatch the judge's model sees gives, before the visitor sets it.
DEFAULT_MISMATCH = "blocked"
#: What a paid judge may spend per day (USD) before the visitor sets it: nothing.
DEFAULT_DAILY_SPEND = Decimal(0)
#: The largest daily spend the card accepts (USD).
MAX_DAILY_SPEND = Decimal(1000)
_MISMATCHES = ("blocked", "ask")
_FIELDS = {"on", "model", "mismatch", "dailySpend"}


class JudgeSwitch:
    """The visitor's settings for the judge, and the :class:`PurposeJudge` each call gets."""

    def __init__(self, store: JudgeSettingsStore, runtime: TextRuntime | None) -> None:
        self.store = store
        self.runtime = runtime
        self.cache = OpinionCache()
        self.slots = SiteSlots()
        self.spend = DailySpend(self.daily_spend, store)
        self._judges: dict[tuple[str, str, bool], PurposeJudge] = {}

    def default(self) -> dict[str, Any]:
        """``{on, model, mismatch, dailySpend}``: ``model`` None lets the wallet pick a local
        one; ``dailySpend`` a decimal string of USD."""
        kept = self.store.default()
        return {
            "on": kept.get("on", DEFAULT_ON) is True,
            "model": kept.get("model") if isinstance(kept.get("model"), str) else None,
            "mismatch": kept.get("mismatch")
            if kept.get("mismatch") in _MISMATCHES
            else DEFAULT_MISMATCH,
            "dailySpend": format(_spend(kept.get("dailySpend")) or DEFAULT_DAILY_SPEND, "f"),
        }

    def daily_spend(self) -> Decimal:
        """What a paid judge may spend per day, in USD."""
        return Decimal(self.default()["dailySpend"])

    def on_for(self, origin: str) -> bool:
        """Whether the judge runs for ``origin``'s calls (its switch, else the default)."""
        own = self.store.site(origin)
        return own == "on" if own is not None else bool(self.default()["on"])

    def set_default(self, body: Any) -> dict[str, Any]:
        """Set the default from ``{on?, model?, mismatch?, dailySpend?}`` (``model`` null: a
        local one the wallet picks; ``dailySpend`` USD per day, a decimal string or number
        from 0 to :data:`MAX_DAILY_SPEND`); the new default, or :class:`ChoiceRefusal`
        ``judge-invalid``."""
        if not isinstance(body, dict) or set(body) - _FIELDS:
            raise ChoiceRefusal([_problem("", "the setting is {on, model, mismatch, dailySpend}")])
        current = self.default()
        if "on" in body:
            if not isinstance(body["on"], bool):
                raise ChoiceRefusal([_problem("/on", "on must be true or false")])
            current["on"] = body["on"]
        if "model" in body:
            model = body["model"]
            if model is not None and not self._names_a_source(model):
                raise ChoiceRefusal([_problem("/model", "name a model as SOURCE/MODEL")])
            current["model"] = model
        if "mismatch" in body:
            if body["mismatch"] not in _MISMATCHES:
                raise ChoiceRefusal([_problem("/mismatch", "mismatch must be blocked or ask")])
            current["mismatch"] = body["mismatch"]
        if "dailySpend" in body:
            spend = _spend(body["dailySpend"])
            if spend is None:
                raise ChoiceRefusal(
                    [_problem("/dailySpend", "dailySpend is USD per day, 0 to 1000")]
                )
            current["dailySpend"] = format(spend, "f")
        self.store.set_default(current)
        return current

    def set_site(self, origin: str, setting: Any) -> None:
        """``origin``'s switch: ``on``, ``off``, or None (the default)."""
        if setting not in ("on", "off", None):
            raise ChoiceRefusal([_problem("/judge", "the switch is on, off or null")])
        self.store.set_site(origin, setting)

    async def model(self) -> str | None:
        """The model that judges: the visitor's, else the first local source's first model;
        None when there is none."""
        chosen = self.default()["model"]
        if chosen is not None or self.runtime is None:
            return chosen
        try:
            sources = list(self.runtime.config().sources.values())
        except TextFailure:
            return None
        for source in sources:
            if source.provider_kind != "local-model":
                continue
            try:
                models = await self.runtime.list_models(source)
            except TextFailure:
                continue
            if models:
                return f"{source.name}/{models[0].id}"
        return None

    async def judge_for(self, origin: str) -> PurposeJudge | None:
        """The judge of ``origin``'s next text call, or None when it is off for the site. On,
        with no model to judge with or a source that does not list it now, the judge fails
        closed: an :class:`UnavailableJudge` (every call ``ask``)."""
        if self.runtime is None or not self.on_for(origin):
            return None
        model = await self.model()
        mismatch = str(self.default()["mismatch"])
        if model is None or not await self._answers(model):
            log.info("event=judge-unavailable model=%s", model)
            settings = JudgeSettings(model=model or "", mismatch=mismatch)
            return UnavailableJudge(self.runtime, settings, self.cache, slots=self.slots)
        paid = self.paid(model)
        key = (model, mismatch, paid)
        if key not in self._judges:
            settings = JudgeSettings(
                model=model, mismatch=mismatch, system_role="gemma" not in model.lower()
            )
            self._judges[key] = PurposeJudge(
                self.runtime,
                settings,
                self.cache,
                spend=self.spend if paid else None,
                slots=self.slots,
            )
        return self._judges[key]

    async def status(self) -> dict[str, Any]:
        """What the wallet page shows: the default, the model that judges now and whether its
        source answers (each judged call asks when it does not), whether it is paid and its
        spend today, the model the measurements recommend with its figures, each site's own
        switch."""
        model = await self.model()
        up = model is not None and self.runtime is not None and await can_judge(self.runtime, model)
        paid = model is not None and self.paid(model)
        return {
            **self.default(),
            "judgingModel": model,
            "up": up,
            "paid": paid,
            "spentToday": format(self.spend.spent(), "f"),
            "recommended": RECOMMENDED.to_dict(),
            "sites": self.store.sites(),
        }

    async def _answers(self, model: str) -> bool:
        """Whether the judge's source lists its model (its list is kept for a while, so a
        call does not wait on a fresh one)."""
        assert self.runtime is not None
        try:
            source, model_id = self.runtime.resolve(model)
            listed = await self.runtime.list_models(source)
        except TextFailure:
            return False
        return any(info.id == model_id or info.id.split(":")[0] == model_id for info in listed)

    def paid(self, model: str | None) -> bool:
        """Whether a call to ``model`` (None: the default model) may cost money: an API-key
        source (OpenRouter), or one away from this computer that is sent a key. A source on
        this computer, or a home server sent no key, costs nothing and is not limited."""
        if self.runtime is None:
            return False
        try:
            source, _ = self.runtime.resolve(model)
        except TextFailure:
            return False
        return paid_source(source)

    def _names_a_source(self, model: Any) -> bool:
        if not isinstance(model, str) or "/" not in model or len(model) > 300:
            return False
        if self.runtime is None:
            return False
        try:
            self.runtime.resolve(model)
        except TextFailure:
            return False
        return True


def paid_source(source: TextSource) -> bool:
    """Whether a judge on ``source`` may cost money: an API-key source (OpenRouter), or one
    away from this computer that is sent a key; its judge counts against the daily spend."""
    kind = source.provider_kind
    return kind == "api-key" or (kind != "local-model" and source.api_key() is not None)


def _spend(value: Any) -> Decimal | None:
    """``value`` as a daily spend in USD (a decimal string or a number, 0 to
    :data:`MAX_DAILY_SPEND`), or None."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        spend = Decimal(str(value))
    except InvalidOperation:
        return None
    if not spend.is_finite() or not 0 <= spend <= MAX_DAILY_SPEND:
        return None
    return spend


def _problem(path: str, message: str) -> dict[str, str]:
    return {"code": "judge-invalid", "path": path, "message": message}
