"""Files derived from a model's ``model.bin`` (the OpenVINO encoder graph, the torch weights),
kept in this installation's own cache folder and trusted only there.

An artefact ``NAME`` of the model whose ``model.bin`` has SHA-256 ``S`` lives in
``<derived>/S[:16]/``, where ``<derived>`` is ``$BYOA_SKILLS_DERIVED`` when set, else
``<cache>/derived`` (``<cache>`` is the user's cache folder, ``$BYOA_SKILLS_HOME/cache`` when
set), made with mode 0700; a folder there owned by another user or writable by every user
is refused (:class:`~byoa_skills.store.files.UnsafePathError`), and nothing is cached. Its
record ``NAME.json`` says the format, ``S`` and each file's SHA-256. Nothing is read from
beside ``model.bin``: whoever can write a shared model folder cannot choose what runs. A record
of another format, of another ``model.bin`` or whose files differ from it (a damaged or
truncated file) is rebuilt, never used; building runs under a lock, so workers starting
together build once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byoa_skills.models.verify import hash_file
from byoa_skills.store import paths
from byoa_skills.store.files import locked, private_folder, write_private

log = logging.getLogger("byoa_skills.runtimes")

#: The folder of every derived artefact, in the user's cache folder.
DERIVED_FOLDER = "derived"
#: The environment variable that names another folder for them (one home's engines and
#: another's may share the int8 encoder, which takes tens of seconds to build).
DERIVED_ENV = "BYOA_SKILLS_DERIVED"


def derived_root() -> Path:
    """The folder of every derived artefact (not made here)."""
    named = os.environ.get(DERIVED_ENV, "")
    return Path(named).expanduser().absolute() if named else paths.cache_dir() / DERIVED_FOLDER


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file's bytes (the model cache's own :func:`hash_file`)."""
    return hash_file(Path(path))[1]


_MODEL_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}
#: A file modified less than this long before it is read may still be written within the same
#: tick of the file system's clock (same size, same mtime), so its digest is not kept.
SETTLED_SECONDS = 2.0


def model_sha256(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a model's ``model.bin``, read once per process for as long as the
    file is the same one (its device, inode, size and modification time): a worker start
    checks several derived artefacts of one model against one reading of its bytes. A file
    modified within :data:`SETTLED_SECONDS` of the reading is read again each time: a second
    write within the clock's tick would leave its size and time as they were."""
    resolved = Path(path).resolve()
    facts = resolved.stat()
    key = (str(resolved), facts.st_dev, facts.st_ino, facts.st_size, facts.st_mtime_ns)
    known = _MODEL_DIGESTS.get(key)
    if known is not None:
        return known
    digest = file_sha256(resolved)
    if time.time_ns() - facts.st_mtime_ns >= SETTLED_SECONDS * 1e9:
        _MODEL_DIGESTS[key] = digest
    return digest


@dataclass(frozen=True)
class DerivedArtefact:
    """One kind of artefact: its ``name`` (the record is ``NAME.json``), the ``files`` it is
    made of, its ``format`` (bumped whenever the way it is made changes), and the
    ``subfolder`` of the model's folder it keeps its files in ("": that folder itself; one of
    its own where its files' names are generic, such as ``model.bin``)."""

    name: str
    files: tuple[str, ...]
    format: int
    subfolder: str = ""

    def folder(self, source_sha256: str) -> Path:
        """Where the artefact of that ``model.bin`` lives, made private now. Raises
        ``OSError`` (``UnsafePathError`` among them) when it cannot be used."""
        root = private_folder(derived_root())
        folder = private_folder(root / source_sha256[:16])
        return private_folder(folder / self.subfolder) if self.subfolder else folder

    @contextlib.contextmanager
    def building(self, source_sha256: str) -> Iterator[Path]:
        """The artefact's folder, locked against other processes for the time of the
        ``with`` block. Raises ``OSError`` when it cannot be used."""
        folder = self.folder(source_sha256)
        with locked(folder / f".{self.name}.lock"):
            yield folder

    def problem(self, folder: Path, source_sha256: str, recipe: str = "") -> str | None:
        """Why the artefact in ``folder`` cannot be used (logged, except one not made yet),
        or None when it matches its record, ``model.bin`` and ``recipe`` (what else it was
        made from, as one string: a changed recipe rebuilds)."""
        return self._checked(folder, source_sha256, recipe)[1]

    def record(self, folder: Path, source_sha256: str, recipe: str = "") -> dict[str, Any] | None:
        """The artefact's record where :meth:`problem` finds none, else None."""
        return self._checked(folder, source_sha256, recipe)[0]

    def _checked(
        self, folder: Path, source_sha256: str, recipe: str
    ) -> tuple[dict[str, Any] | None, str | None]:
        try:
            record = json.loads((folder / f"{self.name}.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, "not built yet"
        except (OSError, ValueError) as error:
            return None, self._stale(folder, f"unreadable record: {error}")
        if not isinstance(record, dict) or record.get("format") != self.format:
            return None, self._stale(folder, "a record of another format")
        if record.get("source_sha256") != source_sha256:
            return None, self._stale(folder, "model.bin changed since the build")
        if record.get("recipe", "") != recipe:
            return None, self._stale(folder, "made another way (its recipe changed)")
        listed = record.get("files")
        for name in self.files:
            try:
                digest = file_sha256(folder / name)
            except OSError as error:
                return None, self._stale(folder, f"{name} unreadable: {error}")
            if not isinstance(listed, dict) or listed.get(name) != digest:
                return None, self._stale(folder, f"{name} differs from its record")
        return record, None

    def write(
        self,
        folder: Path,
        source_sha256: str,
        files: Mapping[str, bytes],
        recipe: str = "",
        **facts: Any,
    ) -> int:
        """Write the files (atomically, mode 0600), then the record that vouches for them
        (with ``recipe``, which :meth:`problem` compares); the bytes written."""
        for name, data in files.items():
            write_private(folder / name, data)
        record = {
            "format": self.format,
            "source": "model.bin",
            "source_sha256": source_sha256,
            **({"recipe": recipe} if recipe else {}),
            **facts,
            "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
            "bytes": sum(len(data) for data in files.values()),
        }
        text = json.dumps(record, indent=2) + "\n"
        write_private(folder / f"{self.name}.json", text.encode())
        log.info(
            "event=derived-written name=%s folder=%s bytes=%d", self.name, folder, record["bytes"]
        )
        return int(record["bytes"])

    def _stale(self, folder: Path, reason: str) -> str:
        log.warning("event=derived-rebuilt name=%s folder=%s reason=%r", self.name, folder, reason)
        return reason
