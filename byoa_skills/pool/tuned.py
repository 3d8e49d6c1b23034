"""The layout measured for this machine (``byoa-bench tune``), kept in the user's config.

One file, ``layout.json`` in the config folder, holds one chosen layout per model and device:
workers, threads per worker and batch size, with the cores it was measured on and what was
measured. ``serve`` starts with it when its flags leave the layout out; a layout measured on
another number of cores, or a damaged file, is not used (the defaults are, and the log says
why).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from byoa_skills.pool.config import available_cores, check_setting
from byoa_skills.store.files import write_private
from byoa_skills.store.paths import config_dir

log = logging.getLogger(__name__)

#: The file's name in the config folder.
FILE_NAME = "layout.json"


@dataclass(frozen=True)
class TunedLayout:
    """A layout chosen by measurement: how many workers, threads each, calls per batch."""

    workers: int
    threads: int
    max_batch: int
    #: The cores the machine had when it was measured.
    cores: int
    #: When it was measured (ISO 8601, UTC).
    measured_at: str = ""
    #: What each candidate gave (for the record; not read back).
    figures: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_setting("workers", self.workers)
        check_setting("threads_per_worker", self.threads)
        check_setting("max_batch", self.max_batch)
        check_setting("workers", self.cores)

    def describe(self) -> str:
        """``2x1 b1``: workers x threads, batch (:func:`layout_name`)."""
        return layout_name(self.workers, self.threads, self.max_batch)


def layout_name(workers: int, threads: int, batch: int) -> str:
    """A layout's short name, ``2x1 b1``: workers x threads per worker, batch size."""
    return f"{workers}x{threads} b{batch}"


def layout_path() -> Path:
    """Where the tuned layouts are kept."""
    return config_dir() / FILE_NAME


def _key(model: str, device: str) -> str:
    return f"{model}@{device}"


def _read_all(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as error:
        log.warning("event=tuned-layout-unreadable path=%s reason=%s", path, error)
        return {}
    layouts = data.get("layouts") if isinstance(data, dict) else None
    return layouts if isinstance(layouts, dict) else {}


def read_tuned(model: str, device: str, path: Path | None = None) -> TunedLayout | None:
    """The layout measured for ``model`` on ``device``, or None when none was, when the file
    is damaged, or when it was measured on another number of cores."""
    path = path or layout_path()
    entry = _read_all(path).get(_key(model, device))
    if not isinstance(entry, dict):
        return None
    try:
        layout = TunedLayout(**entry)
    except (TypeError, ValueError) as error:
        log.warning("event=tuned-layout-unreadable path=%s reason=%s", path, error)
        return None
    if layout.cores != available_cores():
        log.info(
            "event=tuned-layout-stale measured_cores=%d cores=%d: run byoa-bench tune again",
            layout.cores,
            available_cores(),
        )
        return None
    return layout


def write_tuned(model: str, device: str, layout: TunedLayout, path: Path | None = None) -> Path:
    """Keep ``layout`` for ``model`` on ``device`` (the others in the file stay); atomic, 0600."""
    path = path or layout_path()
    layouts = _read_all(path)
    entry = asdict(layout)
    entry["measured_at"] = layout.measured_at or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    layouts[_key(model, device)] = entry
    text = json.dumps({"layouts": layouts}, indent=2, sort_keys=True) + "\n"
    write_private(path, text.encode("utf-8"))
    return path
