"""Checking model files against the catalog: the fast size check and the full SHA-256 check,
and the copy that hashes while it writes."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from byoa_skills.models.catalog import ModelFile, ModelSpec

#: Bytes read at a time while copying or hashing.
CHUNK = 1 << 20

OnBytes = Callable[[int], None]


def size_problems(spec: ModelSpec, folder: Path) -> list[str]:
    """What is wrong with the sizes of the model's files in ``folder`` (empty when every file
    is present with the catalog's size). Reads no file contents."""
    problems = []
    for f in spec.files:
        try:
            size = (folder / f.name).stat().st_size
        except FileNotFoundError:
            problems.append(f"{f.name} is missing")
            continue
        except OSError as exc:
            problems.append(f"{f.name} cannot be read ({exc.strerror})")
            continue
        if size != f.size:
            problems.append(f"{f.name} has {size} bytes, expected {f.size}")
    return problems


def hash_file(path: Path, on_bytes: OnBytes | None = None) -> tuple[int, str]:
    """The size and SHA-256 (hex) of the file at ``path``; ``on_bytes(n)`` after each chunk."""
    digest = hashlib.sha256()
    size = 0
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(path, "rb") as src:
        while n := src.readinto(buffer):
            digest.update(view[:n])
            size += n
            if on_bytes is not None:
                on_bytes(n)
    return size, digest.hexdigest()


def hash_problem(f: ModelFile, path: Path, on_bytes: OnBytes | None = None) -> str | None:
    """What is wrong with the file at ``path`` against its catalog entry ``f`` after reading all
    of it, or ``None`` when its size and SHA-256 match."""
    try:
        size, sha = hash_file(path, on_bytes)
    except FileNotFoundError:
        return f"{f.name} is missing"
    except OSError as exc:
        return f"{f.name} cannot be read ({exc.strerror})"
    if size != f.size:
        return f"{f.name} has {size} bytes, expected {f.size}"
    if sha != f.sha256:
        return f"{f.name} has SHA-256 {sha[:12]}..., expected {f.sha256[:12]}..."
    return None


def copy_and_hash(
    pieces: Sequence[Path], dest: Path, on_bytes: OnBytes | None = None
) -> tuple[int, str]:
    """Write the concatenation of ``pieces`` to the new file ``dest`` (which must not exist),
    flush it to disk, and return its size and SHA-256 (hex) computed from the same bytes."""
    digest = hashlib.sha256()
    size = 0
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(dest, "xb") as out:
        for piece in pieces:
            with open(piece, "rb") as src:
                while n := src.readinto(buffer):
                    digest.update(view[:n])
                    out.write(view[:n])
                    size += n
                    if on_bytes is not None:
                        on_bytes(n)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (new names, renames) to disk where the platform allows it."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
