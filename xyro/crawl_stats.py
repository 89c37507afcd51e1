"""Counters of a crawl: what an operator wants to see in progress lines and ``xyro status``."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CrawlStats:
    """Thread-safe counters. Rates use real elapsed time (what an operator experiences)."""

    started_monotonic: float = field(default_factory=time.monotonic)
    pages: int = 0
    robots_fetches: int = 0
    bytes: int = 0
    not_modified: int = 0
    changed: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    discovered: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def page(self, page_type: str, size: int, error_kind: str | None, not_modified: bool) -> None:
        with self._lock:
            self.pages += 1
            self.bytes += size
            self.by_type[page_type] += 1
            if error_kind:
                self.errors[error_kind] += 1
            if not_modified:
                self.not_modified += 1

    def robots_fetch(self) -> None:
        with self._lock:
            self.robots_fetches += 1

    def refuse(self, reason_kind: str) -> None:
        with self._lock:
            self.refused[reason_kind] += 1

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_monotonic

    def snapshot(self, **extra: Any) -> dict[str, Any]:
        """A JSON-ready copy: counters, pages/s, and whatever the engine adds (queue sizes)."""
        with self._lock:
            elapsed = max(self.elapsed_s, 1e-9)
            return {
                "pages": self.pages,
                "pages_per_s": round(self.pages / elapsed, 2),
                "elapsed_s": round(elapsed, 2),
                "robots_fetches": self.robots_fetches,
                "bytes": self.bytes,
                "not_modified": self.not_modified,
                "discovered": self.discovered,
                "by_type": dict(self.by_type),
                "errors_by_kind": dict(self.errors),
                "refused_by_reason": dict(self.refused),
                **extra,
            }

    def progress_line(self, queued: int) -> str:
        snap = self.snapshot()
        errors = sum(self.errors.values())
        return (f"{snap['pages']} pages ({snap['pages_per_s']:.1f}/s), {queued} queued, "
                f"{snap['discovered']} discovered, {errors} errors")
