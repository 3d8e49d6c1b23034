"""What the wallet page shows, as JSON: the sites with their grants and use, the engine, the
BYOAg pairings. Plain data shaped from the shim, the pool and the stores; no decision here."""

from __future__ import annotations

import os
from typing import Any

from byoa_skills.byoag.registrations import RegistrationStore
from byoa_skills.consent.desk import origin_view
from byoa_skills.consent.model_offers import models_on_offer
from byoa_skills.pool.memory import rss_mib
from byoa_skills.runtimes.text import TextFailure
from byoa_skills.runtimes.text.discovery import probe_all
from byoa_skills.skills import SkillEngine
from byoa_skills.store.clock import now_ms
from byoa_skills.wallet_shim.grants import Grant
from byoa_skills.wallet_shim.judge_switch import paid_source
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import ceilings

#: How long a text source may take to say it is up, in seconds.
SOURCE_PROBE_SECONDS = 1.5


def sites_view(shim: WalletShim) -> list[dict[str, Any]]:
    """Every site the list holds (and any with a live grant), with its grants, the limits in
    force and their use; ``pending`` when its state is in force but not yet written."""
    grants: dict[str, list[Grant]] = {}
    for grant in shim.grants.all():
        grants.setdefault(grant.origin, []).append(grant)
    entries = {entry.origin: entry.to_json() for entry in shim.sites.list()}
    for origin in grants:
        entries.setdefault(origin, {"origin": origin, "state": "active", "decideOnMyOwn": False})
    unwritten = shim.sites.unwritten()
    switches = shim.judges.store.sites() if shim.judges is not None else {}
    return [
        {
            **entry,
            **origin_view(origin),
            "pending": origin in unwritten,
            "judge": switches.get(origin),
            "grants": [grant_view(g) for g in sorted(grants.get(origin, []), key=_by_age)],
        }
        for origin, entry in sorted(entries.items())
    ]


def grant_view(grant: Grant) -> dict[str, Any]:
    """One grant: what it allows, until when, the limits in force, and its use; for the
    visitor's changes, the limits they set, each limit's ceiling, and the models ticked by
    code with the visitor's own names (``modelNames``: the visitor sees them, a site never)."""
    purpose = grant.manifest.get("purpose")
    site_limits = purpose.get("limits") if isinstance(purpose, dict) else None
    minutes_left = max(0, (grant.expires_ms - now_ms()) // 60_000)
    return {
        **grant.summary(),
        "budget": grant.reference.get("budget", {}).get("perSession"),
        "record": grant.record(),
        "visitorLimits": dict(grant.given.get("limits") or {}),
        "modelNames": dict(grant.models),
        "choices": {
            "ceilings": ceilings(grant.manifest),
            "siteLimits": dict(site_limits) if isinstance(site_limits, dict) else {},
            "currency": grant.currency,
            "maxExpiryMinutes": minutes_left,
            "budget": grant.reference.get("budget", {}).get("perSession"),
        },
    }


async def engine_view(engine: SkillEngine) -> dict[str, Any]:
    """The speech model and its workers, the text sources (up or down), memory."""
    pool = engine.pool
    speech: dict[str, Any] = {"running": pool is not None}
    if pool is not None:
        config = pool.config
        speech.update(
            model=config.model_name,
            device=str(config.device),
            backend=str(config.backend),
            encoder=pool.encoder.label,
            encoderPrecision=pool.encoder.precision,
            encoderReason=pool.encoder.reason,
            ready=pool.ready,
            queued=pool.queue_depth,
            busy=pool.busy_workers,
            restarts=pool.restarts,
            letGo=pool.released,
            layout={
                "workers": config.workers,
                "threads": config.threads_per_worker,
                "batch": config.max_batch,
                "encoderSeconds": config.encoder_window or 30.0,
                "idleReleaseSeconds": config.idle_release,
                "source": config.layout_source,
            },
            workers=[{"pid": pid, "rssMib": _rss_mib(pid)} for pid in pool.worker_pids()],
        )
    sources: list[dict[str, Any]] = []
    if engine.text is not None:
        try:
            configured = list(engine.text.config().sources.values())
        except TextFailure as failure:
            sources.append({"name": "-", "up": False, "problem": failure.message})
            configured = []
        for probe in await probe_all(engine.text, configured, SOURCE_PROBE_SECONDS):
            sources.append(
                {
                    "name": probe.source.name,
                    "kind": probe.source.kind,
                    "up": probe.answers,
                    "models": len(probe.models),
                    "problem": probe.problem,
                }
            )
    return {"speech": speech, "textSources": sources, "frontRssMib": _rss_mib(os.getpid())}


async def judge_models(engine: SkillEngine) -> list[dict[str, Any]]:
    """The models the purpose judge may use: every model on offer now, and whether its
    source is paid, as the judge's daily spend counts it: an API-key source, or one away
    from this computer that is sent a key (the wallet never picks a paid one by itself)."""
    if engine.text is None:
        return []
    try:
        sources = engine.text.config().sources
    except TextFailure:
        return []
    paid = {name: paid_source(source) for name, source in sources.items()}
    return [
        {"ref": model.ref, "paid": paid.get(model.source, True)}
        for model in await models_on_offer(engine)
    ]


def pairings_view(store: RegistrationStore) -> list[dict[str, Any]]:
    """The BYOAg platforms this wallet is paired with (never a credential)."""
    return [registration.shown() for registration in store.list()]


def _by_age(grant: Grant) -> int:
    return grant.created_ms


def _rss_mib(pid: int) -> float | None:
    rss = rss_mib(pid)
    return None if rss is None else round(rss, 1)
