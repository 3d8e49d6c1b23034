"""Where the running engine listens, kept in the home it serves, and how a command finds it.

``serve`` writes ``engines/PID.json`` (address, port, pid, the process's start time) in the
data folder once it is bound, and removes it when it stops (one file per engine, so that a
second engine on the same home never removes the first one's). Every command that talks to
the engine (``sites``, ``sites limits``, ``wallet``, ``connect``) finds it there with
:func:`locate_engine`: a record whose process is gone, or whose port answers as another
program, is *stale* and is said as such; ``--port`` overrides the record.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from byoa_skills.store import paths
from byoa_skills.store.files import write_private

RECORDS_FOLDER = "engines"


def records_folder() -> Path:
    """Where the records live: ``engines`` in the data folder of the home the engine serves."""
    return paths.data_dir() / RECORDS_FOLDER


def _process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" where ``/proc`` cannot say), so
    a pid used again by another program is not taken for the engine."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rindex(")") + 2 :].split()[19]


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive, and not this user's engine
    return not started or _process_start(pid) in ("", started)


@dataclass(frozen=True)
class EngineRecord:
    """Where one engine listens: ``host`` and ``port``, its ``pid`` and the pid's start time."""

    host: str
    port: int
    pid: int
    started: str = ""

    @property
    def url(self) -> str:
        """The engine's base URL (``http://127.0.0.1:8787``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        """What the file holds."""
        return {"host": self.host, "port": self.port, "pid": self.pid, "started": self.started}

    @classmethod
    def this_process(cls, host: str, port: int) -> EngineRecord:
        """The record of the engine this process runs, bound to ``host``:``port``."""
        return cls(host, port, os.getpid(), _process_start(os.getpid()))


def write_record(record: EngineRecord, folder: Path | None = None) -> Path:
    """Write the record (atomic, readable by the user only); where it was written."""
    path = (folder or records_folder()) / f"{record.pid}.json"
    write_private(path, json.dumps(record.to_json()).encode())
    return path


def remove_record(record: EngineRecord, folder: Path | None = None) -> None:
    """Remove this engine's record."""
    with contextlib.suppress(OSError):
        ((folder or records_folder()) / f"{record.pid}.json").unlink()


def read_records(folder: Path | None = None) -> list[tuple[Path, EngineRecord]]:
    """The records and their files, the newest first; a file that is not one is skipped."""
    found = []
    for path in (folder or records_folder()).glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = EngineRecord(
                str(data["host"]), int(data["port"]), int(data["pid"]), str(data["started"])
            )
            found.append((path.stat().st_mtime, path, record))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return [(path, record) for _, path, record in sorted(found, key=lambda f: -f[0])]


@dataclass(frozen=True)
class EngineLocation:
    """What a command found: ``url`` of an engine that answered (None: none to talk to), or
    why not: ``state`` is ``running``, ``none`` (no engine runs: no record, or nothing
    answers on the ``--port`` given), ``stale`` (a record whose engine is gone) or
    ``unreachable`` (the engine's process runs but its port does not answer as it);
    ``message`` says it in a line."""

    state: str
    message: str
    url: str | None = None

    @property
    def running(self) -> bool:
        """Whether an engine answered and can be told."""
        return self.state == "running"


async def _health(url: str) -> dict[str, Any] | None:
    """The engine's ``/health`` answer, or None when nothing answers there as an engine."""
    timeout = aiohttp.ClientTimeout(total=10)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{url}/health") as response,
        ):
            answer = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError, OSError):
        return None
    return answer if isinstance(answer, dict) and answer.get("ok") is True else None


async def locate_engine(port: int | None = None, folder: Path | None = None) -> EngineLocation:
    """Find the engine this home's commands talk to: on ``port`` when given (127.0.0.1),
    else where a record says (the newest engine that answers). A record whose process is
    gone is stale: it is removed and said."""
    records = read_records(folder)
    if port is not None:
        url = f"http://127.0.0.1:{port}"
        if await _health(url) is not None:
            return EngineLocation("running", f"the engine on port {port}", url)
        for _, record in records:
            if record.port != port and _alive(record.pid, record.started):
                return EngineLocation(
                    "unreachable",
                    f"no engine answers on port {port}, but this home's engine runs at "
                    f"{record.url} (pid {record.pid})",
                )
        return EngineLocation("none", f"no engine answers on port {port}")
    silent: EngineLocation | None = None
    stale: EngineLocation | None = None
    for path, record in records:
        where = f"{record.url} (pid {record.pid})"
        if not _alive(record.pid, record.started):
            with contextlib.suppress(OSError):
                path.unlink()
            stale = EngineLocation("stale", f"no engine running: the record of {where} was stale")
            continue
        health = await _health(record.url)
        if health is None:
            silent = silent or EngineLocation(
                "unreachable", f"the engine at {where} does not answer"
            )
        elif health.get("pid") != record.pid:
            stale = EngineLocation(
                "stale",
                f"no engine running: {record.url} answers as pid {health.get('pid')}, "
                f"not the recorded engine (pid {record.pid})",
            )
        else:
            return EngineLocation("running", f"the engine at {where}", record.url)
    return silent or stale or EngineLocation("none", "no engine running")
