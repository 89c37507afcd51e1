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
        if path.relative_to(root).as_posix() == "xyro/crawl/frontier.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if FRONTIER_OPS.search(code) or BARE_QUEUEING.search(code):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return found


def test_only_the_frontier_records_frontier_moves() -> None:
    bad = frontier_bypasses(ROOT)
    assert not bad, ("only xyro/crawl/frontier.py may build Enqueue/Dequeue/Refuse ops or call the "
                     f"bare frontier.push/load (DESIGN.md §2): {bad}")


def test_frontier_bypass_check_finds_one(tmp_path: Path) -> None:
    (tmp_path / "xyro" / "crawl").mkdir(parents=True)
    (tmp_path / "xyro" / "crawl" / "frontier.py").write_text("Enqueue(url, 1)\n")
    (tmp_path / "xyro" / "daemon.py").write_text(
        "x = 1  # Enqueue( in a comment is fine\nsubmit(Enqueue(url, 2))\n"
        "self.frontier.push(url, 2)\n")
    assert [b.split(":")[1] for b in frontier_bypasses(tmp_path)] == ["2", "3"]


# Inside xyro/ (DESIGN.md §1): packages from top to bottom; each imports only those below
# it. Under them the shared leaves (which import only each other); synthweb is a side package
# (imports only the leaves; only cli and service, for the demo, import it); __main__ is the
# entry point. Imports inside functions count too: a lazy import is still a dependency.
XYRO_LAYERS = ["cli", "service", "jobs", "app", "crawl", "publication", "loader", "content",
               "net"]
SHARED_LEAVES = {"__init__", "config", "config_load", "config_yaml", "clock", "errors", "records",
                 "media_types",
                 "affinity"}
SIDE = {"synthweb": {"cli", "service"}}
ENTRY = {"__main__"}


def xyro_module_names(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "xyro").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def xyro_imports(path: Path, module: str, known: dict[str, Path]) -> set[str]:
    """The xyro modules ``path`` imports (a ``from P import m`` of a submodule m is P.m)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "xyro")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "xyro":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m in known}


def group_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_violations(root: Path) -> list[str]:
    known = xyro_module_names(root)
    rank = {g: i for i, g in enumerate(XYRO_LAYERS)}
    bottom = len(XYRO_LAYERS)
    bad = []
    for module, path in known.items():
        group = group_of(module)
        if group not in rank and group not in SHARED_LEAVES and group not in SIDE \
                and group not in ENTRY:
            bad.append(f"{module}: not in any layer (place it in a package, DESIGN.md §1)")
            continue
        for target in sorted(xyro_imports(path, module, known)):
            tgroup = group_of(target)
            if tgroup == group or group in ENTRY:
                continue
            if tgroup in SIDE:
                ok = group in SIDE[tgroup]
            elif group in SIDE:
                ok = tgroup in SHARED_LEAVES
            elif group in SHARED_LEAVES:
                ok = tgroup in SHARED_LEAVES
            else:
                ok = rank.get(tgroup, bottom if tgroup in SHARED_LEAVES else -1) > rank[group]
            if not ok:
                bad.append(f"{module} imports {target}")
    return bad


def import_cycles(root: Path) -> list[list[str]]:
    known = xyro_module_names(root)
    graph = {m: xyro_imports(p, m, known) - {m} for m, p in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:   # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_xyro_layers() -> None:
    bad = layer_violations(ROOT)
    assert not bad, ("xyro packages import only those below them: " + " > ".join(XYRO_LAYERS)
                     + f" > shared leaves (DESIGN.md §1): {bad}")


def test_no_import_cycle_in_xyro() -> None:
    assert not import_cycles(ROOT), f"import cycles among xyro modules: {import_cycles(ROOT)}"


def test_layer_checker_finds_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    for pkg in ("net", "crawl", "synthweb"):
        (tmp_path / "xyro" / pkg).mkdir(parents=True)
        (tmp_path / "xyro" / pkg / "__init__.py").write_text("")
    (tmp_path / "xyro" / "__init__.py").write_text("")
    (tmp_path / "xyro" / "clock.py").write_text("import os\n")
    (tmp_path / "xyro" / "net" / "fetcher.py").write_text(
        "from xyro.crawl import frontier\nfrom xyro.clock import now\n")
    (tmp_path / "xyro" / "crawl" / "frontier.py").write_text(
        "def f():\n    from xyro.net.fetcher import Fetcher\n")
    (tmp_path / "xyro" / "synthweb" / "web.py").write_text("from xyro.net import fetcher\n")
    (tmp_path / "xyro" / "stray.py").write_text("")
    assert sorted(layer_violations(tmp_path)) == [
        "xyro.net.fetcher imports xyro.crawl.frontier",
        "xyro.stray: not in any layer (place it in a package, DESIGN.md §1)",
        "xyro.synthweb.web imports xyro.net.fetcher",
    ]
    assert import_cycles(tmp_path) == [["xyro.crawl.frontier", "xyro.net.fetcher"]]
