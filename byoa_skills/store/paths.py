"""The user's folders the engine keeps its files in.

Every function returns an absolute path and creates nothing. When ``$BYOA_SKILLS_HOME`` is
set (tests and scripts set it) the three folders are ``cache``, ``data`` and ``config``
under that one root; otherwise they are the platform's per-user folders (platformdirs).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The name the platform folders are made under.
APP_NAME = "byoa-skills"
#: The variable that puts every folder under one root.
HOME_ENV = "BYOA_SKILLS_HOME"


def home_root() -> Path | None:
    """The absolute root named by ``$BYOA_SKILLS_HOME``, or ``None`` when it is unset or empty."""
    value = os.environ.get(HOME_ENV, "")
    if not value:
        return None
    return Path(value).expanduser().absolute()


def cache_dir() -> Path:
    """Where files that can be made again live (the model cache): ``$BYOA_SKILLS_HOME/cache``
    or the platform's user cache folder."""
    return _user_dir("cache")


def data_dir() -> Path:
    """Where the engine's own records live (activity log, site list, pairings):
    ``$BYOA_SKILLS_HOME/data`` or the platform's user data folder."""
    return _user_dir("data")


def config_dir() -> Path:
    """Where the engine's settings live (the API token): ``$BYOA_SKILLS_HOME/config`` or the
    platform's user config folder."""
    return _user_dir("config")


def _user_dir(kind: str) -> Path:
    root = home_root()
    if root is not None:
        return root / kind
    import platformdirs

    find = {
        "cache": platformdirs.user_cache_dir,
        "data": platformdirs.user_data_dir,
        "config": platformdirs.user_config_dir,
    }[kind]
    return Path(find(APP_NAME, appauthor=False)).absolute()
