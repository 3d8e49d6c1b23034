"""The purpose judge's opinion of one call, its stable codes, and how an opinion joins the
gate's result: through the reference library's ``apply_opinion``, so an opinion can only
make a decision stricter, never milder."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from bringyourownagent import DECISIONS, CheckResult, apply_opinion
from bringyourownagent import Opinion as ReferenceOpinion

#: Every code an :class:`Opinion` can carry, with what it means. Stable: callers match on
#: them. The ``purpose-judge-*`` codes are the judge's own failures; they always ``ask``.
CODES: dict[str, str] = {
    "purpose-fits": "the judge's model found that the call fits the stated purpose (allowed)",
    "purpose-doubt": "the judge's model has a doubt worth noting; the call runs (warn)",
    "purpose-unclear": "the judge's model could not tell whether the call fits (ask)",
    "purpose-mismatch": "the judge's model found that the call does not fit the stated purpose",
    "purpose-judge-error": "the judge's source failed or could not be asked (ask)",
    "purpose-judge-timeout": "no opinion within the judge's deadline (ask)",
    "purpose-judge-unreadable": "the judge's model answered something that is not an opinion (ask)",
    "purpose-judge-unavailable": "the judge is on but its source does not answer (ask)",
    "purpose-judge-too-long": "the call is longer than the judge can read whole (ask)",
    "purpose-judge-spent": "the paid judge reached the visitor's spend for today (ask)",
}
#: The codes of opinions that the judge's model gave (kept by the cache; the others are the
#: judge's own failures, asked again next time).
MODEL_CODES = frozenset({"purpose-fits", "purpose-doubt", "purpose-unclear", "purpose-mismatch"})
#: Decisions that let a call's answer reach the site.
PASSING = frozenset({"allowed", "warn"})


@dataclass(frozen=True)
class Opinion:
    """What the judge thinks of one call: a decision (``allowed``, ``warn``, ``ask``,
    ``blocked``), a stable code from :data:`CODES` and a one-line message for the visitor.

    The message is the judge's reason, written by a model that read the site's text: show it
    as text, never as markup, and keep it out of the activity log (record the decision and the
    code only)."""

    decision: str
    code: str
    message: str
    #: ``SOURCE/MODEL`` of the model that judged, when one answered.
    model: str | None = None
    #: What asking the judge cost: the visitor's, never the site's.
    cost: Decimal = Decimal(0)
    #: Whether the opinion came from the cache (no model was asked this time).
    cached: bool = False

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise AssertionError(f"unknown decision {self.decision!r}")
        if self.code not in CODES:
            raise AssertionError(f"unknown purpose judge code {self.code!r}")

    @property
    def passes(self) -> bool:
        """Whether the opinion lets the answer reach the site (``allowed`` or ``warn``)."""
        return self.decision in PASSING

    def reference(self) -> ReferenceOpinion:
        """The opinion as the reference library reads it: ``{decision, code, message}``."""
        return {"decision": self.decision, "code": self.code, "message": self.message}  # type: ignore[typeddict-item]


def failed(code: str, message: str) -> Opinion:
    """The opinion of a judge that could not judge: always ``ask``, so the visitor decides."""
    if code in MODEL_CODES:
        raise AssertionError(f"{code} is a model's opinion, not a failure")
    return Opinion("ask", code, message)


def merge(result: CheckResult, opinion: Opinion | None) -> CheckResult:
    """The gate's ``result`` with ``opinion`` applied by the reference ``apply_opinion``: the
    decision is the stricter of the two and the opinion is added as a reason (an ``allowed``
    opinion, or None, changes nothing). A ``blocked`` result stays blocked whatever the
    opinion."""
    return apply_opinion(result, None if opinion is None else opinion.reference())
