"""The registrations this installation holds: one per platform, with its two key pairs.

Each lives in ``byoag/<platform>/`` in the user's data folder (folder mode 0700):
``registration.json`` (the credential and what it allows), ``identity.jwk`` and
``installation.jwk`` (the private keys), every file mode 0600 and written atomically. These
are BYOAg registrations; the direct link's site pairings are another thing
(:mod:`byoa_skills.store.link_pairings`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from joserfc.jwk import OKPKey

from byoa_skills.byoag.keys import PairwiseKeys, load_key, save_key
from byoa_skills.store import paths
from byoa_skills.store.files import locked, private_folder, write_private

RECORD = "registration.json"
IDENTITY_KEY = "identity.jwk"
INSTALLATION_KEY = "installation.jwk"


@dataclass(frozen=True)
class Registration:
    """A scoped, revocable registration at one platform."""

    #: The platform's name as the person gave it (``platform.example``, ``localhost:8443``).
    platform: str
    issuer: str
    registration_id: str
    #: The agent's pairwise identifier there: the thumbprint of its identity key.
    agent_id: str
    #: The skills the platform may use.
    scope: tuple[str, ...]
    #: ``code`` or ``platform-confirmation``.
    mode: str
    #: The thumbprint of the installation key the credential is bound to (``cnf.jkt``).
    jkt: str
    paired_at: str
    revocation_endpoint: str | None = None
    access_token: str = field(default="", repr=False)

    def shown(self) -> dict[str, Any]:
        """Everything but the credential, as ``pairings list --json`` prints it."""
        data = asdict(self)
        del data["access_token"]
        data["scope"] = list(self.scope)
        return data

    def to_json(self) -> dict[str, Any]:
        """The record kept on disk."""
        return {**self.shown(), "access_token": self.access_token}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Registration:
        """The registration in a record; ValueError when it is not one."""
        try:
            return cls(**{**data, "scope": tuple(data["scope"])})
        except (TypeError, KeyError) as error:
            raise ValueError(f"not a registration record: {error}") from None


class RegistrationStore:
    """Registrations by platform under ``root`` (``byoag`` in the user's data folder)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or paths.data_dir() / "byoag"

    def folder(self, platform: str) -> Path:
        """The folder of ``platform``'s registration (its name, quoted where it has a port):
        always one folder inside the store's root. ``ValueError`` for a name that is no
        platform's (empty, ``.``, ``..``)."""
        name = quote(platform, safe=".-")
        if name.strip(".") == "":
            raise ValueError(f"{platform!r} is not a platform name")
        return self.root / name

    def save(self, registration: Registration, keys: PairwiseKeys) -> None:
        """Keep ``registration`` and its keys, replacing any earlier one of its platform."""
        folder = self.folder(registration.platform)
        with locked(self.root / ".lock"):
            private_folder(folder)
            save_key(folder / IDENTITY_KEY, keys.identity)
            save_key(folder / INSTALLATION_KEY, keys.installation)
            write_private(folder / RECORD, json.dumps(registration.to_json(), indent=1).encode())

    def get(self, platform: str) -> Registration | None:
        """``platform``'s registration, or None (also for an unreadable record)."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            data = json.loads((self.folder(platform) / RECORD).read_bytes())
            if isinstance(data, dict):
                return Registration.from_json(data)
        return None

    def installation_key(self, platform: str) -> OKPKey:
        """The installation key of ``platform``'s registration; ValueError when missing."""
        try:
            return load_key(self.folder(platform) / INSTALLATION_KEY)
        except OSError as error:
            raise ValueError(f"no installation key for {platform}: {error.strerror}") from None

    def list(self) -> list[Registration]:
        """Every registration, by platform name."""
        if not self.root.is_dir():
            return []
        found = []
        for folder in sorted(self.root.iterdir()):
            if folder.is_dir():
                with contextlib.suppress(FileNotFoundError, ValueError):
                    data = json.loads((folder / RECORD).read_bytes())
                    if isinstance(data, dict):
                        found.append(Registration.from_json(data))
        return sorted(found, key=lambda registration: registration.platform)

    def remove(self, platform: str) -> bool:
        """Forget ``platform``'s registration and delete its keys (its folder, and nothing
        else); False when there was none, or the name is no platform's."""
        try:
            folder = self.folder(platform)
        except ValueError:
            return False
        with locked(self.root / ".lock"):
            if folder.is_symlink() or not folder.is_dir():
                return False
            shutil.rmtree(folder)
        return True
