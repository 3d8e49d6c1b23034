"""The store's failures, one type per cause, each with a stable ``code`` (one of
:data:`~byoa_skills.store.problems.STORE_CODES`). Imports nothing of the store, so every
module of it (and the legacy import) can raise them."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from byoa_skills.protocol.refusal import Refusal


class StoreError(Refusal):
    """The wallet's database cannot be opened, read or written: ``code`` (one of
    :data:`~byoa_skills.store.problems.STORE_CODES`) and a message that says why."""

    def __init__(self, message: str, code: str = "store-unreadable") -> None:
        super().__init__(code, message, text=message)


class WritePending(StoreError):
    """A change the disk refused, kept to be written later: ``written`` is a future that has
    the change's value once it is committed (or the change's own error)."""

    def __init__(self, message: str, code: str, written: Future[Any]) -> None:
        super().__init__(message, code)
        self.written = written


class SiteListError(StoreError):
    """The site list cannot be read: the database fails, or the `sites.json` to import is
    damaged. Calls are refused (`site-unreadable`) until it can be."""


class SiteChangePending(SiteListError):
    """A pause, block or resume in force now that the store has not written yet (it is
    written once the store takes it); ``changed`` says whether the state in force changed."""

    def __init__(self, message: str, code: str, changed: bool) -> None:
        super().__init__(message, code)
        self.changed = changed
