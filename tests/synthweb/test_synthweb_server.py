"""Servers: distinct loopback hosts, keep-alive, request log, clean and quick stop, speed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
import requests

from xyro.clock import ManualClock, WallClock
from xyro.synthweb import RequestLog, RequestRecord, SyntheticWeb, WebSpec

ROOT = Path(__file__).resolve().parents[2]


def test_each_host_has_its_own_loopback_address(web: SyntheticWeb) -> None:
    hosts = [urlsplit(u).hostname for u in web.seeds]
    assert len(set(hosts)) == len(hosts) == web.spec.n_hosts
    assert all(h.startswith("127.0.0.") and h != "127.0.0.1" for h in hosts)


def test_request_log_records_what_was_served(web: SyntheticWeb, clock: ManualClock) -> None:
    url = web.seeds[0]
    host = urlsplit(url).hostname
    headers = {"User-Agent": "XyroBot/0.1", "If-None-Match": '"nope"',
               "If-Modified-Since": "Thu, 01 Jan 2026 00:00:00 GMT"}
    with requests.Session() as s:
        s.get(url + "?q=1", headers=headers, timeout=5)
        clock.advance(5.0)
        s.head(url, timeout=5)
        s.get(urlsplit(url)._replace(path="/nowhere").geturl(), timeout=5)
    recs = web.log.requests(host=host)
    assert [(r.method, r.target, r.status) for r in recs] == \
        [("GET", "/?q=1", 200), ("HEAD", "/", 200), ("GET", "/nowhere", 404)]
    first = recs[0]
    assert first.user_agent == "XyroBot/0.1" and first.if_none_match == '"nope"'
    assert first.if_modified_since == headers["If-Modified-Since"]
    assert first.port == urlsplit(url).port and first.url == url + "?q=1"
    assert first.bytes > 0 and recs[1].bytes == 0 and recs[1].clock == first.clock + 5.0
    assert all(r.end is not None and r.start <= r.end for r in recs)
    assert web.log.requests(path="/", method="GET")[0] is not None
    assert web.log.requests(host="127.0.0.254") == []


def test_log_dumps_and_loads_json_lines(web: SyntheticWeb, tmp_path: Path) -> None:
    for url in web.seeds[:3]:
        requests.get(url, timeout=5)
    n = web.log.dump_jsonl(tmp_path / "log.jsonl")
    assert n == 3 == len(RequestLog.load_jsonl(tmp_path / "log.jsonl"))
    assert RequestLog.load_jsonl(tmp_path / "log.jsonl") == web.log.requests()


def test_keep_alive_and_exact_content_length(web: SyntheticWeb) -> None:
    u = urlsplit(web.seeds[0])
    with socket.create_connection((u.hostname, u.port), timeout=2) as s:
        f = s.makefile("rb")
        for _ in range(3):  # three requests on one connection
            s.sendall(f"GET / HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
            status = f.readline()
            length = None
            while (line := f.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert status.startswith(b"HTTP/1.1 200") and length
            assert f.read(length).rstrip().endswith(b"</html>")


def test_urls_need_a_running_web(spec: WebSpec) -> None:
    web = SyntheticWeb(spec, ManualClock())
    with pytest.raises(RuntimeError, match="between start"):
        web.url(0)
    with web:
        with pytest.raises(RuntimeError, match="already running"):
            web.start()
    with pytest.raises(RuntimeError):
        _ = web.seeds


def _open_fds() -> int:
    return psutil.Process().num_fds()


def _new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before]


def test_stop_is_quick_and_leaks_nothing_with_hostile_connections_open(spec: WebSpec) -> None:
    # Threads of earlier tests in this worker may end meanwhile: count only this test's.
    before, fds = set(threading.enumerate()), _open_fds()
    web = SyntheticWeb(spec, ManualClock()).start()
    hostile = {c.name: u for u, c in web.hostile_urls().items()}
    held = []
    for name in ("silent_host", "slow_drip", "big_body"):
        u = urlsplit(hostile[name])
        s = socket.create_connection((u.hostname, u.port), timeout=2)
        s.sendall(f"GET {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
        held.append(s)
    idle = requests.Session()
    idle.get(web.seeds[0], timeout=5)  # an idle keep-alive connection
    assert held[1].recv(64)  # the drip has started; big_body is blocked on a full buffer
    start = time.monotonic()
    web.stop()
    assert time.monotonic() - start < 2.0
    for s in held:
        s.close()
    idle.close()
    deadline = time.monotonic() + 10.0  # ends as soon as they are gone; a loaded host is slow
    while _new_threads(before) and time.monotonic() < deadline:
        threading.Event().wait(0.02)
    assert _new_threads(before) == []
    assert _open_fds() <= fds
    web.stop()  # idempotent


def test_module_main_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "xyro.synthweb", "--hosts", "4", "--pages", "40",
         "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT)
    try:
        seeds = [proc.stdout.readline().strip() for _ in range(4)]
        assert all(s.startswith("http://127.0.0.") for s in seeds)
        assert requests.get(seeds[0], timeout=5).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert len(RequestLog.load_jsonl(log)) == 1


def test_module_main_rejects_a_bad_spec() -> None:
    proc = subprocess.run([sys.executable, "-m", "xyro.synthweb", "--hosts", "2",
                           "--pages", "1"], capture_output=True, text=True, cwd=ROOT,
                          timeout=30)
    assert proc.returncode == 2 and "WebSpec.n_pages" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_throughput_informative() -> None:
    """Informative only: prints served requests/s with an 8-thread requests client."""
    spec = WebSpec(seed=2, n_hosts=20, n_pages=2000, hostile=frozenset(),
                   crawl_delay_share=0.0)
    with SyntheticWeb(spec, WallClock()) as web:
        urls = [web.url(i) for i in range(len(web.model.pages))]
        ok = [0] * 8

        def work(k: int) -> None:
            with requests.Session() as s:
                for u in urls[k::8]:
                    r = s.get(u, timeout=5)
                    ok[k] += r.status_code == 200 and len(r.content) > 0

        start = time.perf_counter()
        workers = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - start
    assert sum(ok) == len(urls) == len(web.log)
    print(f"\nsynthweb: {len(urls) / elapsed:.0f} requests/s served to 8 client threads "
          f"(client and server share the CPU)", file=sys.stderr)


def _record(host: str, start: float, end: float, clock: float) -> RequestRecord:
    return RequestRecord(start, end, clock, host, 80, "GET", "/", 200, 1, None, None, None)


def test_politeness_helpers_of_the_log() -> None:
    log = RequestLog()
    for args in [("a", 0.0, 1.0, 10.0), ("a", 1.0, 2.0, 12.5), ("a", 1.5, 3.0, 13.0),
                 ("b", 0.0, 5.0, 0.0)]:
        log.add(_record(*args))
    assert log.max_in_flight("a") == 2 and log.max_in_flight("b") == 1
    assert log.min_start_gap("a") == 0.5 and log.min_start_gap("b") is None
    assert log.max_in_flight("nobody") == 0


def test_concurrent_requests_show_up_as_in_flight(web: SyntheticWeb) -> None:
    url = web.seeds[0]
    host = urlsplit(url).hostname

    with requests.Session() as one:
        for _ in range(10):
            one.get(url, timeout=5)
    assert web.log.max_in_flight(host) == 1  # one client, one request at a time

    def get() -> None:
        with requests.Session() as s:
            for _ in range(20):
                s.get(url, timeout=5)

    workers = [threading.Thread(target=get) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(web.log.requests(host=host)) == 90
    assert 1 <= web.log.max_in_flight(host) <= 4
    assert web.log.min_start_gap(host) == 0.0  # a manual clock that did not move
