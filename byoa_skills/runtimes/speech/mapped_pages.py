"""Letting go of a mapped file's resident pages: OpenVINO maps a compiled model's weights file
and reads it in place, but once a compiled model has run a shape it works from its own
repacked copy of the weights, and the mapping's pages only stay counted in the process's
resident memory. :func:`drop_resident_pages` gives them back to the kernel; a later read of the
mapping faults them in again from the file, so nothing the mapping holds is lost.

Only read-only mappings are touched (a page of them can never differ from the file's); on a
system without ``/proc/self/maps`` or ``madvise`` nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

#: ``madvise``'s advice that the pages are not needed (Linux ``MADV_DONTNEED``).
MADV_DONTNEED = 4
MAPS = "/proc/self/maps"


def read_only_mappings(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """The ``(start, end)`` address ranges of this process's read-only mappings of the file
    ``path``; empty where there are none or ``/proc/self/maps`` cannot be read."""
    wanted = str(Path(path).resolve())
    ranges = []
    try:
        with open(MAPS) as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or fields[5].rstrip("\n") != wanted or "w" in fields[1]:
                    continue
                start, end = (int(address, 16) for address in fields[0].split("-"))
                ranges.append((start, end))
    except OSError:
        return []
    return ranges


def drop_resident_pages(path: str | os.PathLike[str]) -> int:
    """Give back the resident pages of this process's read-only mappings of ``path``, the
    mappings themselves kept; the bytes of address range advised (0 where nothing was done)."""
    ranges = read_only_mappings(path)
    if not ranges:
        return 0
    madvise = _madvise()
    if madvise is None:
        return 0
    dropped = 0
    for start, end in ranges:
        if madvise(start, end - start, MADV_DONTNEED) == 0:
            dropped += end - start
    return dropped


@functools.cache
def _madvise() -> ctypes._CFuncPtr | None:
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise  # type: ignore[no-any-return]
