"""A ``text.generate`` call run beside the purpose judge (``docs/judge.md``): the generation
and the judge start together (on a source that costs money, the judge first and the
generation only once it passes); the answer and every chunk are held until the judge's
opinion lets them pass. ``allowed`` or ``warn``: the answer goes out as it came. ``ask``: the
visitor is asked on the wallet page with the judge's reason (the answer stays held meanwhile).
``blocked``, or a decline: the answer is thrown away, and the site gets ``ok: false``
(``purpose-mismatch``, or the judge's code).

At most :data:`~byoa_skills.judge.IN_FLIGHT_PER_SITE` judged calls of one site run at once
(the judge's ``slots``); the next waits for one, at most its deadline (then
``deadline-exceeded``), so a site cannot starve the visitor's own calls.

The call's result carries the judge's decision and code in its facts (``judgeDecision``,
``judge``), and its reason among the call's reasons, for the activity log: never the
messages, never the judge's words.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import replace
from typing import Any

from byoa_skills.judge import NoSlot, Opinion, Purpose, PurposeJudge
from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills import CallResult, PreparedCall
from byoa_skills.skills.call_gate import Run
from byoa_skills.wallet_shim.gate import AskHook
from byoa_skills.wallet_shim.grants import Grant

log = logging.getLogger("byoa_skills.judge")


async def judged_run(
    judge: PurposeJudge,
    grant: Grant,
    call: PreparedCall,
    run: Run,
    on_chunk: ChunkHook | None,
    ask: AskHook,
    judge_first: bool = False,
) -> CallResult:
    """``run`` beside ``judge``'s opinion of the call's messages under ``grant``, once one of
    the site's slots is free; with ``judge_first`` (a source that costs money) ``run`` starts
    only once the opinion lets it."""
    try:
        async with judge.slots.hold(grant.origin, call.deadline):
            return await _judged(judge, grant, call, run, on_chunk, ask, judge_first)
    except NoSlot:
        log.info("event=judge-no-slot grant=%s", grant.id)
        return CallResult.refused(
            "deadline-exceeded", "the site's other judged calls held every slot until the deadline"
        )


async def _judged(
    judge: PurposeJudge,
    grant: Grant,
    call: PreparedCall,
    run: Run,
    on_chunk: ChunkHook | None,
    ask: AskHook,
    judge_first: bool,
) -> CallResult:
    purpose = Purpose.of(grant.manifest, grant.origin)
    beside = judge.beside(grant.id, purpose, call.messages or [], run, on_chunk, judge_first)
    try:
        opinion = await beside.opinion()
        passes = opinion.decision in ("allowed", "warn")
        if opinion.decision == "ask":
            passes = await _visitor_allows(ask, grant, call, opinion)
        if not passes:
            await beside.discard()
            log.info("event=judge-held grant=%s code=%s", grant.id, opinion.code)
            code = opinion.code if opinion.decision == "blocked" else "declined"
            return _with_opinion(
                CallResult.refused(code, "the purpose judge held the answer"), opinion, "blocked"
            )
        result: CallResult = await beside.release()
    finally:
        await beside.close()
    return _with_opinion(result, opinion, opinion.decision)


async def _visitor_allows(ask: AskHook, grant: Grant, call: PreparedCall, opinion: Opinion) -> bool:
    """The visitor's answer to the judge's ``ask``, on the wallet page (a call consent)."""
    shown = {"skill": call.skill, "input": dict(call.measured), "estimatedCost": ""}
    reason = {"code": opinion.code, "decision": "ask", "message": opinion.message}
    answer = ask(grant, shown, [reason])
    decided = await answer if inspect.isawaitable(answer) else answer
    return decided is True


def _with_opinion(result: CallResult, opinion: Opinion, decision: str) -> CallResult:
    facts: dict[str, Any] = {
        **result.facts,
        "judge": opinion.code,
        "judgeDecision": opinion.decision,
    }
    if opinion.model:
        facts["judgeModel"] = opinion.model
    if opinion.cost:
        facts["judgeCost"] = format(opinion.cost, "f")
    reason = {"code": opinion.code, "decision": opinion.decision, "message": "purpose judge"}
    return replace(result, facts=facts, decision=decision, reasons=[reason])
