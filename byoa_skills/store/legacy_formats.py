"""The JSON file older versions kept the site list in (``sites.json``), read for the import
into the wallet's database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from byoa_skills.store.errors import SiteListError
from byoa_skills.store.origins import normalize_origin

#: The file older versions kept the list in, and its format's version.
SITES_FILE = "sites.json"
FORMAT_VERSION = 1
#: The states a site of the list can be in.
STATES = ("active", "paused", "blocked")


def parse_site_list(data: bytes, path: Path) -> dict[str, dict[str, Any]]:
    """The sites of a `sites.json` older versions wrote, by origin; :class:`SiteListError`
    when it is not a valid site list."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise SiteListError(f"{path} is not JSON: {error}", "store-damaged") from None
    damaged = "store-damaged"
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise SiteListError(f"{path} is not a site list of version {FORMAT_VERSION}", damaged)
    sites = document.get("sites")
    if not isinstance(sites, dict):
        raise SiteListError(f"{path} has no 'sites' object", damaged)
    for origin, record in sites.items():
        try:
            valid = normalize_origin(origin) == origin
        except ValueError:
            valid = False
        if not valid or not isinstance(record, dict):
            raise SiteListError(
                f"{path} holds an entry that is not an origin: {origin[:100]!r}", damaged
            )
        if record.get("state") not in STATES or not isinstance(record.get("since"), str):
            raise SiteListError(
                f"{path}: the entry for {origin} has no valid state and since", damaged
            )
    return sites
