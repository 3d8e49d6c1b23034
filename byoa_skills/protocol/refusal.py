"""The one base of every refusal the engine raises: a stable ``code`` and a one-line
``message``, with its HTTP status read from the one table (:mod:`byoa_skills.protocol.codes`).
"""

from __future__ import annotations

from byoa_skills.protocol.codes import status_of


class Refusal(Exception):
    """A refusal: a stable ``code`` (kebab-case, or a binding's own) and a one-line
    ``message``. ``str()`` is ``"code: message"`` unless the subclass passes its own ``text``
    (the one it had before it shared this base)."""

    code: str
    message: str

    def __init__(self, code: str, message: str, *, text: str | None = None) -> None:
        super().__init__(f"{code}: {message}" if text is None else text)
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        """The refusal's HTTP status on the local API (400 for a code the table lacks)."""
        return status_of(self.code)
