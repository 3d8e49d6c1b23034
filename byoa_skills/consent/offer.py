"""What an Allow can give a site, the same for a link and a page's request: the skills this
engine can serve, the models on offer for ``text.generate``, the limits the visitor may set;
the consent's view of it, the check of the visitor's choices, and the grant they give.

Without a consent (nothing more than the site holds, or ``connect --decision allow``), the
grant takes what the visitor chose before for the site: the models ticked (or those of its
live grant), then the limits, budget and expiry kept. A kept tick no longer offered is never
replaced by others without a consent (:class:`ModelsNotTicked`); only a terminal's allow of a
site that never had a tick takes the fallback ticks of
:func:`~byoa_skills.wallet_shim.models_block.fallback_ticks` (and keeps them).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from byoa_skills.consent.allow import ALLOW_GRANT_SECONDS, allow_grant
from byoa_skills.consent.desk import ChoiceCheck
from byoa_skills.consent.model_offers import (
    default_model,
    models_on_offer,
    models_view,
    ticked_models,
)
from byoa_skills.consent.on_my_own import difference_view
from byoa_skills.consent.scope import More
from byoa_skills.skills.registry import uses_models
from byoa_skills.store.database import StoreError
from byoa_skills.store.visitor_choices import KeptChoices
from byoa_skills.wallet_shim.grants import GrantRefusal
from byoa_skills.wallet_shim.models_block import (
    ModelsBlock,
    OfferedModel,
    fallback_ticks,
    model_codes,
    read_block,
    tick_problems,
)
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import (
    ChoiceRefusal,
    VisitorChoices,
    ceilings,
    choice_problems,
    read_choices,
)

log = logging.getLogger("byoa_skills.consent")


@dataclass
class Offer:
    """What an Allow can give ``origin`` for ``manifest`` (the part it would be granted)."""

    origin: str
    manifest: dict[str, Any]
    skills: list[str]
    #: The ``text.generate`` models block, when that skill is among :attr:`skills`.
    block: ModelsBlock | None = None
    #: The models the text sources offer now (only looked up for a text skill).
    models: list[OfferedModel] = field(default_factory=list)
    default: str | None = None
    #: What the visitor chose for the site before.
    kept: VisitorChoices = field(default_factory=VisitorChoices)
    #: The codes of the site's newest live grant with models.
    held_models: dict[str, str] | None = None

    @property
    def currency(self) -> str:
        """The currency of the manifest's expected cost (the budget's)."""
        cost = self.manifest.get("expectedCost")
        money = cost.get("perSession") if isinstance(cost, dict) else None
        parts = money.split() if isinstance(money, str) else []
        return parts[-1] if parts else "USD"


async def make_offer(
    shim: WalletShim, origin: str, manifest: dict[str, Any], skills: list[str]
) -> Offer:
    """The offer for ``skills`` of ``manifest``: for a text skill, the models on offer now.
    Raises the store's errors when the kept choices cannot be read."""
    offer = Offer(origin, manifest, list(skills))
    kept = await asyncio.to_thread(KeptChoices(shim.sites.database).get, origin)
    try:
        offer.kept = read_choices(kept if isinstance(kept, dict) else None)
    except ChoiceRefusal:
        log.warning("event=kept-choices-unreadable origin=%s", origin)
    held = [g for g in shim.grants.of_origin(origin) if g.models]
    if held:
        offer.held_models = dict(max(held, key=lambda g: g.created_ms).models)
    if any(uses_models(name) for name in skills):
        offer.block = read_block(manifest)
        offer.models = await models_on_offer(shim.engine)
        offer.default = default_model(shim.engine)
    return offer


def asks_models(offer: Offer, more: More) -> bool:
    """Whether the consent for ``more`` lets the visitor tick models: the text skill is new
    to the site, or its models block is."""
    return offer.block is not None and (
        more.first or any(uses_models(name) for name in (*more.skills, *more.models))
    )


def offer_view(offer: Offer, more: More) -> dict[str, Any]:
    """The consent's view: the difference (:func:`difference_view`), the models to tick when
    :func:`asks_models`, and what the visitor may set (each limit's ceiling, the budget's
    currency, the longest expiry, what they chose before)."""
    view = difference_view(offer.origin, offer.manifest, more)
    if asks_models(offer, more) and offer.block is not None:
        view["models"] = models_view(offer.block, offer.models)
    view["choices"] = {
        "ceilings": ceilings(offer.manifest),
        "siteLimits": _site_limits(offer.manifest),
        "currency": offer.currency,
        "budget": _money_text(offer.manifest),
        "maxExpiryMinutes": ALLOW_GRANT_SECONDS // 60,
        "kept": offer.kept.to_json(),
    }
    return view


def offer_check(offer: Offer, more: More) -> ChoiceCheck:
    """The check of the visitor's choices for the consent of ``more``: limits no wider than
    their ceilings, a budget in the manifest's currency, an expiry within a day, and, when the
    consent lets the visitor tick models, ticks that satisfy the block (see
    :func:`~byoa_skills.consent.model_offers.ticked_models`)."""
    ticks = asks_models(offer, more)

    def check(choices: VisitorChoices) -> VisitorChoices:
        problems = choice_problems(
            offer.manifest,
            choices,
            latest_expiry_minutes=ALLOW_GRANT_SECONDS / 60,
            currency=offer.currency,
        )
        if problems:
            raise ChoiceRefusal(problems)
        if not ticks:
            return replace(choices, models=None)
        assert offer.block is not None
        ticked_models(offer.block, offer.models, choices.models or ())
        return replace(choices, models=choices.models or ())

    return check


class ModelsNotTicked(Exception):
    """No model the visitor ticked can serve the grant: the ticks kept for the site are no
    longer all offered (or no longer meet the block), or none were ever ticked. Only a
    consent where the visitor ticks again gives the text skill."""


def ticks_gone(offer: Offer, *, decided: bool = False) -> bool:
    """Whether a grant made without a consent would need models the visitor did not tick
    (:class:`ModelsNotTicked`); ``decided``: the visitor allowed from a terminal, where the
    fallback ticks stand for a first grant with nothing ticked before."""
    try:
        _models_for(offer, None, decided=decided)
    except ModelsNotTicked:
        return True
    except GrantRefusal:
        return False
    return False


def offer_grant(
    offer: Offer, choices: VisitorChoices | None, *, decided: bool = False
) -> dict[str, Any]:
    """The grant an Allow gives: ``choices`` from a consent, else what was kept for the site
    (a consent where no model was ticked, as a block that needs none allows, gives no
    ``text.generate``). The models are only ones the visitor ticked: :class:`ModelsNotTicked`
    when a kept tick is no longer offered (never replaced by others without a consent);
    ``decided`` (a terminal's allow) lets the fallback ticks stand where nothing was ever
    ticked. ``no-fitting-model`` (:class:`GrantRefusal`) when those cannot meet the block."""
    chosen = choices if choices is not None else offer.kept
    skills = offer.skills
    if choices is not None and choices.models == () and offer.block is not None:
        skills = [name for name in skills if not uses_models(name)]  # no model ticked: no text
        offer = replace(offer, skills=skills, block=None)
    if chosen.budget is not None and chosen.budget.split()[-1] != offer.currency:
        chosen = replace(chosen, budget=None)
    return allow_grant(
        offer.manifest,
        offer.skills,
        choices=chosen,
        models=_models_for(offer, choices, decided=decided),
    )


def _models_for(
    offer: Offer, choices: VisitorChoices | None, *, decided: bool = False
) -> dict[str, str] | None:
    block = offer.block
    if block is None:
        return None
    if choices is not None and choices.models is not None:
        try:
            return model_codes(ticked_models(block, offer.models, choices.models))
        except ChoiceRefusal:
            raise ModelsNotTicked from None
    if offer.held_models:
        return offer.held_models
    if offer.kept.models is not None:
        by_ref = {model.ref: model for model in offer.models}
        kept = [by_ref[ref] for ref in offer.kept.models if ref in by_ref]
        if len(kept) == len(offer.kept.models) and kept and not tick_problems(block, kept):
            return model_codes(kept)
        raise ModelsNotTicked
    if not decided:
        raise ModelsNotTicked
    chosen = fallback_ticks(block, offer.models, offer.default)
    if tick_problems(block, chosen) or not chosen:
        raise GrantRefusal("no-fitting-model", "the text sources offer no models that fit")
    return model_codes(chosen)


async def keep_choices(
    shim: WalletShim, origin: str, choices: VisitorChoices | None, grant: dict[str, Any]
) -> bool:
    """Keep what the visitor chose at a consent (``choices``; None: no consent, nothing new
    but the models of a first grant with none ticked before) for the site's next grant, the
    models as the grant just made names them (``SOURCE/MODEL``); False (logged) when the
    store cannot keep them."""
    if choices is None:
        kept = await asyncio.to_thread(KeptChoices(shim.sites.database).get, origin)
        kept = kept if isinstance(kept, dict) else {"limits": {}}
        if not grant.get("models") or kept.get("models") is not None:
            return True
        try:
            choices = read_choices({**kept, "models": []})
        except ChoiceRefusal:
            return True
    document = choices.to_json()
    if grant.get("models"):
        document["models"] = list(grant["models"].values())
    else:
        document.pop("models", None)
    try:
        await asyncio.wrap_future(KeptChoices(shim.sites.database).keep(origin, document))
    except (StoreError, sqlite3.Error, OSError) as error:
        log.error("event=choices-not-kept origin=%s error=%r", origin, str(error))
        return False
    return True


def _money_text(manifest: dict[str, Any]) -> str:
    cost = manifest.get("expectedCost")
    money = cost.get("perSession") if isinstance(cost, dict) else None
    return money if isinstance(money, str) else "0 USD"


def _site_limits(manifest: dict[str, Any]) -> dict[str, Any]:
    purpose = manifest.get("purpose")
    limits = purpose.get("limits") if isinstance(purpose, dict) else None
    return dict(limits) if isinstance(limits, dict) else {}
