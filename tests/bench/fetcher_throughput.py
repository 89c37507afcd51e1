"""Throughput of the bare Fetcher against a fast local server (informative).

Runs a minimal asyncio HTTP/1.1 keep-alive server in a child process (so it does not share
our GIL), then fetches the same pages with N threads through

* ``xyro``: one shared :class:`xyro.net.fetcher.Fetcher` (DNS cache, address check, watchdog,
  capped raw reading and decoding, manual redirects), and
* ``requests_bare``: the peer, a plain ``requests.Session`` per thread calling ``.get``
  (the "bare requests + threads loop" of the issue text).

A page counts as fetched only with status 200 and its whole body (``failed`` counts the
rest); ``connections`` is how many TCP connections the server accepted during the run (at
most one per thread when keep-alive works). Prints ONE JSON line on stdout; progress goes to
stderr.
``.venv/bin/python tests/bench/fetcher_throughput.py [--quick] [--threads 32] [--requests N]``
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from concurrent.futures import ThreadPoolExecutor

import psutil
import requests

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])

from xyro.clock import WallClock
from xyro.net.dns import Resolver
from xyro.net.fetcher import Fetcher, FetchLimits


def _page(size: int) -> bytes:
    links = "".join(f'<a href="/p{i}">page {i}</a>\n' for i in range(size // 40))
    return f"<html><head><title>t</title></head><body>{links}</body></html>".encode()


def _serve(port_out: multiprocessing.Queue, body_size: int, compress: bool,
           connections: Any) -> None:
    body = _page(body_size)
    extra = b""
    if compress:
        body = gzip.compress(body, 6)
        extra = b"Content-Encoding: gzip\r\n"
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n" + extra
                + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with connections.get_lock():
            connections.value += 1
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(response)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        port_out.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _run(name: str, fetch_one: Callable[[str], bool], urls: list[str], threads: int,
         connections: Any) -> dict:
    process = psutil.Process()
    opened = connections.value
    cpu0 = process.cpu_times()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        oks = list(pool.map(fetch_one, urls))
    seconds = time.perf_counter() - t0
    cpu1 = process.cpu_times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    failed = oks.count(False)
    opened = connections.value - opened
    print(f"{name}: {len(urls) / seconds:.0f} pages/s, {failed} failed, {opened} connections",
          file=sys.stderr)
    return {"pages": len(urls), "failed": failed, "connections": opened,
            "seconds": round(seconds, 3),
            "pages_per_s": round(len(urls) / seconds, 1),
            "cpu_ms_per_page": round(1000 * cpu / len(urls), 3),
            "rss_mb": round(process.memory_info().rss / 2**20, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--body-bytes", type=int, default=10_000)
    parser.add_argument("--gzip", action="store_true", help="serve gzip-encoded pages")
    args = parser.parse_args()
    total = args.requests or (300 if args.quick else 20_000)

    ports: multiprocessing.Queue = multiprocessing.Queue()
    connections = multiprocessing.Value("i", 0)
    server = multiprocessing.Process(target=_serve, daemon=True,
                                     args=(ports, args.body_bytes, args.gzip, connections))
    body_len = len(_page(args.body_bytes))  # what a complete, decoded page holds
    server.start()
    port = ports.get(timeout=10)
    urls = [f"http://127.0.0.1:{port}/p{i}" for i in range(total)]
    try:
        clock = WallClock()
        resolver = Resolver(clock)
        fetcher = Fetcher(FetchLimits(allow_private_addresses=True),
                          "XyroBench/0.1 (+http://127.0.0.1/)", resolver, clock,
                          max_per_host=args.threads)
        def ours(url: str) -> bool:
            result = fetcher.fetch(url)
            return (result.error_kind is None and result.status == 200
                    and len(result.body) == body_len)

        xyro = _run("xyro", ours, urls, args.threads, connections)
        fetcher.close()
        resolver.close()

        local = threading.local()

        def bare(url: str) -> bool:
            session = getattr(local, "s", None)
            if session is None:
                session = local.s = requests.Session()
                session.trust_env = False
            try:
                response = session.get(url, timeout=(10, 30))
                return response.status_code == 200 and len(response.content) == body_len
            except requests.RequestException:
                return False

        peer = _run("requests_bare", bare, urls, args.threads, connections)
    finally:
        server.terminate()
        server.join()
    xyro["ratio_pages_per_s_vs_requests_bare"] = round(xyro["pages_per_s"] / peer["pages_per_s"], 3)
    print(json.dumps({
        "xyro_fetcher": xyro, "requests_bare": peer,
        "setup": {"threads": args.threads, "body_bytes": body_len,
                  "gzip": args.gzip, "server": "asyncio keep-alive, separate process"},
        "machine": machine(),
    }))


if __name__ == "__main__":
    main()
