"""Giving back a mapped file's resident pages: read-only mappings only, their contents kept."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest
from resident import resident_kib

from byoa_skills.runtimes.speech.mapped_pages import drop_resident_pages, read_only_mappings

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/maps")

SIZE = 4 * 2**20


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    path = tmp_path / "weights.bin"
    path.write_bytes(bytes(range(256)) * (SIZE // 256))
    return path


def test_a_read_only_mapping_is_given_back_and_reads_the_same(weights: Path) -> None:
    with open(weights, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
        before = view[:]
        assert len(read_only_mappings(weights)) == 1
        assert resident_kib(weights) == SIZE // 1024
        assert drop_resident_pages(weights) == SIZE
        assert resident_kib(weights) == 0
        assert view[:] == before
        assert len(read_only_mappings(weights)) == 1


def test_a_writable_mapping_is_left_alone(weights: Path) -> None:
    with open(weights, "r+b") as file, mmap.mmap(file.fileno(), 0) as view:
        view[:4] = b"mine"
        view[:]
        assert read_only_mappings(weights) == []
        assert drop_resident_pages(weights) == 0
        assert resident_kib(weights) == SIZE // 1024
        assert view[:4] == b"mine"


def test_a_file_nobody_maps_costs_nothing(tmp_path: Path) -> None:
    assert drop_resident_pages(tmp_path / "absent.bin") == 0
