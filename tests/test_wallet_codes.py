"""The wallet page says each code in words: every code the engine can record (an activity
entry's outcome, a call consent's reasons, a store problem, a text source's problem) has a
short plain sentence in the page's one table (``CODE_SENTENCES`` in
``byoa_skills/serve/wallet/static/app.js``), and the table names no code the engine does not
have.

The codes come from two places: the lists the engine exports (``byoa_skills.wav.CODES``,
``byoa_skills.runtimes.text.CODES``, the store's problems, the one table of statuses (less
the codes only a route answers), the pool's own, the frames', the recordings', the direct
link's endings, the reference gate's reasons), and the docs' tables whose column is headed
``code`` or ``outcome``.
"""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

import bringyourownagent.gate

from byoa_skills.directlink import client as link_client
from byoa_skills.pool import errors as pool_errors
from byoa_skills.protocol import codes as protocol_codes
from byoa_skills.protocol import frames, serving
from byoa_skills.recordings import CODES as RECORDING_CODES
from byoa_skills.runtimes.text import CODES as TEXT_CODES
from byoa_skills.store.problems import STORE_CODES
from byoa_skills.wav import CODES as WAV_CODES

ROOT = Path(__file__).resolve().parent.parent
APP_JS = ROOT / "byoa_skills" / "serve" / "wallet" / "static" / "app.js"
#: The docs whose tables list codes a site, a client or the visitor can meet in Activity.
CODE_DOCS = (
    "api.md",
    "extension.md",
    "consent.md",
    "reliability.md",
    "activity-and-sites.md",
    "text.md",
    "wav.md",
    "link.md",
    "direct-link.md",
    "openai.md",
    "shim.md",
    "models-block.md",
)
#: A code as the engine writes one: kebab-case, lower case.
CODE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
#: Words in backticks in a table's code column that are not outcomes: an activity entry's field
#: (``codes``) and the words it may hold for ``asks-for-more`` (consent.md's "word" table).
NOT_CODES = frozenset({"codes", "budget", "language"})


def page_table() -> dict[str, str]:
    """``CODE_SENTENCES`` as app.js writes it: one ``'code': 'sentence',`` a line."""
    text = APP_JS.read_text()
    block = re.search(
        r"^const CODE_SENTENCES = Object\.freeze\(\{\n(.*?)^\}\);",
        text,
        flags=re.MULTILINE | re.DOTALL,
    )
    assert block, "app.js has no CODE_SENTENCES table"
    table: dict[str, str] = {}
    for line in block.group(1).splitlines():
        if not line.strip() or line.strip().startswith("//"):
            continue
        entry = re.fullmatch(r"  '([a-z0-9-]+)': '((?:[^'\\]|\\.)+)',", line)
        assert entry, f"not a table line: {line!r}"
        assert entry.group(1) not in table, f"{entry.group(1)} twice"
        table[entry.group(1)] = entry.group(2).replace("\\'", "'")
    return table


def exported_codes() -> dict[str, set[str]]:
    """The codes the engine's modules list, by where they come from."""
    gate_source = inspect.getsource(bringyourownagent.gate)
    failures = [
        kind.code
        for kind in vars(pool_errors).values()
        if isinstance(kind, type) and issubclass(kind, pool_errors.CallFailure)
    ]
    return {
        "byoa_skills.wav.CODES": set(WAV_CODES),
        "byoa_skills.runtimes.text.CODES": set(TEXT_CODES),
        "byoa_skills.store.problems.STORE_CODES": set(STORE_CODES),
        "byoa_skills.protocol.codes.HTTP_STATUS": set(protocol_codes.HTTP_STATUS)
        - protocol_codes.ROUTE_CODES,
        "byoa_skills.protocol.frames.CODES": set(frames.CODES),
        "byoa_skills.recordings.CODES": set(RECORDING_CODES),
        "the pool's failures": set(failures),
        "the direct link's endings": set(typing.get_args(serving.Ending))
        | {link_client.TOO_MANY_PENDING_CODE},
        "the reference gate's reasons": set(
            re.findall(r'(?:add|_reason)\(\s*"([a-z0-9-]+)"', gate_source)
        )
        | set(re.findall(r'"code"\) or "([a-z0-9-]+)"', gate_source)),
    }


def documented_codes() -> dict[str, set[str]]:
    """The codes of every docs table column headed ``code``, ``code / close`` or ``outcome``,
    by file."""
    found: dict[str, set[str]] = {}
    for name in CODE_DOCS:
        lines = (ROOT / "docs" / name).read_text().splitlines()
        codes: set[str] = set()
        columns: list[int] = []
        for at, line in enumerate(lines):
            if not line.startswith("|"):
                columns = []
                continue
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            below = lines[at + 1] if at + 1 < len(lines) else ""
            if re.fullmatch(r"\|[-| :]+\|", below) and not re.fullmatch(r"\|[-| :]+\|", line):
                headings = [cell.lower() for cell in cells]
                columns = [
                    i
                    for i, cell in enumerate(headings)
                    if cell.startswith("code") or cell == "outcome"
                ]
                continue
            for i in columns:
                for word in re.findall(r"`([^`]+)`", cells[i] if i < len(cells) else ""):
                    if CODE.fullmatch(word) and word not in NOT_CODES:
                        codes.add(word)
        found[name] = codes
    return found


def engine_strings() -> set[str]:
    """Every quoted kebab-case string in the engine's sources and the reference gate's."""
    texts = [path.read_text() for path in (ROOT / "byoa_skills").rglob("*.py")]
    texts.append(inspect.getsource(bringyourownagent.gate))
    return {word for text in texts for word in re.findall(r"[\"']([a-z][a-z0-9-]*)[\"']", text)}


def test_the_docs_tables_are_read() -> None:
    documented = documented_codes()
    assert documented["wav.md"] == set(WAV_CODES)
    assert set(TEXT_CODES) <= documented["text.md"]
    assert set(STORE_CODES) == documented["activity-and-sites.md"]
    assert {"no-click", "asks-for-more", "no-answer"} <= documented["extension.md"]


def test_every_code_the_engine_exports_has_a_sentence() -> None:
    table = page_table()
    missing = {where: sorted(codes - set(table)) for where, codes in exported_codes().items()}
    assert missing == {where: [] for where in missing}


def test_every_code_the_docs_list_has_a_sentence() -> None:
    table = page_table()
    missing = {name: sorted(codes - set(table)) for name, codes in documented_codes().items()}
    assert missing == {name: [] for name in missing}


def test_the_table_names_only_codes_the_engine_has() -> None:
    known = engine_strings()
    for codes in (*exported_codes().values(), *documented_codes().values()):
        known |= codes
    assert sorted(set(page_table()) - known) == []


def test_each_sentence_is_one_short_plain_sentence() -> None:
    for code, sentence in page_table().items():
        assert len(sentence) <= 100, code
        assert sentence[0].isupper() and sentence.endswith("."), code
