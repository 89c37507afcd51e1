"""The loader's cost limits (config/xyro.yaml, loader section): their defaults are the
loader's own, they load from a file, and a bad value names its key."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from xyro.config import XyroConfig
from xyro.config_load import ConfigError
from xyro.loader import LoaderSettings


def test_defaults_equal_the_loader_settings_and_fit_the_decoded_cap() -> None:
    cfg, settings = XyroConfig(), LoaderSettings()
    assert cfg.loader.max_document_bytes == settings.max_document_bytes == 8 * 2**20
    assert cfg.loader.max_attributes_per_element == settings.max_attributes_per_element == 512
    assert cfg.loader.max_namespaces_in_scope == settings.max_namespaces_in_scope == 128
    assert cfg.loader.max_cache_bytes == settings.max_cache_bytes == 256 * 2**20
    assert cfg.loader.max_document_bytes <= cfg.crawler.limits.max_decoded_bytes


def test_limits_load_from_the_file(load: Callable[..., XyroConfig]) -> None:
    cfg = load("loader:\n  max_attributes_per_element: 64\n  max_namespaces_in_scope: 32\n")
    assert (cfg.loader.max_attributes_per_element, cfg.loader.max_namespaces_in_scope) == (64, 32)


@pytest.mark.parametrize("key", ["max_attributes_per_element", "max_namespaces_in_scope"])
def test_a_limit_below_one_names_its_key(fails: Callable[..., ConfigError], key: str) -> None:
    err = fails(f"loader:\n  {key}: 0\n")
    assert (err.key, err.line) == (f"loader.{key}", 2)
    assert "≥ 1, got 0" in err.reason
