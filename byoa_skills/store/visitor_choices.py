"""What the visitor chose for each site (the models ticked, by ``SOURCE/MODEL``, and the
limits, budget and expiry they set; see :mod:`byoa_skills.wallet_shim.visitor_choices`), kept
as JSON in the ``visitor_choices`` table and given again to the site's next grant made without
a consent. Forgetting a site forgets them."""

from __future__ import annotations

from byoa_skills.store.kept_per_site import KeptPerSite


class KeptChoices(KeptPerSite):
    """The kept choices of each site, by origin (normalised)."""

    TABLE = "visitor_choices"
    COLUMN = "choices"
