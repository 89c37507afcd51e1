"""What a site answers to one request, before the server writes it to the socket."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Reply:
    """An HTTP response to write.

    ``mode``: ``full`` writes ``body``; ``stream`` repeats ``body`` (a chunk) until
    ``length`` bytes are sent, so huge bodies are never held in memory; ``drip`` sends
    ``body`` one byte per drip interval (real seconds); ``hold`` writes nothing at all.
    """

    status: int
    content_type: str | None = None
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    length: int | None = None
    mode: str = "full"

    @property
    def content_length(self) -> int:
        return len(self.body) if self.length is None else self.length
