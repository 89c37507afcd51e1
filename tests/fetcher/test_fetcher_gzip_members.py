"""Gzip bodies of many members (DESIGN.md §7: caps and the total deadline). An empty gzip
member is 20 bytes that decode to nothing, and gzip of a million of them fits in a few
kilobytes: an inner stage (``Content-Encoding: gzip, gzip``, or a ``.xml.gz`` served as
``application/gzip`` and gzipped again) gets them in one piece. Decoding costs time linear
in the members, and the fetch's deadline and stop event end it between slices. Real servers
on 127.0.0.1."""

from __future__ import annotations

import gzip
import io
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from xyro.net.body import SLICE_BYTES, Decoder, read_capped
from xyro.net.fetcher import Fetcher
from xyro.records import ErrorKind

MB = 1 << 20
EMPTY_MEMBER = gzip.compress(b"", mtime=0)
DOC = b"<?xml version='1.0'?><doc>after the empty members</doc>"


def _members(mib: int) -> bytes:
    """``mib`` MiB of empty gzip members, then one member holding :data:`DOC`."""
    return EMPTY_MEMBER * (mib * MB // len(EMPTY_MEMBER)) + gzip.compress(DOC, mtime=0)


@pytest.fixture(scope="module")
def wire_32() -> bytes:
    """32 MiB of members gzipped once more: about 80 KB on the wire."""
    return gzip.compress(_members(32), mtime=0)


@pytest.mark.parametrize("encodings, gzip_file", [(["gzip", "gzip"], False),
                                                   (["gzip"], True)],
                         ids=["content-encoding-gzip-gzip", "gzip-file-gzipped"])
def test_an_inner_stage_of_many_members_decodes_in_linear_time(
        encodings: list[str], gzip_file: bool) -> None:
    # 3 MiB is 157,000 members: a fraction of a second when each member costs about its
    # length; several seconds when each costs a copy of all the input after it.
    wire = gzip.compress(_members(3), mtime=0)
    decoder = Decoder(encodings, 32 * MB, gzip_file)
    started = time.process_time()
    body = read_capped(io.BytesIO(wire).read, decoder, 10 * MB)
    assert time.process_time() - started < 3.0
    assert body == DOC


def test_many_members_in_one_chunk_of_the_first_stage_are_linear_too() -> None:
    members = _members(3)
    decoder = Decoder(["gzip"], 32 * MB)
    started = time.process_time()
    decoder.feed(members)   # one piece, as gunzip of a whole body gives it
    assert decoder.finish() == DOC
    assert time.process_time() - started < 3.0


def test_the_check_runs_between_slices_and_may_abandon_the_decoding() -> None:
    wire = gzip.compress(_members(1), mtime=0)
    calls: list[int] = []
    decoder = Decoder(["gzip", "gzip"], 32 * MB, check=lambda: calls.append(1))
    assert read_capped(io.BytesIO(wire).read, decoder, 10 * MB) == DOC
    assert len(calls) > MB // SLICE_BYTES   # the inner stage's 1 MiB came in slices

    class Abandoned(Exception):
        pass

    def abandon_at_the_third() -> None:
        if len(calls) == 3:
            raise Abandoned
        calls.append(1)

    calls.clear()
    decoder = Decoder(["gzip", "gzip"], 32 * MB, check=abandon_at_the_third)
    with pytest.raises(Abandoned):
        read_capped(io.BytesIO(wire).read, decoder, 10 * MB)


def _stacked(serve: Any, wire: bytes) -> dict[str, Callable[..., None]]:
    return {
        "/stacked": lambda h: serve.send(h, 200, wire, {"Content-Encoding": "gzip, gzip",
                                                        "Content-Type": "application/xml"}),
        "/sitemap.xml.gz": lambda h: serve.send(h, 200, wire, {
            "Content-Encoding": "gzip", "Content-Type": "application/gzip"}),
    }


@pytest.mark.parametrize("path", ["/stacked", "/sitemap.xml.gz"])
def test_the_deadline_ends_the_decoding_of_many_members(
        path: str, wire_32: bytes, serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve(_stacked(serve, wire_32))
    fetcher = make_fetcher(deadline_s=1.0, max_decoded_bytes=40 * MB)
    t0 = time.monotonic()
    result = fetcher.fetch(server.url(path))
    elapsed = time.monotonic() - t0
    assert result.error_kind == ErrorKind.TIMEOUT, result.error_detail
    assert "total deadline of 1 s passed" in (result.error_detail or "")
    assert "decoding of the body abandoned" in (result.error_detail or "")
    assert elapsed < 2.0   # not the seconds to minutes the members would take
    assert result.body == b""


def test_the_stop_event_ends_the_decoding_of_many_members(
        wire_32: bytes, serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve(_stacked(serve, wire_32))
    fetcher = make_fetcher(deadline_s=30.0, max_decoded_bytes=40 * MB)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    result = fetcher.fetch(server.url("/stacked"), stop=stop)
    assert result.error_kind == ErrorKind.TIMEOUT, result.error_detail
    assert "stop requested" in (result.error_detail or "")
    assert time.monotonic() - t0 < 1.5
