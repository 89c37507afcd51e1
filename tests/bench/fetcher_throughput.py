"""Throughput of the bare Fetcher against a fast local server (informative, issue 3 item 1).

Runs a minimal asyncio HTTP/1.1 keep-alive server in a child process (so it does not share
our GIL), then fetches the same pages with N threads through

* ``xyro``: one shared :class:`xyro.fetcher.Fetcher` (DNS cache, address check, watchdog,
  capped raw reading and decoding, manual redirects), and
* ``requests_bare``: the peer, a plain ``requests.Session`` per thread calling ``.get``
  (the "bare requests + threads loop" of the issue text).

Prints ONE JSON line on stdout; progress goes to stderr.
``.venv/bin/python tests/bench/fetcher_throughput.py [--quick] [--threads 32] [--requests N]``
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import multiprocessing
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import psutil
import requests

from xyro.clock import WallClock
from xyro.dns import Resolver
from xyro.fetcher import Fetcher, FetchLimits


def _page(size: int) -> bytes:
    links = "".join(f'<a href="/p{i}">page {i}</a>\n' for i in range(size // 40))
    return f"<html><head><title>t</title></head><body>{links}</body></html>".encode()


def _serve(port_out: multiprocessing.Queue, body_size: int, compress: bool) -> None:
    body = _page(body_size)
    extra = b""
    if compress:
        body = gzip.compress(body, 6)
        extra = b"Content-Encoding: gzip\r\n"
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n" + extra
                + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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


def _run(name: str, fetch_one: Callable[[str], bool], urls: list[str], threads: int) -> dict:
    process = psutil.Process()
    cpu0 = process.cpu_times()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        oks = list(pool.map(fetch_one, urls))
    seconds = time.perf_counter() - t0
    cpu1 = process.cpu_times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    failed = oks.count(False)
    print(f"{name}: {len(urls) / seconds:.0f} pages/s, {failed} failed", file=sys.stderr)
    return {"pages": len(urls), "failed": failed, "seconds": round(seconds, 3),
            "pages_per_s": round(len(urls) / seconds, 1),
            "cpu_ms_per_page": round(1000 * cpu / len(urls), 3),
            "rss_mb": round(process.memory_info().rss / 2**20, 1)}


def _machine() -> dict:
    model = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next(line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "cores": os.cpu_count(),
            "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version()}


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
    server = multiprocessing.Process(target=_serve, args=(ports, args.body_bytes, args.gzip),
                                     daemon=True)
    server.start()
    port = ports.get(timeout=10)
    urls = [f"http://127.0.0.1:{port}/p{i}" for i in range(total)]
    try:
        clock = WallClock()
        resolver = Resolver(clock)
        fetcher = Fetcher(FetchLimits(allow_private_addresses=True),
                          "XyroBench/0.1 (+http://127.0.0.1/)", resolver, clock,
                          max_per_host=args.threads)
        xyro = _run("xyro", lambda u: fetcher.fetch(u).error_kind is None, urls, args.threads)
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
                return response.status_code == 200 and bool(response.content)
            except requests.RequestException:
                return False

        peer = _run("requests_bare", bare, urls, args.threads)
    finally:
        server.terminate()
        server.join()
    xyro["ratio_pages_per_s_vs_requests_bare"] = round(xyro["pages_per_s"] / peer["pages_per_s"], 3)
    print(json.dumps({
        "xyro_fetcher": xyro, "requests_bare": peer,
        "setup": {"threads": args.threads, "body_bytes": len(_page(args.body_bytes)),
                  "gzip": args.gzip, "server": "asyncio keep-alive, separate process"},
        "machine": _machine(),
    }))


if __name__ == "__main__":
    main()
