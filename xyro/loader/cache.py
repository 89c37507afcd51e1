"""The DTD/entity cache: the only source the loader's resolver may serve from.

Filled by the crawl engine with the bodies of URLs it fetched at the loader's request (at
most ``max_entity_bytes`` each, at most ``max_entries`` of them and ``max_bytes`` in all,
least recently used out first); on a miss it asks its ``fallback`` (the warehouse copy an
earlier run stored), so a restarted crawler does not fetch every DTD again. Failed URLs are
remembered with their reason, so documents needing them fail at
once instead of asking the crawler again, for ``failure_ttl_s`` (by the ``now`` clock)
before it is asked again. A body serves for ``max_age_s`` after its fetch (a stored copy:
after the fetch that stored or confirmed it), then is fetched again: a DTD changes too, and
documents are validated against it. Thread-safe: fetch workers read it while the
dispatcher fills it.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class EntityCache:
    """URL → bytes of fetched DTDs and external entities, capped per entry, in count and in
    total bytes (the newest entry stays even when it alone is larger than ``max_bytes``: a
    document waits for it)."""

    def __init__(self, max_entity_bytes: int = 2 * 2**20, max_entries: int = 1000,
                 fallback: Callable[[str], tuple[bytes, float] | None] | None = None,
                 failure_ttl_s: float = math.inf,
                 now: Callable[[], float] | None = None, max_age_s: float = math.inf,
                 max_bytes: int = 256 * 2**20) -> None:
        self.max_entity_bytes = max_entity_bytes
        # Second level: DTDs/entities stored in the warehouse by an earlier run.
        self._fallback = fallback
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._bodies: OrderedDict[str, tuple[bytes, float]] = OrderedDict()  # (body, fetched)
        self._bytes = 0  # of the bodies held
        self.max_age_s = max_age_s
        self._failed: OrderedDict[str, tuple[str, float]] = OrderedDict()  # (why, when)
        self.failure_ttl_s = failure_ttl_s
        self._now = now or (lambda: 0.0)
        self._lock = threading.Lock()

    def get(self, url: str) -> bytes | None:
        with self._lock:
            body = self._fresh(url)
            if body is not None:
                self._bodies.move_to_end(url)
                return body
        if self._fallback is not None:
            stored = self._fallback(url)
            if stored is not None and self._now() - stored[1] < self.max_age_s \
                    and self.put(url, stored[0], fetched_at=stored[1]) is None:
                return stored[0]
        return None

    def _fresh(self, url: str) -> bytes | None:
        """The cached body of ``url`` unless it is older than ``max_age_s``, then dropped
        (lock held)."""
        entry = self._bodies.get(url)
        if entry is not None and self._now() - entry[1] >= self.max_age_s:
            self._drop(url)
            return None
        return None if entry is None else entry[0]

    def _drop(self, url: str) -> None:
        """Forget the body of ``url``, if held (lock held)."""
        entry = self._bodies.pop(url, None)
        if entry is not None:
            self._bytes -= len(entry[0])

    def failure(self, url: str) -> str | None:
        """Why ``url`` could not be obtained, or None (also once the failure is older than
        ``failure_ttl_s``: it is to be fetched again)."""
        with self._lock:
            return self._unexpired(self._failed, url, self.failure_ttl_s)

    def _unexpired(self, table: OrderedDict[str, tuple[Any, float]], url: str,
                   ttl_s: float) -> Any:
        """``url``'s value in ``table`` (value, since), dropped once ``ttl_s`` old (lock held)."""
        entry = table.get(url)
        if entry is None:
            return None
        if self._now() - entry[1] >= ttl_s:
            del table[url]
            return None
        return entry[0]

    def put(self, url: str, body: bytes, fetched_at: float | None = None) -> str | None:
        """Cache ``body`` for ``url`` (fetched at ``fetched_at``, now by default); returns
        the reason when it is refused (too large)."""
        if len(body) > self.max_entity_bytes:
            reason = (f"{url} is {len(body)} bytes, more than the {self.max_entity_bytes} "
                      f"bytes a DTD or external entity may have (loader.max_entity_bytes)")
            self.fail(url, reason)
            return reason
        with self._lock:
            self._failed.pop(url, None)
            self._drop(url)
            self._bodies[url] = (body, self._now() if fetched_at is None else fetched_at)
            self._bytes += len(body)
            # Least recently used first, never the entry just put.
            while len(self._bodies) > 1 and (len(self._bodies) > self.max_entries
                                             or self._bytes > self.max_bytes):
                self._drop(next(iter(self._bodies)))
        return None

    def fail(self, url: str, reason: str) -> None:
        with self._lock:
            self._drop(url)
            self._failed[url] = (reason, self._now())
            self._failed.move_to_end(url)
            while len(self._failed) > self.max_entries:
                self._failed.popitem(last=False)

    def __contains__(self, url: object) -> bool:
        with self._lock:
            return isinstance(url, str) and self._fresh(url) is not None

    def __len__(self) -> int:
        with self._lock:
            return len(self._bodies)
