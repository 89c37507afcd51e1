"""Fixtures for the configuration tests: real YAML files in tmp_path, no os.environ."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from xyro.config import XyroConfig
from xyro.config_load import ConfigError, load_config

@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may pick up ./config/xyro.yaml from wherever pytest was started."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str], Path]:
    def _write(text: str, name: str = "xyro.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path
    return _write


@pytest.fixture
def load(write: Callable[[str], Path]) -> Callable[..., XyroConfig]:
    """Load YAML text (or no file) with an explicit environment and overrides."""
    def _load(text: str | None = None, env: Mapping[str, str] | None = None,
              overrides: Sequence[str] = ()) -> XyroConfig:
        path = write(text) if text is not None else None
        return load_config(path, env=env or {}, overrides=overrides)
    return _load


@pytest.fixture
def fails(load: Callable[..., XyroConfig]) -> Callable[..., ConfigError]:
    """Load and return the ConfigError it must raise."""
    def _fails(text: str | None = None, env: Mapping[str, str] | None = None,
               overrides: Sequence[str] = ()) -> ConfigError:
        with pytest.raises(ConfigError) as info:
            load(text, env, overrides)
        return info.value
    return _fails
