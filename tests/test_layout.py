"""The import direction of DESIGN.md §1, checked on the source (fails if it is broken)."""

from __future__ import annotations

import ast
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
