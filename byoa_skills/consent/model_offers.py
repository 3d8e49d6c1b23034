"""The models the visitor's text sources offer now, as a consent lists them, and the
visitor's ticks turned into a grant's codes (``m1`` → ``SOURCE/MODEL``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from byoa_skills.consent.shown_text import shown
from byoa_skills.runtimes.text import TextFailure
from byoa_skills.runtimes.text.discovery import probe_all
from byoa_skills.skills import SkillEngine
from byoa_skills.skills.text_generate import SOURCE_CHECK_SECONDS
from byoa_skills.wallet_shim.models_block import (
    ModelsBlock,
    OfferedModel,
    grouped,
    offered,
    preticked,
    tick_problems,
)
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal


async def models_on_offer(engine: SkillEngine) -> list[OfferedModel]:
    """Every model every text source lists now, in the sources' order; a source that does not
    answer within :data:`SOURCE_CHECK_SECONDS` offers none."""
    text = engine.text
    if text is None:
        return []
    try:
        sources = list(text.config().sources.values())
    except TextFailure:
        return []
    probes = await probe_all(text, sources, SOURCE_CHECK_SECONDS)
    return [offered(p.source.name, model) for p in probes if p.answers for model in p.models]


def default_model(engine: SkillEngine) -> str | None:
    """The visitor's default text model (``SOURCE/MODEL``), or None."""
    if engine.text is None:
        return None
    try:
        return engine.text.config().default_model
    except TextFailure:
        return None


def models_view(block: ModelsBlock, models: Sequence[OfferedModel]) -> dict[str, Any]:
    """The consent's models section: what the site asks (``why`` shown with its hidden
    characters made visible) and the models on offer by company, with those ticked for the
    visitor (only the ones the site's ``prefer`` names)."""
    ticked = {model.ref for model in preticked(block, models)}
    groups = grouped(models)
    for group in groups:
        for model in group["models"]:
            model["ticked"] = model["ref"] in ticked
    return {
        "count": block.count,
        "required": block.required,
        "differentCompanies": block.different_companies,
        "why": shown(block.why),
        "prefer": [shown(name) for name in block.prefer],
        "groups": groups,
        "companies": {m.ref: m.company for m in models},
    }


def ticked_models(
    block: ModelsBlock, models: Sequence[OfferedModel], refs: Sequence[str]
) -> list[OfferedModel]:
    """The offered models the visitor ticked (``SOURCE/MODEL`` each), in the order ticked;
    :class:`ChoiceRefusal` ``model-not-offered`` or the block's own codes
    (:func:`~byoa_skills.wallet_shim.models_block.tick_problems`)."""
    by_ref = {model.ref: model for model in models}
    missing = [
        {
            "code": "model-not-offered",
            "path": f"/models/{index}",
            "message": f"no text source offers {ref[:80]!r} now",
        }
        for index, ref in enumerate(refs)
        if ref not in by_ref
    ]
    if missing:
        raise ChoiceRefusal(missing)
    chosen = [by_ref[ref] for ref in refs]
    problems = tick_problems(block, chosen)
    if problems:
        raise ChoiceRefusal(problems)
    return chosen
