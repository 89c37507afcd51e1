"""A 304 answers a conditional request only (RFC 9110 §15.4.5): to a request that sent no
validators it is an HTTP error, not a page "not modified" since a read that never was (it
used to be stored as a fetched page with the server's ETag, and never read after). Real
server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xyro.net.fetcher import Fetcher
from xyro.records import ErrorKind


def test_a_304_without_validators_is_an_error(serve: Any,
                                              make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/doc.xml": lambda h: serve.send(h, 304, b"", {"ETag": '"x"'})})
    fetcher = make_fetcher()
    plain = fetcher.fetch(server.url("/doc.xml"))
    assert plain.error_kind == ErrorKind.HTTP_STATUS and not plain.not_modified
    assert "HTTP 304" in (plain.error_detail or "") and "without validators" in (
        plain.error_detail or "")
    for validators in ({"etag": '"x"'}, {"last_modified": 1_700_000_000.0}):
        answered = fetcher.fetch(server.url("/doc.xml"), **validators)
        assert answered.error_kind is None and answered.not_modified, validators
