"""What a site may get without a new consent, for every way in (a link, a page's request).

A site holds the scope of its live grants; a site the visitor lets the wallet decide for on
its own also holds the scope kept when the visitor chose "decide on my own". A request or
link that asks for no more than that is answered without asking; one that asks for more gets
a consent showing only the difference (or nothing, without a click). The flag and the scope
are kept only once the grant they came with is made.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

from byoa_skills.consent.desk import site_view
from byoa_skills.consent.scope import More, Scope, difference_manifest, more_than
from byoa_skills.consent.shown_text import shown
from byoa_skills.store.allowed_scopes import AllowedScopes
from byoa_skills.store.database import StoreError
from byoa_skills.wallet_shim.shim import WalletShim

log = logging.getLogger("byoa_skills.consent")


def granted_part(manifest: dict[str, Any], skills: list[str]) -> dict[str, Any]:
    """``manifest`` with only the skills a grant gives (those this engine can serve)."""
    entries = manifest.get("skills") if isinstance(manifest.get("skills"), dict) else {}
    return {**manifest, "skills": {name: entries[name] for name in skills if name in entries}}


def held_scope(shim: WalletShim, origin: str, *, on_my_own: bool) -> Scope | None:
    """What ``origin`` holds: its live grants' scopes, and with ``on_my_own`` the scope kept
    for it; None when it holds nothing. Raises the store's errors when the kept scope cannot
    be read."""
    held: Scope | None = None
    for grant in shim.grants.of_origin(origin):
        scope = Scope.of(granted_part(grant.manifest, grant.skills))
        held = scope if held is None else held.widened(scope)
    if on_my_own:
        kept = Scope.from_json(AllowedScopes(shim.sites.database).get(origin))
        if kept is not None:
            held = kept if held is None else held.widened(kept)
    return held


def asks_for_more(
    shim: WalletShim, origin: str, manifest: dict[str, Any], *, on_my_own: bool
) -> More:
    """What ``manifest`` (cut to the skills it would be granted) asks beyond what ``origin``
    holds; falsy when it may be answered without a consent."""
    return more_than(held_scope(shim, origin, on_my_own=on_my_own), manifest)


def difference_view(origin: str, manifest: dict[str, Any], more: More) -> dict[str, Any]:
    """The consent's view of only what ``manifest`` asks beyond what the site holds; the
    skills it already holds in full are listed as already allowed."""
    difference = difference_manifest(manifest, more)
    view = site_view(origin, difference)
    asked = set(difference["skills"])
    entries = manifest.get("skills") if isinstance(manifest.get("skills"), dict) else {}
    view["alreadyAllowed"] = sorted(shown(str(name)) for name in entries if name not in asked)
    view["more"] = more.codes()
    if more.purpose is not None and not more.first:  # the new purpose beside the old
        view["previousPurposes"] = [shown(text) for text in more.held_purposes]
    return view


async def remember_on_my_own(
    shim: WalletShim, origin: str, manifest: dict[str, Any], skills: list[str]
) -> bool:
    """After a grant made with "decide on my own": widen the scope kept for the site by this
    manifest's granted part, then set its flag. False (logged) when the store cannot keep
    them: the grant stands, and the next request is asked again."""
    scopes = AllowedScopes(shim.sites.database)
    scope = Scope.of(granted_part(manifest, skills))

    def keep() -> None:
        kept = Scope.from_json(scopes.get(origin))
        scopes.keep(origin, (scope if kept is None else kept.widened(scope)).to_json()).result()
        shim.sites.set_decide_on_my_own(origin, True)

    try:
        await asyncio.to_thread(keep)
    except (StoreError, sqlite3.Error, OSError) as error:
        log.error("event=decide-on-my-own-not-kept origin=%s error=%r", origin, str(error))
        return False
    return True
