"""The derived cache's reading of a model's ``model.bin``: once per process per file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from byoa_skills.runtimes.speech import derived


def test_a_models_digest_is_read_once_while_the_file_stays_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"weights" * 1000)
    reads: list[Path] = []
    real = derived.file_sha256
    monkeypatch.setattr(derived, "file_sha256", lambda path: reads.append(path) or real(path))

    first = derived.model_sha256(model)
    assert first == hashlib.sha256(b"weights" * 1000).hexdigest()
    assert derived.model_sha256(tmp_path / "." / "model.bin") == first
    assert len(reads) == 1  # one reading serves every artefact of the model

    model.write_bytes(b"other weights")  # another size
    assert derived.model_sha256(model) == hashlib.sha256(b"other weights").hexdigest()
    replacement = tmp_path / "new.bin"
    replacement.write_bytes(b"other weightz")  # the same size, a new file put in its place
    stat = model.stat()
    os.replace(replacement, model)
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert derived.model_sha256(model) == hashlib.sha256(b"other weightz").hexdigest()
    assert len(reads) == 3
