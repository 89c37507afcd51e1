"""Benchmark: HTML link extraction speed on the Python 3.11 docs, Xyro against Scrapy's
LinkExtractor on the same bodies, plus the full page-by-page agreement (served on 127.0.0.1).

    .venv/bin/python tests/bench/html_extract.py [--quick] [--repeat R] [--no-compare]

Prints ONE JSON line on stdout (progress on stderr). Per page, each extractor runs R times
and the fastest run counts (other processes share this machine); the figures are the median
and p95 over pages of that time, and pages/s = pages / sum of the times. Xyro's time covers
decoding, parsing, extraction and resolution (``extract_links``); Scrapy's covers building the
``HtmlResponse`` (its encoding detection) and ``LinkExtractor.extract_links`` with the same
tags, both configured like the peer in tests/html/html_peer_compare.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])

HERE = Path(__file__).resolve().parent
PEER_COMPARE = HERE.parent / "html" / "html_peer_compare.py"
QUICK_PAGES = 20


def load_peer_compare() -> ModuleType:
    name = "xyro_tests_html_peer_compare"
    spec = importlib.util.spec_from_file_location(name, PEER_COMPARE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def time_pages(bodies: list[tuple[str, bytes]], run: Callable[[str, bytes], object], repeat: int) -> dict[str, float]:
    run(*bodies[0])  # warm-up: first-call costs (lazy imports, caches) are not per-page work
    best: list[float] = []
    for url, body in bodies:
        fastest = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            run(url, body)
            fastest = min(fastest, time.perf_counter() - start)
        best.append(fastest)
    ordered = sorted(best)
    total = sum(best)
    return {
        "median_ms": round(statistics.median(best) * 1e3, 4),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1e3, 4),
        "max_ms": round(ordered[-1] * 1e3, 4),
        "pages_per_s": round(len(best) / total, 1),
        "mb_per_s": round(sum(len(b) for _, b in bodies) / total / 1e6, 2),
        "seconds": round(total, 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"first {QUICK_PAGES} pages only")
    parser.add_argument("--repeat", type=int, default=None, help="runs per page (default 3, quick 1)")
    parser.add_argument("--no-compare", action="store_true", help="skip the agreement check")
    args = parser.parse_args()
    pc = load_peer_compare()
    if not pc.DOCS_ROOT.is_dir():
        print(f"{pc.DOCS_ROOT} is absent: apt-get install python3.11-doc", file=sys.stderr)
        return 2
    from scrapy.http import HtmlResponse
    from scrapy.linkextractors import LinkExtractor

    from xyro.content.html_links import extract_links

    repeat = args.repeat or (1 if args.quick else 3)
    pages = pc.site_pages(pc.DOCS_ROOT, QUICK_PAGES if args.quick else None)
    base = "http://127.0.0.1:8000/"
    bodies = [(base + rel, (pc.DOCS_ROOT / rel).read_bytes()) for rel in pages]
    sizes = sorted(len(b) for _, b in bodies)
    print(f"{len(bodies)} pages, {sum(sizes) / 1e6:.1f} MB, {repeat} run(s) each", file=sys.stderr)

    extractor = LinkExtractor(tags=("a", "area", "frame", "iframe"), attrs=("href", "src"),
                              canonicalize=False, unique=False, deny_extensions=[])

    def scrapy_run(url: str, body: bytes) -> object:
        response = HtmlResponse(url=url, body=body, headers={"Content-Type": "text/html"})
        return extractor.extract_links(response)

    def xyro_run(url: str, body: bytes) -> object:
        return extract_links(body, url)

    print("timing xyro ...", file=sys.stderr)
    xyro = time_pages(bodies, xyro_run, repeat)
    xyro["links"] = sum(len(extract_links(b, u).links) for u, b in bodies)
    print("timing scrapy ...", file=sys.stderr)
    scrapy = time_pages(bodies, scrapy_run, repeat)
    scrapy["links"] = sum(len(scrapy_run(u, b)) for u, b in bodies)  # type: ignore[arg-type]
    result: dict[str, object] = {
        "benchmark": "html_extract",
        "site": str(pc.DOCS_ROOT),
        "pages": len(bodies),
        "page_bytes_median": int(statistics.median(sizes)),
        "page_bytes_max": sizes[-1],
        "repeat": repeat,
        "xyro": xyro,
        "scrapy_linkextractor": scrapy,
        "ratio_pages_per_s_xyro_over_scrapy": round(xyro["pages_per_s"] / scrapy["pages_per_s"], 2),
    }
    if not args.no_compare:
        print("comparing links over HTTP ...", file=sys.stderr)
        comparison = pc.compare_site(pc.DOCS_ROOT, QUICK_PAGES if args.quick else None)
        agreement = comparison.summary()
        agreement["unexplained_differences"] = comparison.unexplained()
        result["agreement"] = agreement
    result["machine"] = machine()
    print(json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
