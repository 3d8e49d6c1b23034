"""What the visitor allowed each site that the wallet decides for on its own: the scope of
the manifests allowed with "decide on my own", at its widest (see
:mod:`byoa_skills.consent.scope`), kept as JSON in the ``allowed_scopes`` table.

Forgetting a site forgets its scope (the row goes with the site's).
"""

from __future__ import annotations

from byoa_skills.store.kept_per_site import KeptPerSite


class AllowedScopes(KeptPerSite):
    """The kept scope of each site, by origin (normalised)."""

    TABLE = "allowed_scopes"
    COLUMN = "scope"
