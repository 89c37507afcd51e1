"""Fixtures of the synthetic-web tests: small webs on a manual clock, raw HTTP helpers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from xyro.clock import ManualClock
from xyro.synthweb import SyntheticWeb, WebSpec

T0 = 1_780_000_000.0
SMALL = WebSpec(seed=11, n_hosts=8, n_pages=300, drip_interval=0.2, drip_bytes=50,
                crawl_delay_share=0.5, disallow_share=0.6, robots_missing_share=0.25,
                change_rate_mean=1 / 3600)


@pytest.fixture
def spec() -> WebSpec:
    return SMALL


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def web(clock: ManualClock) -> Iterator[SyntheticWeb]:
    with SyntheticWeb(SMALL, clock) as w:
        yield w


class Raw:
    """Raw-socket HTTP helpers (conftest is not importable: tests use the ``raw`` fixture)."""

    @staticmethod
    def get(url: str, headers: dict[str, str] | None = None, cap: int = 65536,
            timeout: float = 2.0) -> tuple[bytes, bytes]:
        """GET over a raw socket: (head, at most ``cap`` body bytes); never reads more."""
        u = urlsplit(url)
        lines = [f"GET {u.path or '/'}{'?' + u.query if u.query else ''} HTTP/1.1",
                 f"Host: {u.netloc}", "Connection: close", "User-Agent: synthweb-test/1"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        with socket.create_connection((u.hostname, u.port), timeout=timeout) as s:
            s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            while len(body) < cap:
                chunk = s.recv(min(65536, cap - len(body)))
                if not chunk:
                    break
                body += chunk
        return head, body[:cap]

    @staticmethod
    def header(head: bytes, name: str) -> str | None:
        for line in head.decode("latin-1").split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == name.lower():
                return v.strip()
        return None

    @staticmethod
    def status(head: bytes) -> int:
        return int(head.split(b" ", 2)[1])


@pytest.fixture
def raw() -> type[Raw]:
    return Raw
