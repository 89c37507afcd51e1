"""The synthetic web's request log: every request served, for tests to check crawlers by.

Times: ``start``/``end`` are real monotonic seconds (``time.monotonic``) of the handler,
``clock`` is the injected clock's time when the handler started (what the reply was computed
for), ``arrival`` the injected clock's time when the request's bytes reached the server's
socket (the kernel's receive stamp, see :mod:`xyro.synthweb.server`), with
``arrival_error`` a bound on that time's error measured at the conversion. Politeness rules
(DESIGN.md §7) are about what reaches the server, so they are judged on :attr:`arrived`:
under load the handler starts up to a tenth of a second after the bytes arrived, by a lag
that differs from request to request. A record is in the log before the client can have the
whole response (small replies are logged complete just before their single write; streamed
ones get ``end`` and ``bytes`` when done).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(slots=True)
class RequestRecord:
    start: float
    end: float | None        # None while a streamed or dripped body is still being sent
    clock: float
    host: str
    port: int
    method: str
    target: str              # path + query as requested
    status: int
    bytes: int               # body bytes actually written
    user_agent: str | None
    if_none_match: str | None
    if_modified_since: str | None
    arrival: float | None = None  # None where the platform gives no receive stamps
    arrival_error: float = 0.0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.target}"

    @property
    def arrived(self) -> float:
        """When the request reached the server (clock time): ``arrival``, else the handler's
        start ``clock`` (later than the arrival by the handler's lag)."""
        return self.clock if self.arrival is None else self.arrival


class RequestLog:
    """Thread-safe, append-only list of :class:`RequestRecord`."""

    def __init__(self) -> None:
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def requests(self, host: str | None = None, path: str | None = None,
                 status: int | None = None, method: str | None = None) -> list[RequestRecord]:
        """Records in completion order, filtered; ``path`` matches the target without query."""
        with self._lock:
            records = list(self._records)
        return [r for r in records
                if (host is None or r.host == host)
                and (path is None or r.target.split("?", 1)[0] == path)
                and (status is None or r.status == status)
                and (method is None or r.method == method)]

    def max_in_flight(self, host: str) -> int:
        """Most requests to ``host`` that were being served at the same real instant."""
        records = self.requests(host=host)
        inf = float("inf")
        events = sorted([(r.start, 1) for r in records]
                        + [(inf if r.end is None else r.end, -1) for r in records])
        peak = level = 0
        for _, step in events:  # at equal times the end (-1) sorts first: touching is fine
            level += step
            peak = max(peak, level)
        return peak

    def min_start_gap(self, host: str) -> float | None:
        """Smallest clock-time gap between two consecutive request arrivals at ``host``
        (what a politeness delay bounds from below); None with fewer than 2 requests."""
        starts = sorted(r.arrived for r in self.requests(host=host))
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        return min(gaps) if gaps else None

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def dump_jsonl(self, path: Path | str) -> int:
        """Write every record as one JSON object per line; returns the count."""
        records = self.requests()
        Path(path).write_text("".join(json.dumps(asdict(r)) + "\n" for r in records),
                              encoding="utf-8")
        return len(records)

    @staticmethod
    def load_jsonl(path: Path | str) -> list[RequestRecord]:
        lines: Iterable[str] = Path(path).read_text(encoding="utf-8").splitlines()
        return [RequestRecord(**json.loads(line)) for line in lines if line.strip()]
