"""Fixtures of the HTML tests: the peer-comparison helper module, loaded by path (pytest runs
with --import-mode=importlib, so sibling modules are not importable by name)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent


def load_peer_compare() -> ModuleType:
    name = "xyro_tests_html_peer_compare"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "html_peer_compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def peer_compare() -> ModuleType:
    return load_peer_compare()
