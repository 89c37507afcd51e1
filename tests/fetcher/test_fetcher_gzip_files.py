"""A gzip file served as such (``application/gzip``, ``application/x-gzip``): the
``sitemap.xml.gz`` of sitemaps.org. The fetcher takes it for a ``.gz`` name that hides no
skipped suffix, decompresses it under the decoded-bytes cap (a bomb ends as too_large with
bounded memory, DESIGN.md §7) and hands up the XML it holds. Real servers on 127.0.0.1."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from xyro.content.classify import classify
from xyro.net.body import Decoder
from xyro.net.fetcher import Fetcher
from xyro.records import ErrorKind

MB = 1 << 20
SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
SITEMAP = (f'<?xml version="1.0"?>\n<urlset xmlns="{SM}"><url><loc>http://127.0.0.1/a</loc>'
           f'</url></urlset>').encode()


def _gzip_of_zeros(total_mb: int) -> bytes:
    """A gzip file of ``total_mb`` MiB of zeros built from one repeated full-flush block
    (one compression of 1 MiB, whatever the size)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = compressor.compress(bytes(MB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(total_mb):
        crc = zlib.crc32(bytes(MB), crc)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + block * total_mb
            + compressor.flush() + crc.to_bytes(4, "little")
            + (total_mb * MB % 2**32).to_bytes(4, "little"))


def _served_as(serve: Any, body: bytes, content_type: str | None) -> Callable[..., None]:
    """``body`` with ``content_type``, or with no Content-Type header at all (None)."""
    if content_type is not None:
        return _typed(serve, body, content_type)

    def untyped(handler: Any) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    return untyped


def _typed(serve: Any, body: bytes, content_type: str, **headers: str) -> Callable[..., None]:
    return lambda h: serve.send(h, 200, body, {"Content-Type": content_type, **headers})


@pytest.mark.parametrize("content_type", ["application/gzip", "application/x-gzip"])
def test_a_gzip_sitemap_is_fetched_decompressed_and_read_as_xml(
        content_type: str, serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    packed = gzip.compress(SITEMAP, mtime=0)
    server = serve({"/sitemap.xml.gz": _typed(serve, packed, content_type)})
    result = make_fetcher().fetch(server.url("/sitemap.xml.gz"))
    assert result.error_kind is None, result.error_detail
    assert result.body == SITEMAP and result.bytes_on_wire == len(packed)
    assert result.content_type == content_type   # what the server said, kept
    assert classify(result) == "xml"


def test_a_gz_file_also_sent_with_content_encoding_gzip_is_decoded_once(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    """Servers that map .gz both to application/x-gzip and to Content-Encoding: gzip send
    the file gzipped once: after the Content-Encoding the bytes are the XML itself."""
    packed = gzip.compress(SITEMAP, mtime=0)
    server = serve({"/s.xml.gz": _typed(serve, packed, "application/x-gzip",
                                        **{"Content-Encoding": "gzip"})})
    result = make_fetcher().fetch(server.url("/s.xml.gz"))
    assert result.error_kind is None, result.error_detail
    assert result.body == SITEMAP


def test_a_gzip_bomb_served_as_application_gzip_ends_too_large_with_bounded_memory(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    bomb = _gzip_of_zeros(1024)                                     # 1 GiB of zeros
    assert len(bomb) < 2 * MB
    server = serve({"/sitemap.xml.gz": _typed(serve, bomb, "application/gzip")})
    fetcher = make_fetcher(read_timeout_s=3.0, deadline_s=10.0, max_body_bytes=4 * MB,
                           max_decoded_bytes=8 * MB)
    process = psutil.Process()
    before = process.memory_info().rss
    result = fetcher.fetch(server.url("/sitemap.xml.gz"))
    growth = process.memory_info().rss - before
    assert result.error_kind == ErrorKind.TOO_LARGE, result.error_detail
    assert f"more than {8 * MB} bytes (cap {8 * MB})" in (result.error_detail or "")
    assert result.body == b""
    assert growth < 64 * MB, f"RSS grew by {growth / MB:.0f} MiB on a gzip-file bomb"


@pytest.mark.parametrize("path", ["/logs.tar.gz", "/download", "/archive.gz.bak"])
def test_other_gzip_files_are_refused_before_their_body_is_read(
        path: str, serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    body = gzip.compress(b"x" * 1000, mtime=0)
    server = serve({path: _typed(serve, body, "application/gzip")})
    result = make_fetcher().fetch(server.url(path))
    assert result.error_kind == ErrorKind.CONTENT_TYPE
    assert "Content-Type application/gzip not accepted" in (result.error_detail or "")
    assert result.bytes_on_wire == 0


def test_an_accept_pattern_takes_any_gzip_file_and_its_content_decides(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    packed = gzip.compress(SITEMAP, mtime=0)
    server = serve({"/export": _typed(serve, packed, "application/gzip")})
    result = make_fetcher(accept_content_types=("application/gzip",)).fetch(
        server.url("/export"))
    assert result.error_kind is None, result.error_detail
    assert result.body == SITEMAP


@pytest.mark.parametrize("content_type", ["application/octet-stream", None,
                                          "application/xml", "text/xml; charset=utf-8"])
def test_a_gz_sitemap_served_untyped_or_as_xml_is_decompressed_too(
        content_type: str | None, serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    """nginx has no type for .gz by default: application/octet-stream (or none at all); a
    server that maps the inner ``.xml`` and sends no Content-Encoding says application/xml."""
    packed = gzip.compress(SITEMAP, mtime=0)
    server = serve({"/sitemap.xml.gz": _served_as(serve, packed, content_type),
                    "/plain.xml.gz": _served_as(serve, SITEMAP, content_type)})
    result = make_fetcher().fetch(server.url("/sitemap.xml.gz"))
    assert result.error_kind is None, result.error_detail
    assert result.body == SITEMAP and classify(result) == "xml"
    plain = make_fetcher().fetch(server.url("/plain.xml.gz"))  # misnamed: not gzip at all
    assert plain.error_kind is None and plain.body == SITEMAP


def test_an_untyped_gz_bomb_ends_too_large_and_other_gz_names_stay_compressed(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    bomb = _gzip_of_zeros(64)
    packed = gzip.compress(b"x" * 1000, mtime=0)
    octets = {"Content-Type": "application/octet-stream"}
    server = serve({"/sitemap.xml.gz": lambda h: serve.send(h, 200, bomb, octets),
                    "/logs.tar.gz": lambda h: serve.send(h, 200, packed, octets)})
    fetcher = make_fetcher(max_body_bytes=4 * MB, max_decoded_bytes=8 * MB)
    result = fetcher.fetch(server.url("/sitemap.xml.gz"))
    assert result.error_kind == ErrorKind.TOO_LARGE, result.error_detail
    other = fetcher.fetch(server.url("/logs.tar.gz"))  # a skipped suffix inside: not opened
    assert other.error_kind is None and other.body == packed


@pytest.mark.parametrize("chunk", [1, 2, 7, 4096])
def test_the_gzip_file_stage_decodes_in_any_chunking(chunk: int) -> None:
    """The stage decides gzip or not on the first two bytes, however they arrive; bytes
    that are not gzip pass unchanged (a one-byte body included)."""
    for body, expected in ((gzip.compress(SITEMAP) * 2, SITEMAP * 2), (SITEMAP, SITEMAP),
                           (b"<", b"<"), (b"", b"")):
        decoder = Decoder([], 1 * MB, gzip_file=True)
        for at in range(0, len(body), chunk):
            decoder.feed(body[at:at + chunk])
        assert decoder.finish() == expected
