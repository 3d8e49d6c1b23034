"""The derived cache's reading of a model's ``model.bin``: once per process per file."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from byoa_skills.runtimes.speech import derived


def settle(path: Path, seconds_ago: int = 3600) -> None:
    """Give ``path`` the modification time of a file written ``seconds_ago``, as an installed
    model's is."""
    then = (int(time.time()) - seconds_ago) * 10**9
    os.utime(path, ns=(then, then))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file ``derived`` reads to hash it, from now on."""
    seen: list[Path] = []
    real = derived.file_sha256
    monkeypatch.setattr(derived, "file_sha256", lambda path: seen.append(path) or real(path))
    return seen


def test_a_models_digest_is_read_once_while_the_file_stays_the_same(
    tmp_path: Path, reads: list[Path]
) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"weights" * 1000)
    settle(model)

    first = derived.model_sha256(model)
    assert first == hashlib.sha256(b"weights" * 1000).hexdigest()
    assert derived.model_sha256(tmp_path / "." / "model.bin") == first
    assert len(reads) == 1  # one reading serves every artefact of the model

    model.write_bytes(b"other weights")  # another size
    settle(model)
    assert derived.model_sha256(model) == hashlib.sha256(b"other weights").hexdigest()
    replacement = tmp_path / "new.bin"
    replacement.write_bytes(b"other weightz")  # the same size, a new file put in its place
    stat = model.stat()
    os.replace(replacement, model)
    settle(model)
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert derived.model_sha256(model) == hashlib.sha256(b"other weightz").hexdigest()
    assert len(reads) == 3


def test_a_file_written_twice_within_one_tick_gives_its_second_digest(
    tmp_path: Path, reads: list[Path]
) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"weights one")
    written = model.stat()
    assert derived.model_sha256(model) == hashlib.sha256(b"weights one").hexdigest()
    # the same size, the same inode, and (as a second write within the clock's tick leaves
    # it) the same modification time
    with model.open("r+b") as file:
        file.write(b"weights two")
    os.utime(model, ns=(written.st_atime_ns, written.st_mtime_ns))
    assert model.stat().st_ino == written.st_ino
    assert derived.model_sha256(model) == hashlib.sha256(b"weights two").hexdigest()

    settle(model)  # settled: kept from now on
    before = len(reads)
    assert derived.model_sha256(model) == derived.model_sha256(model)
    assert len(reads) == before + 1
