"""The import direction of DESIGN.md §1, checked on the source (fails if it is broken)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "ranking": {"xyro", "metadata", "refresh", "requests", "sqlite3", "sqlite_utils", "lxml"},
    "refresh": {"xyro", "metadata", "ranking", "requests", "sqlite3", "sqlite_utils", "lxml"},
    "metadata": {"xyro", "ranking", "refresh", "requests"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package}/ has no Python files"
    bad = {
        str(f.relative_to(ROOT)): sorted(imported_roots(f) & FORBIDDEN[package])
        for f in files
        if imported_roots(f) & FORBIDDEN[package]
    }
    assert not bad, f"{package} must not import these (DESIGN.md §1): {bad}"


def test_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import sqlite3\nfrom xyro.clock import WallClock\n")
    assert {"sqlite3", "xyro"} <= imported_roots(bad)


def test_top_level_layout() -> None:
    for name in ["pyproject.toml", "README.md", "LICENSE", ".ci/run", "xyro", "metadata",
                 "refresh", "ranking", "config/xyro.yaml", "tests", "systemd"]:
        assert (ROOT / name).exists(), f"{name} is missing from the top level"


# The frontier is the single owner of queued work (DESIGN.md §2): only it (and metadata/,
# which defines and applies them) builds the writer's frontier ops, and no engine code
# queues behind its back with the bare in-memory push/load.
FRONTIER_OPS = re.compile(r"\b(Enqueue|Dequeue|Refuse)\(")
BARE_QUEUEING = re.compile(r"\bfrontier\.(push|load)\(")


def frontier_bypasses(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "xyro").rglob("*.py")):
        if path.relative_to(root).as_posix() == "xyro/frontier.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if FRONTIER_OPS.search(code) or BARE_QUEUEING.search(code):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return found


def test_only_the_frontier_records_frontier_moves() -> None:
    bad = frontier_bypasses(ROOT)
    assert not bad, ("only xyro/frontier.py may build Enqueue/Dequeue/Refuse ops or call the "
                     f"bare frontier.push/load (DESIGN.md §2): {bad}")


def test_frontier_bypass_check_finds_one(tmp_path: Path) -> None:
    (tmp_path / "xyro").mkdir()
    (tmp_path / "xyro" / "frontier.py").write_text("Enqueue(url, 1)\n")
    (tmp_path / "xyro" / "daemon.py").write_text(
        "x = 1  # Enqueue( in a comment is fine\nsubmit(Enqueue(url, 2))\n"
        "self.frontier.push(url, 2)\n")
    assert [b.split(":")[1] for b in frontier_bypasses(tmp_path)] == ["2", "3"]
