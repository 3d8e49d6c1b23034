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
import webbrowser

log = logging.getLogger("byoa_skills.wallet")

BROWSER_ENV = "BYOA_WALLET_BROWSER"


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
