"""The database's schema, as forward migrations: migration N takes version N to N + 1.

A migration is never changed once released; a change of schema is a new one at the end.
"""

from __future__ import annotations

#: Each entry is the SQL of one migration, statements separated by ``;``.
MIGRATIONS: tuple[str, ...] = (
    # 1: sites, grants, recent link codes, the direct link's pairings, activity.
    """
    CREATE TABLE sites (
        origin TEXT PRIMARY KEY,
        state TEXT NOT NULL CHECK (state IN ('active', 'paused', 'blocked')),
        since TEXT NOT NULL,
        first_seen TEXT,
        last_seen TEXT,
        note TEXT,
        decide_on_my_own INTEGER NOT NULL DEFAULT 0 CHECK (decide_on_my_own IN (0, 1))
    ) WITHOUT ROWID;

    CREATE TABLE grants (
        id TEXT PRIMARY KEY,
        origin TEXT NOT NULL REFERENCES sites (origin) ON DELETE CASCADE,
        manifest TEXT NOT NULL,
        given TEXT NOT NULL,
        limits TEXT NOT NULL,
        currency TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        calls INTEGER NOT NULL DEFAULT 0,
        in_flight INTEGER NOT NULL DEFAULT 0,
        reserved TEXT NOT NULL DEFAULT '0',
        spent TEXT NOT NULL DEFAULT '0',
        call_times TEXT NOT NULL DEFAULT '[]',
        peak_in_flight INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX grants_by_origin ON grants (origin);
    CREATE INDEX grants_by_expiry ON grants (expires_ms);

    CREATE TABLE recent_codes (
        digest TEXT PRIMARY KEY,
        seen_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX recent_codes_by_time ON recent_codes (seen_ms);

    CREATE TABLE link_pairings (
        origin TEXT PRIMARY KEY REFERENCES sites (origin) ON DELETE CASCADE,
        record TEXT NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE activity (
        id INTEGER PRIMARY KEY,
        time_ms INTEGER NOT NULL,
        kind TEXT,
        origin TEXT,
        skill TEXT,
        decision TEXT,
        outcome TEXT,
        entry TEXT NOT NULL
    );
    CREATE INDEX activity_by_time ON activity (time_ms);
    CREATE INDEX activity_by_origin ON activity (origin, id);
    CREATE INDEX activity_by_skill ON activity (skill, id);
    CREATE INDEX activity_by_decision ON activity (decision, id);
    CREATE INDEX activity_by_outcome ON activity (outcome, id)
    """,
    # 2: what the visitor allowed a site with "decide on my own", at its widest.
    """
    CREATE TABLE allowed_scopes (
        origin TEXT PRIMARY KEY REFERENCES sites (origin) ON DELETE CASCADE,
        scope TEXT NOT NULL,
        since TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    # 3: what the visitor chose for a site (models ticked, limits), given to its next grant.
    """
    CREATE TABLE visitor_choices (
        origin TEXT PRIMARY KEY REFERENCES sites (origin) ON DELETE CASCADE,
        choices TEXT NOT NULL,
        since TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    # 4: the purpose judge: the wallet's default (one row, JSON) and each site's switch.
    """
    CREATE TABLE wallet_settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE judge_sites (
        origin TEXT PRIMARY KEY REFERENCES sites (origin) ON DELETE CASCADE,
        setting TEXT NOT NULL CHECK (setting IN ('on', 'off')),
        since TEXT NOT NULL
    ) WITHOUT ROWID
    """,
)
