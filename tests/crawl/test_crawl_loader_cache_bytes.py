"""The crawler's DTD/entity cache takes ``loader.max_cache_bytes`` from the configuration
(xyro/app.py builds the loader's settings): the cache is bounded in total bytes, least
recently used out first, not only in entries of at most ``max_entity_bytes`` each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xyro.app import build_crawler


def test_the_configured_total_bounds_the_crawlers_cache(tmp_path: Path,
                                                        local_app_for: Any) -> None:
    app = local_app_for(tmp_path, "loader.max_document_bytes=100000",
                        "loader.max_cache_bytes=300000")
    with app.open_store() as store:
        parts = build_crawler(app, store)
        try:
            loader = parts.crawler.loader
            assert loader is not None and loader.settings.max_cache_bytes == 300_000
            for i in range(5):
                assert loader.cache.put(f"http://h.example/{i}.dtd", bytes(100_000)) is None
            assert len(loader.cache) == 3
            assert "http://h.example/1.dtd" not in loader.cache
            assert "http://h.example/4.dtd" in loader.cache
        finally:
            parts.close()
