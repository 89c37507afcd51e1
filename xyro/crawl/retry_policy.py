"""Retrying a URL the server asked us to come back for: 429 and 503 (DESIGN.md §7, §8).

The server is slowed down by the host scheduler (Retry-After sets the host's next start);
this policy decides whether the URL itself goes back into the frontier, and from when: the
Retry-After pause (at most ``max_pause_s``), else 60 s doubled per try, at most
``max_retries`` times, then the answer
is recorded as the page's outcome. Retries belong here and in the scheduler, never in
urllib3's Retry (DESIGN.md §8).
"""

from __future__ import annotations

from xyro.content.page import RETRY_STATUSES


class RetryPolicy:
    """Per-URL try counts of 429/503 answers (dispatcher thread only)."""

    def __init__(self, max_retries: int, base_pause_s: float = 60.0,
                 max_pause_s: float = 3600.0) -> None:
        self.max_retries = max_retries
        self.base_pause_s = base_pause_s
        # The host's cap (crawler.politeness.max_retry_after_s) caps the URL's pause too: a
        # Retry-After of years would otherwise park it, and a crawl waiting for it, for good.
        self.max_pause_s = max_pause_s
        self._tries: dict[str, int] = {}

    def pause(self, url: str, status: int | None, retry_after_s: float | None) -> float | None:
        """Seconds to wait before fetching ``url`` again, or None: record this answer."""
        if status not in RETRY_STATUSES:
            self._tries.pop(url, None)  # answered: the next 503 starts counting afresh
            return None
        tries = self._tries.get(url, 0)
        if tries >= self.max_retries:
            del self._tries[url]
            return None
        self._tries[url] = tries + 1
        pause = retry_after_s if retry_after_s is not None else self.base_pause_s * 2 ** tries
        return min(pause, self.max_pause_s)
