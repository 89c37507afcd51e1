"""The Scrapy side of tests/bench/crawl_throughput.py, run as its own process.

    .venv/bin/python tests/bench/scrapy_peer.py --seeds-file F --budget N [--concurrency 64]

A CrawlSpider over the seeds' hosts: robots.txt obeyed (Protego, as Xyro), one request in
flight per host, no delay, no AutoThrottle, no HTTP cache, no cookies-jar effects on the
comparison. Its LinkExtractors look at the same tags as Xyro's extractor (a, area, frame,
iframe href/src, plus ``link rel=alternate`` for XML feeds) with no extension filter, so both
crawlers can reach the same pages (Scrapy's default extension list drops ``.rss``).

Stops after ``--budget`` page responses (robots.txt excluded; this is the page budget of
Xyro's ``max_pages``). Measures itself with ``getrusage(RUSAGE_SELF)`` from the engine start
to the budget and prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import CloseSpider
from scrapy.http import HtmlResponse, Response, XmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

# The HTML peer of tests/html/html_peer_compare.py: link rel=alternate, not stylesheets/icons.
ALTERNATE_XPATH = (
    "//link[contains(concat(' ', normalize-space(translate(@rel, 'ALTERNATE', 'alternate')), ' '),"
    " ' alternate ') and not(contains(@rel, 'stylesheet')) and not(contains(@rel, 'icon'))]"
)


class Meter:
    """Page responses, by kind, and the wall/CPU clocks of the crawl up to the budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.t0 = 0.0
        self.ru0: Any = None
        self.t_budget: float | None = None
        self.ru_budget: Any = None
        self.pages = 0
        self.robots = 0
        self.statuses: Counter[int] = Counter()
        self.kinds: Counter[str] = Counter()

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.ru0 = resource.getrusage(resource.RUSAGE_SELF)

    def response(self, response: Response, request: Any, spider: Any) -> None:
        if urlsplit(request.url).path == "/robots.txt":
            self.robots += 1
            return
        if self.pages >= self.budget:  # in flight when the budget was reached: not counted
            return
        self.pages += 1
        self.statuses[response.status] += 1
        if response.status == 200:
            self.kinds[kind_of(response)] += 1
        if self.pages == self.budget:
            self.t_budget = time.perf_counter()
            self.ru_budget = resource.getrusage(resource.RUSAGE_SELF)



def kind_of(response: Response) -> str:
    return ("html" if isinstance(response, HtmlResponse) else
            "xml" if isinstance(response, XmlResponse) else "other")


def make_spider(seeds: list[str], meter: Meter) -> type[CrawlSpider]:
    common = {"canonicalize": False, "deny_extensions": []}

    class PeerSpider(CrawlSpider):
        name = "xyro_peer"
        start_urls = seeds
        # Scrapy matches allowed_domains against the URL's host name: IPs work as names.
        allowed_domains = sorted({urlsplit(s).hostname or "" for s in seeds})
        rules = (
            Rule(LinkExtractor(tags=("a", "area", "frame", "iframe"), attrs=("href", "src"),
                               **common), callback="page", follow=True),
            Rule(LinkExtractor(tags=("link",), attrs=("href",),
                               restrict_xpaths=ALTERNATE_XPATH, **common),
                 callback="page", follow=True),
        )

        def parse_start_url(self, response: Response, **kwargs: Any) -> list[Any]:
            return self.page(response)

        def page(self, response: Response) -> list[Any]:
            if meter.pages >= meter.budget:
                raise CloseSpider("page budget reached")
            return []

    return PeerSpider


def crawl(seeds: list[str], budget: int, concurrency: int, state_dir: Path) -> dict[str, Any]:
    meter = Meter(budget)
    process = CrawlerProcess(settings={
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        # Scrapy's documented broad-crawl scheduler: picks requests whose host slot is free
        # (the default single LIFO queue fills the downloader with a few hosts' requests).
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "DOWNLOAD_DELAY": 0,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "AUTOTHROTTLE_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 30,
        "USER_AGENT": "ScrapyPeer/2 (+http://127.0.0.1/)",
        "JOBDIR": None,
        "FEEDS": {},
    })
    crawler = process.create_crawler(make_spider(seeds, meter))
    crawler.signals.connect(meter.start, signal=signals.engine_started)
    crawler.signals.connect(meter.response, signal=signals.response_received)
    process.crawl(crawler)
    process.start()
    t_end = meter.t_budget or time.perf_counter()
    ru1 = meter.ru_budget or resource.getrusage(resource.RUSAGE_SELF)
    pages = min(meter.pages, budget)
    seconds = t_end - meter.t0
    cpu = (ru1.ru_utime - meter.ru0.ru_utime) + (ru1.ru_stime - meter.ru0.ru_stime)
    stats = crawler.stats.get_stats() if crawler.stats else {}
    return {
        "pages": pages, "ok_pages": meter.statuses.get(200, 0),
        "html_pages": meter.kinds["html"], "xml_pages": meter.kinds["xml"],
        "robots_fetches": meter.robots,
        "statuses": {str(k): v for k, v in sorted(meter.statuses.items())},
        "offsite_filtered": stats.get("offsite/filtered", 0),
        "robots_forbidden": stats.get("robotstxt/forbidden", 0),
        "seconds": round(seconds, 3), "pages_per_s": round(pages / seconds, 1),
        "cpu_s": round(cpu, 3), "cpu_ms_per_page": round(1000 * cpu / max(pages, 1), 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "concurrent_requests": concurrency,
        "stop_reason": stats.get("finish_reason", "?"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds-file", type=Path, required=True)
    p.add_argument("--budget", type=int, required=True)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--state-dir", type=Path, default=Path("."))
    args = p.parse_args(argv)
    seeds = args.seeds_file.read_text().split()
    print(json.dumps(crawl(seeds, args.budget, args.concurrency, args.state_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
