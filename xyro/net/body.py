"""Capped reading and Content-Encoding decoding of response bodies (DESIGN.md §7, §8).

We read raw bytes off the wire ourselves and decode them ourselves, so that both the bytes
read and the bytes produced are capped while streaming: a gzip/deflate/br bomb stops at the
cap with at most about one cap of output allocated, never the full expansion. Every stage of
a stacked encoding (``Content-Encoding: gzip, br``) is capped, so an inner stream that
decodes to nothing cannot make an outer one spin through gigabytes either.

A body whose media type is itself gzip (``application/gzip`` for ``sitemap.xml.gz``,
:data:`xyro.media_types.GZIP_TYPES`) gets one more stage, undone after the Content-Encodings
and under the same cap: a gzip bomb served that way ends as :class:`BodyTooLarge` too.

A decoder made with ``keep_prefix`` (robots.txt: RFC 9309 §2.5 asks for the first 500 KiB,
not the whole file) turns reaching a cap into the end of the body: the bytes decoded up to
the cap are kept and nothing more is read or decoded.

Work is linear in the input and interruptible (DESIGN.md §7, the total deadline): every
stage is fed slices of at most :data:`SLICE_BYTES`, the decoder's ``check`` runs between
slices, and a gzip stream of many members (a small body can hold a million empty ones)
never copies the input that follows a member (see :class:`_ZlibStage`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

import brotli

MAX_STACKED_ENCODINGS = 3
#: The most input any stage is given at once; the decoder's ``check`` runs between slices.
SLICE_BYTES = 1 << 16
#: The first input given for a gzip member or deflate stream, doubled while it goes on: zlib
#: copies what follows the end of a member, so a short first feed keeps that copy short.
_PROBE_BYTES = 64
_ALIASES = {"x-gzip": "gzip", "x-deflate": "deflate"}
#: The IANA HTTP Content Coding Registry (RFC 9110 §16.6.1), aliases resolved.
_CODINGS = frozenset({"aes128gcm", "br", "compress", "dcb", "dcz", "deflate", "exi", "gzip",
                      "identity", "pack200-gzip", "x-compress", "zstd"})
_GZIP_MAGIC = b"\x1f\x8b"


class BodyTooLarge(Exception):
    """A cap was exceeded; the message gives the bytes seen and the cap."""


class BodyEncodingError(Exception):
    """An unsupported or corrupt Content-Encoding."""


class _Stage(Protocol):
    def complete(self) -> bool:
        """The stream ended where its coding says it ends (not cut short in transit)."""

    def process(self, data: bytes, limit: int) -> bytes:
        """Take ``data`` (may be empty) and return at most about ``limit`` output bytes.

        Input that could not be used yet is kept; call again with b"" until it returns b"".
        """
        ...


class _ZlibStage:
    """gzip (multi-member), zlib-wrapped deflate, or raw deflate.

    Linear in its input however many members it holds: the input is kept whole with an
    offset, and zlib is given a window of it that starts at :data:`_PROBE_BYTES` for each
    member and doubles up to :data:`SLICE_BYTES`. zlib copies the rest of the window when
    a member ends (``unused_data``), so that copy stays about as short as the member; giving
    it all the input instead costs the whole remainder per member, quadratic in the members.
    """

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._d: zlib._Decompress | None = None
        self._buf = b""    # zlib has consumed self._buf[:self._pos]
        self._pos = 0
        self._window = _PROBE_BYTES
        self._eof = False
        self._between_members = False

    def _new(self, first: bytes) -> zlib._Decompress:
        if self._encoding == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        # "deflate" should be zlib-wrapped (RFC 9110) but some servers send raw deflate:
        # a valid zlib header is CM=8 and a 16-bit check divisible by 31.
        wrapped = first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)

    def complete(self) -> bool:
        # Mid-member, or a lone first byte: the body stopped inside the stream.
        if self._d is not None:
            return self._d.eof
        return self._eof or self._between_members or self._pos == len(self._buf)

    def process(self, data: bytes, limit: int) -> bytes:
        if self._eof:
            return b""   # what follows the end (padding, junk) is dropped, not kept
        if data:
            # What is left is at most a byte (callers drain a stage before feeding it more).
            self._buf = self._buf[self._pos:] + data
            self._pos = 0
        while not self._eof and self._pos < len(self._buf):
            if self._d is None and not self._start_member():
                return b""
            out = self._inflate(limit)
            if out:
                return out
            # no output (a header, an empty member): go on now, the caller stops at b""
        return b""

    def _start_member(self) -> bool:
        """Make the decompressor for the stream or member at the offset; False when that
        cannot be told yet, or when what follows the last member is padding."""
        head = self._buf[self._pos:self._pos + 2]
        if len(head) < 2:  # too short to tell a header from the padding after a member
            return False
        if self._between_members and head != _GZIP_MAGIC:
            self._eof = True  # trailing padding is ignored, as browsers do
            return False
        self._d = self._new(head)
        self._window = _PROBE_BYTES
        return True

    def _inflate(self, limit: int) -> bytes:
        """Decompress one window of input at the offset; move the offset past what zlib
        consumed, and past the end of the member when it ends there."""
        d = self._d
        assert d is not None
        window = memoryview(self._buf)[self._pos:self._pos + self._window]
        try:
            out = d.decompress(window, limit)
        except zlib.error as exc:
            raise BodyEncodingError(f"corrupt {self._encoding} stream: {exc}") from None
        left = len(d.unused_data) if d.eof else len(d.unconsumed_tail)
        self._pos += len(window) - left
        if not d.eof:
            self._window = min(2 * self._window, SLICE_BYTES)
        elif self._encoding == "gzip":
            self._d, self._between_members = None, True  # a gzip body may hold more members
        else:
            self._eof = True
        return out


class _WrappedGzipStage:
    """The gzip file a gzip media type announces. Bytes that are not gzip pass unchanged: a
    server that maps ``.gz`` both to ``application/x-gzip`` and to ``Content-Encoding: gzip``
    sends the file gzipped once, and the Content-Encoding stage has undone it already."""

    def __init__(self) -> None:
        self._inner: _Stage | None = None
        self._head = b""

    def complete(self) -> bool:
        return self._inner is None or self._inner.complete()

    def process(self, data: bytes, limit: int) -> bytes:
        if self._inner is None:
            self._head += data
            if len(self._head) < len(_GZIP_MAGIC) and (data or not self._head):
                return b""   # not yet known whether this is gzip (a flush decides)
            data, self._head = self._head, b""
            self._inner = (_ZlibStage("gzip") if data.startswith(_GZIP_MAGIC)
                           else _PassThrough())
        return self._inner.process(data, limit)


class _PassThrough:
    """Identity: the bytes as they are (the Decoder's caps still count them)."""

    def complete(self) -> bool:
        return True

    def process(self, data: bytes, limit: int) -> bytes:
        return data


class _BrotliStage:
    """br via the brotli package, using its output limit (brotli >= 1.2)."""

    def __init__(self) -> None:
        self._d = brotli.Decompressor()
        self._queue = bytearray()
        self._started = False

    def complete(self) -> bool:
        return not self._started or self._d.is_finished()

    def process(self, data: bytes, limit: int) -> bytes:
        self._queue += data
        self._started = self._started or bool(data)
        try:
            # The decompressor must see only empty input until it can accept more.
            if self._d.can_accept_more_data():
                if not self._queue:
                    return b""
                chunk = bytes(self._queue)
                self._queue.clear()
                return self._d.process(chunk, output_buffer_limit=limit)
            return self._d.process(b"", output_buffer_limit=limit)
        except brotli.error as exc:
            raise BodyEncodingError(f"corrupt br stream: {exc}") from None


def parse_content_encoding(header: str | None) -> list[str]:
    """Encodings in the order they were applied; identity dropped, aliases resolved. A
    name that is no content coding at all (``none``, ``UTF-8``, ``binary``: servers that
    mislabel a plain body) is dropped too, as browsers ignore it; a registered coding that
    is not decoded (``compress``, ``zstd``) stays, and the decoder refuses it."""
    if not header:
        return []
    names = [_ALIASES.get(p.strip().lower(), p.strip().lower()) for p in header.split(",")]
    return [n for n in names if n in _CODINGS and n != "identity"]


class Decoder:
    """Streams raw body bytes through the stacked decoders with a cap on each stage."""

    def __init__(self, encodings: list[str], max_decoded_bytes: int,
                 gzip_file: bool = False, *, keep_prefix: bool = False,
                 check: Callable[[], None] | None = None) -> None:
        """``encodings`` in the order they were applied; ``gzip_file``: the media type says
        the content itself is a gzip file (undone last, see the module docstring);
        ``keep_prefix``: a cap reached cuts the body there instead of raising; ``check``:
        called before each slice of input a stage is given, it raises to abandon the
        decoding (the fetcher's total deadline and stop event, DESIGN.md §7)."""
        if len(encodings) > MAX_STACKED_ENCODINGS:
            raise BodyEncodingError(
                f"{len(encodings)} stacked Content-Encodings {encodings}; "
                f"at most {MAX_STACKED_ENCODINGS} are decoded")
        self._stages: list[_Stage] = []
        for name in reversed(encodings):   # the last applied is undone first
            if name in ("gzip", "deflate"):
                self._stages.append(_ZlibStage(name))
            elif name == "br":
                self._stages.append(_BrotliStage())
            else:
                raise BodyEncodingError(
                    f"unsupported Content-Encoding {name!r} (gzip, deflate, br are decoded)")
        if gzip_file:
            self._stages.append(_WrappedGzipStage())
        # What each stage undoes, for errors.
        self._names = [*reversed(encodings), *(["gzip file"] if gzip_file else [])]
        self._cap = max_decoded_bytes
        self._produced = [0] * len(self._stages)
        self._out = bytearray()
        self.wire_bytes = 0
        self.keep_prefix = keep_prefix
        self._check = check
        self.cut = False   # keep_prefix: a cap was reached, the body ends there

    def feed(self, data: bytes) -> None:
        """Decode ``data``; past a cap, raises BodyTooLarge (or, keeping a prefix, cuts)."""
        self.wire_bytes += len(data)
        if not self.cut:
            self._push(0, data)

    def finish(self) -> bytes:
        """Flush every stage, outermost first, and return the decoded body (an inner stage
        is fed only when the one before it has output: each needs its own flush).

        Raises BodyEncodingError for a stream the body ends inside: a connection that
        closed early under a Content-Length counting only what was sent would otherwise
        pass a part of the document off as all of it."""
        for index in range(len(self._stages)):
            if self.cut:
                break
            self._push(index, b"")
        if not self.cut:
            for stage, name in zip(self._stages, self._names):
                if not stage.complete():
                    raise BodyEncodingError(
                        f"truncated {name} stream: the body ends before "
                        f"the stream does (cut short in transit, or by the server)")
        return bytes(self._out)

    def cut_here(self) -> bytes:
        """End a ``keep_prefix`` body now (its wire cap was reached): the bytes decoded so
        far are the body."""
        self.cut = True
        return bytes(self._out)

    def _over(self, what: str) -> None:
        """Raise BodyTooLarge, unless this decoder keeps a prefix (the caller cuts)."""
        if not self.keep_prefix:
            raise BodyTooLarge(f"{what} (cap {self._cap}) from {self.wire_bytes} bytes on "
                               f"the wire")

    def _push(self, index: int, data: bytes) -> None:
        if index == len(self._stages):
            self._out += data
            if len(self._out) > self._cap:
                self._over(f"decoded more than {self._cap} bytes")
                del self._out[self._cap:]   # keeping a prefix: the body ends at the cap
                self.cut = True
            return
        # An inner stage gets whole outputs of the one before (up to a cap each): in
        # slices, so that no call runs long and the check comes between them. b"" (a
        # flush) is one slice.
        for start in range(0, max(len(data), 1), SLICE_BYTES):
            if self._check is not None:
                self._check()
            self._drain(index, data[start:start + SLICE_BYTES])
            if self.cut:
                return

    def _drain(self, index: int, data: bytes) -> None:
        """Give ``data`` to stage ``index`` and pass on all it outputs."""
        stage = self._stages[index]
        # One byte over the cap is enough to know the cap is exceeded.
        out = stage.process(data, self._cap + 1)
        while out:
            self._produced[index] += len(out)
            over = self._produced[index] - self._cap
            if over > 0:
                # An inner stage may turn much input into little output (empty gzip
                # members): its own input is capped too, and a prefix ends here.
                self._over(f"decoding stage {index + 1} produced more than {self._cap} bytes")
                self._push(index + 1, out[:len(out) - over])
                self.cut = True
                return
            self._push(index + 1, out)
            if self.cut:
                return
            out = stage.process(b"", self._cap + 1)


def read_capped(read: Callable[[int], bytes], decoder: Decoder, max_wire_bytes: int,
                chunk_bytes: int = 65536) -> bytes:
    """Read raw chunks with ``read(n)`` until EOF, feeding ``decoder``; return the body.

    Reads at most ``max_wire_bytes + 1`` bytes: one byte over is proof of a body too large.
    A ``keep_prefix`` decoder ends the read at either cap and returns what it decoded.
    """
    while not decoder.cut:
        room = max_wire_bytes + 1 - decoder.wire_bytes
        data = read(min(chunk_bytes, room))
        if not data:
            return decoder.finish()
        if decoder.wire_bytes + len(data) > max_wire_bytes:
            if decoder.keep_prefix:
                decoder.feed(data[:max_wire_bytes - decoder.wire_bytes])
                return decoder.cut_here()
            raise BodyTooLarge(
                f"read {decoder.wire_bytes + len(data)} bytes, cap {max_wire_bytes}")
        decoder.feed(data)
    return decoder.cut_here()
