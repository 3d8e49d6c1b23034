"""The house's floors, read from the imports of every module: no package imports one above
it, no module takes part in a circle of imports, and the demos import only ``protocol/``.

Imports under ``if TYPE_CHECKING:`` count as well: a type is a dependency too. A package's
``__main__`` (an entry point that only wires) is left out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "byoa_skills"

#: Each part of the package and its floor: a part imports only parts of its floor or below.
FLOORS: dict[str, int] = {
    "cli": 11,
    "commands": 11,
    "bench": 11,
    "serve": 10,
    "directlink": 9,
    "extension": 9,
    "byoag": 9,
    "consent": 8,
    "wallet_shim": 7,
    "skills": 6,
    "recordings": 6,
    "judge": 6,
    "pool": 5,
    "runtimes": 4,
    "models": 3,
    "protocol": 2,
    "wav": 2,
    "store": 2,
    "demos": 11,  # beside the house: the other end of the wire (see DEMOS_MAY_IMPORT)
}
#: What the demos (the other end of the wire) may import of the engine.
DEMOS_MAY_IMPORT = {"protocol", "demos"}


def modules() -> Iterator[tuple[str, Path]]:
    """Every module of the package by dotted name, ``__main__`` modules left out."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def imports_of(path: Path) -> set[str]:
    """The ``byoa_skills`` modules ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] == "byoa_skills"}


def graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports: names that are not modules dropped, and
    a module's own enclosing packages too (Python imports them before the module anyway, so
    ``from byoa_skills.skills import base`` inside ``skills/`` counts as ``skills.base``)."""
    known = dict(modules())
    return {
        name: {
            target
            for target in imports_of(path)
            if target in known and target != name and not name.startswith(target + ".")
        }
        for name, path in known.items()
    }


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_every_part_has_a_floor() -> None:
    parts = {part(name) for name, _ in modules()} - {""}
    assert parts <= set(FLOORS), f"give these a floor: {sorted(parts - set(FLOORS))}"


def test_no_part_imports_one_above_it() -> None:
    upward = sorted(
        f"{source} imports {target}"
        for source, targets in graph().items()
        for target in targets
        if part(source) and part(target) and FLOORS[part(target)] > FLOORS[part(source)]
    )
    assert upward == []


def test_the_demos_import_only_protocol() -> None:
    wrong = sorted(
        f"{source} imports {target}"
        for source, targets in graph().items()
        if part(source) == "demos"
        for target in targets
        if part(target) not in DEMOS_MAY_IMPORT
    )
    assert wrong == []
    sites = {
        t
        for s, ts in graph().items()
        if s.startswith("byoa_skills.demos.platform")
        for t in ts
        if t.startswith("byoa_skills.demos.site")
    }
    assert sites == set(), "the reference platform imports the reference site"


def test_no_circle_of_imports() -> None:
    edges = graph()
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                circles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert circles == [], "\n".join(" -> ".join(circle) for circle in circles[:10])


def test_every_way_in_asks_the_one_grant_decision() -> None:
    """A site's request, a link, a link's return and a platform's registration reach a grant
    only through ``consent/``: no way in makes one itself."""
    edges = graph()
    ways = ("byoa_skills.directlink", "byoa_skills.extension", "byoa_skills.byoag")
    makers = {
        "byoa_skills.consent.offer",
        "byoa_skills.consent.on_my_own",
        "byoa_skills.consent.allow",
        "byoa_skills.consent.fit",
    }
    direct = sorted(
        f"{source} imports {target}"
        for source, targets in edges.items()
        if source.startswith(ways)
        for target in targets & makers
    )
    assert direct == []
    asking = {
        source for source, targets in edges.items() if "byoa_skills.consent.decision" in targets
    }
    assert {
        "byoa_skills.directlink.intake",
        "byoa_skills.directlink.client",
        "byoa_skills.extension.requests",
        "byoa_skills.byoag.scope",
    } <= asking


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from byoa_skills.serve.app import build_app\nimport byoa_skills.wav\n")
    assert imports_of(module) >= {"byoa_skills.serve.app", "byoa_skills.wav"}
