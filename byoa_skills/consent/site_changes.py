"""The one owner of the visitor's changes to a site, for the wallet page and the CLI alike:
pause, resume, block, forget, limits (of the site, or of one of its grants), "decide on my
own" and the purpose judge's switch.

Each change is written to the store, in force in memory at once, and told to the site: a
pause or resume sends each of its live grants as it now is (a ``grant`` frame on a direct
link, ``paused`` while paused); a block or forget ends its grants (``bye``); new limits
narrow them (a ``grant`` frame) and are kept for its next grant. A pause, block or resume the
disk cannot take yet is in force and told all the same (:class:`Changed` ``pending``).
"Decide on my own" off drops the site's pairing (the wallet does not come back after a
restart) and the scope kept with it (turned on again, the site holds only its live grants).

With no engine running, the terminal makes the same changes on a shim over the store alone
(:func:`store_shim`): the site's kept grants are released or narrowed there and the choices
kept, and the engine reads them when it starts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.allowed_scopes import AllowedScopes
from byoa_skills.store.link_pairings import PairingStore
from byoa_skills.store.sites import SiteChangePending, SiteStore, normalize_origin
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, VisitorChoices

#: The changes a visitor makes to a site, by name (``limits`` goes through :meth:`limits`).
SITE_ACTIONS = ("pause", "resume", "block", "forget", "decide-on-my-own", "judge")


@dataclass(frozen=True)
class Changed:
    """What a change did: whether the site's state changed, and whether it waits for the disk
    (in force and told all the same), with the store's words."""

    changed: bool
    pending: bool = False
    message: str = ""
    #: The site's live grants told of the change (their links get a ``grant`` frame or end).
    told: int = 0

    def to_json(self) -> dict[str, Any]:
        """The answer of the page's and the CLI's route."""
        shown: dict[str, Any] = {"ok": True, "changed": self.changed, "told": self.told}
        if self.pending:
            shown.update(pending=True, message=self.message[:300])
        return shown


def store_shim(sites: SiteStore) -> WalletShim:
    """A shim over the store alone, for a change made while no engine runs: its live grants
    are the ones the store keeps (no model runs, nobody is told); what it changes is written
    to the store, and the engine reads it when it starts."""
    return WalletShim(SkillEngine(None), sites, ActivityLog(sites.database))


class SiteChanges:
    """Changes a site as the visitor asks (see the module's words)."""

    def __init__(self, shim: WalletShim) -> None:
        self.shim = shim

    async def change(self, action: str, origin: str, setting: Any = None) -> Changed:
        """Do ``action`` (one of :data:`SITE_ACTIONS`) for ``origin``: ``setting`` is the
        switch for ``decide-on-my-own`` (True: on) and ``judge`` (``on``, ``off``, None).
        Raises ValueError for an action or origin that is not one, :class:`ChoiceRefusal`
        for a judge's switch that is not one (``no-judge`` when there is no judge), and the
        store's errors when it cannot be changed at all."""
        if action not in SITE_ACTIONS:
            raise ValueError(f"action must be one of {', '.join(SITE_ACTIONS)}")
        origin = normalize_origin(origin)
        shim, sites = self.shim, self.shim.sites
        if action == "judge":
            if shim.judges is None:
                raise ChoiceRefusal(
                    [
                        {
                            "code": "no-judge",
                            "path": "/setting",
                            "message": "this engine has no purpose judge",
                        }
                    ]
                )
            shim.judges.set_site(origin, setting)
            return Changed(True)
        if action == "decide-on-my-own":
            on = setting is True
            changed = await asyncio.to_thread(sites.set_decide_on_my_own, origin, on)
            if not on:  # no return after a restart, and nothing kept for a later "on"
                PairingStore(sites.database).drop(origin)
                AllowedScopes(sites.database).drop(origin)
            return Changed(changed)
        try:
            changed = await asyncio.to_thread(getattr(sites, action), origin)
            done = Changed(changed)
        except SiteChangePending as pending:  # in force now, written once the store takes it
            done = Changed(pending.changed, pending=True, message=str(pending))
        told = self._tell(action, origin)
        return Changed(done.changed, done.pending, done.message, told)

    def limits(self, origin: Any, choices: VisitorChoices) -> list[dict[str, Any]]:
        """Narrow every live grant of ``origin`` as the visitor chose (all or none: see
        :meth:`~byoa_skills.wallet_shim.shim.WalletShim.change_site`), told to the site and
        kept for its next grant; their summaries (none when it holds no live grant)."""
        return self.shim.change_site(origin, choices)

    def grant(self, grant_id: str, choices: VisitorChoices) -> dict[str, Any]:
        """Narrow one live grant as the visitor chose on the wallet page (see
        :meth:`~byoa_skills.wallet_shim.shim.WalletShim.change_grant`), told to the site and
        kept for its next grant; its summary."""
        return self.shim.change_grant(grant_id, choices)

    def _tell(self, action: str, origin: str) -> int:
        """Tell the site's live grants; how many there were."""
        shim = self.shim
        live = len(shim.grants.of_origin(origin))
        if action in ("forget", "block"):  # its grants end (a forgotten site's kept ones went)
            for grant in shim.grants.of_origin(origin):
                shim.release_grant(grant.id)
            if action == "forget" and shim.judges is not None:
                shim.judges.store.forget_site(origin)
        else:
            shim.tell_site_changed(origin)
        return live
