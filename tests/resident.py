"""How much of a mapped file this process holds in memory, as ``/proc/self/smaps`` tells it."""

from __future__ import annotations

from pathlib import Path


def resident_kib(path: Path) -> int | None:
    """The resident KiB of this process's mappings of ``path``; None where it maps none."""
    found, total, inside = False, 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                inside = len(fields) > 5 and fields[5] == str(path.resolve())
                found |= inside
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total if found else None
