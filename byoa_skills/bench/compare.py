"""``--compare OLD.json``: the change of each headline figure against an earlier run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table


def load(path: Path) -> dict[str, Any]:
    """An earlier run's ``results.json``."""
    return json.loads(Path(path).read_text())


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per headline figure in either run: old and new value, relative change, and
    whether the change is for the better (``None`` when a side is missing or unchanged)."""
    old_h, new_h = old.get("headline", {}), new.get("headline", {})
    rows = []
    for key in list(new_h) + [k for k in old_h if k not in new_h]:
        before, after = old_h.get(key), new_h.get(key)
        figure = after or before
        row: dict[str, Any] = {
            "key": key,
            "label": figure["label"],
            "unit": figure["unit"],
            "old": before["value"] if before else None,
            "new": after["value"] if after else None,
            "change": None,
            "better": None,
        }
        if before and after and before["value"]:
            change = (after["value"] - before["value"]) / abs(before["value"])
            row["change"] = change
            if change:
                row["better"] = (change > 0) == (figure["better"] == "higher")
        rows.append(row)
    return rows


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def table(rows: list[dict[str, Any]], title: str = "Against the earlier run") -> Table:
    """The rows as a rich table: green for better, red for worse."""
    out = Table(title=title)
    for column in ("figure", "unit", "old", "new", "change"):
        out.add_column(column, justify="left" if column in ("figure", "unit") else "right")
    for row in rows:
        change = "-" if row["change"] is None else f"{row['change']:+.1%}"
        style = {True: "green", False: "red"}.get(row["better"], "")
        out.add_row(
            row["label"],
            row["unit"],
            _number(row["old"]),
            _number(row["new"]),
            f"[{style}]{change}[/]" if style else change,
        )
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    lines = ["| figure | unit | old | new | change |", "|---|---|---|---|---|"]
    for row in rows:
        change = "-" if row["change"] is None else f"{row['change']:+.1%}"
        lines.append(
            f"| {row['label']} | {row['unit']} | {_number(row['old'])} | "
            f"{_number(row['new'])} | {change} |"
        )
    return "\n".join(lines)
