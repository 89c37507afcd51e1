"""Store ids of the OPIC checkpoint's URLs, kept from one checkpoint to the next.

A checkpoint (:class:`metadata.SaveOpic`) names every page the crawl's OPIC knows, in the
order it met them; the writer puts each page's cash, history and estimate on its ``urls``
row, so it needs the row ids. The pages only grow, appended (``xyro.crawl.opic_online``),
so a checkpoint's URL list extends the last one: only the URLs added since, and those not
stored at the last look-up, are resolved, rather than every page at every checkpoint (the
resolver reads each URL's row back: about 10 µs a URL, so 10 s of the writer every
interval for a million pages). A list that does not extend the last one (OPIC started
afresh) is resolved whole.
"""

from __future__ import annotations

import numpy as np

from metadata.resolver import UrlResolver


class CheckpointIds:
    """Row ids of a checkpoint's URLs (-1: not stored), looked up once per URL."""

    def __init__(self, resolver: UrlResolver) -> None:
        self._resolver = resolver
        self._urls: tuple[str, ...] = ()
        self._ids = np.empty(0, dtype=np.int64)

    def ids(self, urls: tuple[str, ...]) -> np.ndarray:
        """The id of each of ``urls`` (aligned; -1 where the URL has no row yet)."""
        known = len(self._urls)
        # Tuple equality compares the shared str objects by identity first: cheap.
        if len(urls) < known or urls[:known] != self._urls:
            known = 0
        ids = np.concatenate([self._ids[:known],
                              np.full(len(urls) - known, -1, dtype=np.int64)])
        missing = np.flatnonzero(ids < 0).tolist()
        if missing:
            wanted = [urls[i] for i in missing]
            found = self._resolver.lookup(wanted)
            ids[missing] = [found.get(url, -1) for url in wanted]
        self._urls, self._ids = urls, ids
        return ids

    def forget(self) -> None:
        """Drop every id (after a rolled-back transaction: one may name a row it undid)."""
        self._urls, self._ids = (), self._ids[:0]
