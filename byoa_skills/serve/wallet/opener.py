"""Opening the wallet page in the visitor's browser.

``$BYOA_WALLET_BROWSER`` decides how: unset, the system's default browser (Python's
``webbrowser``); ``none``, not at all (the URL is only logged); anything else, a command that is
run with the URL as its last argument (e.g. ``firefox --new-window``).
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import threading
import time
import webbrowser
from collections.abc import Callable

log = logging.getLogger("byoa_skills.wallet")

BROWSER_ENV = "BYOA_WALLET_BROWSER"
#: The least time between two openings of the page by :class:`PageOpener`, in seconds.
OPEN_EVERY_SECONDS = 5.0


def open_page(url: str) -> None:
    """Open ``url`` in a browser without waiting for it (a thread does the waiting)."""
    choice = os.environ.get(BROWSER_ENV, "")
    shown = url.split("#", 1)[0]  # the ticket never goes to the log
    if choice.strip().lower() == "none":
        log.info("event=wallet-page-not-opened url=%s", shown)
        return
    log.info("event=wallet-page-open url=%s", shown)
    if choice:
        command = [*shlex.split(choice), url]
        target = lambda: subprocess.run(command, check=False, timeout=60)  # noqa: E731
    else:
        target = lambda: webbrowser.open(url, new=1)  # noqa: E731
    threading.Thread(target=target, name="byoa-open-wallet", daemon=True).start()


class PageOpener:
    """Opens the wallet page at most once every :data:`OPEN_EVERY_SECONDS`, however many
    consents arrive while no page is connected."""

    def __init__(
        self,
        every: float = OPEN_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        opener: Callable[[str], None] = open_page,
    ) -> None:
        self.every = every
        self._clock = clock
        self._opener = opener
        self._last: float | None = None

    def open(self, url: str) -> bool:
        """Open ``url`` unless the page was opened less than :attr:`every` seconds ago;
        whether it was opened."""
        now = self._clock()
        if self._last is not None and now - self._last < self.every:
            log.info("event=wallet-page-open-skipped")
            return False
        self._last = now
        self._opener(url)
        return True
