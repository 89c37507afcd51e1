"""robots.txt redirected on its own host: every hop is another request to that host, so the
delay separates it from the one before, as it separates any two request starts to a host
(DESIGN.md §7; xyro/crawl/robots_hops.py). Hops used to go out back to back (six requests
in 44 ms under delay_s=3). Real HTTP server on 127.0.0.1, real crawl, wall clock."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

DELAY_S = 0.5
#: How much later a handler thread may stamp a request than it arrived (a loaded machine).
STAMP_LAG_S = 0.1
#: A relative hop, then an absolute one naming the host as 0x7f.1 (one host all the same).
HOPS = {"/robots.txt": "/r1.txt", "/r1.txt": "http://0x7f.1:{port}/r2.txt"}


def test_robots_txt_hops_on_one_host_are_spaced_by_its_delay(tmp_path: Path,
                                                            local_app_for: Any) -> None:
    arrivals: list[tuple[float, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            arrivals.append((time.monotonic(), self.path))
            if self.path in HOPS:
                self._send(301, b"", {"Location": HOPS[self.path].format(port=port)})
            elif self.path == "/r2.txt":
                self._send(200, b"User-agent: *\nDisallow: /private/\n",
                           {"Content-Type": "text/plain"})
            else:
                self._send(200, b"<a href='/a.html'>a</a><a href='/private/b.html'>b</a>",
                           {"Content-Type": "text/html"})

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    base = f"http://127.0.0.1:{port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        app = local_app_for(tmp_path, f"seeds={json.dumps([base + '/'])}",
                            f"crawler.politeness.delay_s={DELAY_S}", "crawler.workers=2")
        summary = run_crawl(app, max_seconds=30)
    finally:
        server.shutdown()
        server.server_close()
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert [path for _, path in arrivals] == ["/robots.txt", "/r1.txt", "/r2.txt", "/",
                                              "/a.html"]   # the rules reached are obeyed
    gaps = [b - a for (a, _), (b, _) in zip(arrivals, arrivals[1:])]
    assert min(gaps) >= DELAY_S - STAMP_LAG_S, [f"{g:.3f}" for g in gaps]
