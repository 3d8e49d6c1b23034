"""The uploads held before their turn: being received, or received and waiting for the gate.

Each holds its bytes, so the line is bounded twice: by how many uploads it holds and by their
bytes. An upload takes its place before its body is read (``uploads-full`` at once when the
line holds its count), and its bytes are counted as they arrive, a ``Content-Length`` as soon
as it is known (``uploads-full`` as soon as they pass the line's bytes). An upload alone in
the line is always taken, so a file within the size limit is never refused for its size
alone. It leaves the line when its turn comes, or when it ends before.
"""

from __future__ import annotations

from byoa_skills.recordings.errors import RecordingError

#: Uploads held at once by default, and their bytes.
DEFAULT_WAITING = 8
DEFAULT_WAITING_BYTES = 100 * 1024 * 1024


class UploadLine:
    """At most ``count`` uploads held before their turn, holding at most ``max_bytes`` in all
    (one alone may hold more). :attr:`held` and :attr:`bytes` say what it holds now."""

    def __init__(self, count: int = DEFAULT_WAITING, max_bytes: int = DEFAULT_WAITING_BYTES):
        for name, value in (("count", count), ("max_bytes", max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        self.count = count
        self.max_bytes = max_bytes
        self._places: set[Place] = set()

    @property
    def held(self) -> int:
        """Uploads in the line now."""
        return len(self._places)

    @property
    def bytes(self) -> int:
        """The bytes the uploads in the line hold (or said they would, by ``Content-Length``)."""
        return sum(place.size for place in self._places)

    def enter(self, size: int = 0) -> Place:
        """A place for one more upload of at least ``size`` bytes (its ``Content-Length``, 0
        when not known). Raises :class:`RecordingError` ``uploads-full`` when the line holds
        :attr:`count` uploads, or when ``size`` does not fit beside what it holds."""
        if len(self._places) >= self.count:
            raise _full(f"{self.count} uploads are waiting")
        place = Place(self)
        self._places.add(place)
        try:
            place.grow(size)
        except RecordingError:
            place.leave()
            raise
        return place

    def _fits(self, place: Place, size: int) -> bool:
        others = sum(other.size for other in self._places if other is not place)
        return others == 0 or others + size <= self.max_bytes


class Place:
    """One upload's place in an :class:`UploadLine`: the bytes it holds, until it leaves."""

    def __init__(self, line: UploadLine) -> None:
        self._line: UploadLine | None = line
        self.size = 0

    def grow(self, size: int) -> None:
        """The upload holds ``size`` bytes now (never fewer than before). Raises
        :class:`RecordingError` ``uploads-full`` when they do not fit beside the others';
        nothing once the place is left."""
        line = self._line
        if line is None or size <= self.size:
            return
        if not line._fits(self, size):
            raise _full(f"the uploads waiting hold {line.max_bytes / 2**20:g} MB")
        self.size = size

    def leave(self) -> None:
        """Leave the line (its turn came, or it ended); again does nothing."""
        if self._line is not None:
            self._line._places.discard(self)
            self._line = None


def _full(why: str) -> RecordingError:
    return RecordingError("uploads-full", f"{why}; try again once one is done")
