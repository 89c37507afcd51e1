"""The crawler's seen-set: the paper's bit table T(h(u)) as a Bloom filter (003 §3).

003 §3: "a hash function h over URLs and a table T such that T(h(u)) is 1 if u has already
been fetched ... Errors will occur because the URL of a page may hash to the same integer as
that of a page Xyleme already read. Such errors are acceptable since even a page first
wrongly omitted by Xyro will eventually be read later when the Refresh Module decides to
order so." A Bloom filter with k bits per URL gives a much lower error for the same memory
than the paper's single-bit table.

Sizing for n expected URLs and target false-positive rate p (standard Bloom filter optimum):

    m = ⌈−n·ln p / (ln 2)²⌉ bits,   k = max(1, round(m/n · ln 2)) hash positions,
    FP rate after n insertions ≈ (1 − e^(−k·n/m))^k ≈ p.

For p = 1e-3 that is 14.4 bits (1.8 bytes) per URL and k = 10; 10 million URLs take 18 MB.

What a false positive costs: a never-seen URL is reported as seen, so discovery skips it —
with probability ≈ p per new URL while at most n URLs were inserted (more insertions raise
the rate; :meth:`SeenSet.estimated_fp_rate` reports the current one from the fill). The loss
is bounded by p × (new URLs offered) and, as the paper says, temporary for any URL that is
reached again through refresh. There are no false negatives: a URL added is always seen.

Hashing: one 128-bit BLAKE2b digest per URL split into h1, h2 (64 bits each); positions
g_i = ((h1 + i·h2) mod 2⁶⁴) mod m, i = 0..k−1 (double hashing, Kirsch & Mitzenmacher 2006;
h2 forced odd so it never degenerates to one position; the 64-bit wrap lets
:meth:`SeenSet.add_many` compute a batch's positions in numpy, the same as :meth:`add`'s).

Thread-safe: :meth:`add`, :meth:`add_many` and ``in`` take one lock (check-and-set is atomic).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterable

import numpy as np

_MASK64 = (1 << 64) - 1
#: Bits set in each byte value (the fill after a batch is counted from the table).
_BITS_IN = np.array([bin(value).count("1") for value in range(256)], dtype=np.uint8)


class SeenSet:
    """A Bloom filter over canonical URLs sized for ``expected`` URLs at ``false_positive_rate``."""

    def __init__(self, expected: int, false_positive_rate: float = 1e-3) -> None:
        if expected < 1:
            raise ValueError(f"seen-set expected number of URLs must be >= 1, got {expected}")
        if not 0.0 < false_positive_rate < 1.0:
            raise ValueError(
                f"seen-set false_positive_rate must be in (0, 1), got {false_positive_rate}")
        self.expected = int(expected)
        self.target_fp_rate = float(false_positive_rate)
        self.m_bits = self.bits_for(self.expected, self.target_fp_rate)
        self.k = max(1, round(self.m_bits / self.expected * math.log(2)))
        self._bits = np.zeros((self.m_bits + 7) // 8, dtype=np.uint8)
        self._view = memoryview(self._bits)  # fast scalar access to the numpy buffer
        self._count = 0
        self._set_bits: int | None = 0  # None: to count again (after add_many)
        self._lock = threading.Lock()

    @staticmethod
    def bits_for(expected: int, false_positive_rate: float) -> int:
        """m = ⌈−n·ln p / (ln 2)²⌉ bits for n URLs at false-positive rate p."""
        return max(8, math.ceil(-expected * math.log(false_positive_rate) / math.log(2) ** 2))

    def _positions(self, url: str) -> list[int]:
        digest = hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        m = self.m_bits
        out = []
        for _ in range(self.k):   # g_i by additions (cheaper than i·h2 each time)
            out.append(h1 % m)
            h1 = (h1 + h2) & _MASK64
        return out

    def _batch_positions(self, urls: list[str]) -> np.ndarray:
        """:meth:`_positions` of every URL of ``urls``, one row each (uint64 arithmetic
        wraps mod 2⁶⁴ as the scalar version masks)."""
        digests = b"".join(hashlib.blake2b(url.encode("utf-8", "surrogatepass"),
                                           digest_size=16).digest() for url in urls)
        halves = np.frombuffer(digests, dtype="<u8").reshape(-1, 2)
        h1, h2 = halves[:, :1], halves[:, 1:] | np.uint64(1)
        steps = np.arange(self.k, dtype=np.uint64)
        return (h1 + steps * h2) % np.uint64(self.m_bits)

    def add(self, url: str) -> bool:
        """Mark ``url`` as seen; True if it was not seen before (or rather: not reported seen)."""
        positions = self._positions(url)
        view = self._view
        with self._lock:
            new = False
            for pos in positions:
                byte, mask = pos >> 3, 1 << (pos & 7)
                old = view[byte]
                if not old & mask:
                    view[byte] = old | mask
                    if self._set_bits is not None:
                        self._set_bits += 1
                    new = True
            if new:
                self._count += 1
            return new

    def add_many(self, urls: Iterable[str]) -> int:
        """Mark every URL of ``urls`` as seen, in one vectorized step (the start rebuilds
        the filter from every stored URL: about 6× faster than :meth:`add` one by one);
        returns how many were new. A URL whose bits all come from others of the same batch
        counts as new here, where :meth:`add` would have reported it seen (a false
        positive): the bits set are the same."""
        urls = list(urls)
        if not urls:
            return 0
        positions = self._batch_positions(urls)
        byte = (positions >> np.uint64(3)).astype(np.intp)
        mask = np.left_shift(np.uint8(1), (positions & np.uint64(7)).astype(np.uint8))
        with self._lock:
            unset = (self._bits[byte] & mask) == 0
            new = int(np.count_nonzero(unset.any(axis=1)))
            self._set_bits = None  # counted when asked: deduplicating here costs a sort
            np.bitwise_or.at(self._bits, byte.ravel(), mask.ravel())
            self._count += new
        return new

    def __contains__(self, url: object) -> bool:
        if not isinstance(url, str):
            return False
        positions = self._positions(url)
        view = self._view
        with self._lock:
            return all(view[pos >> 3] & (1 << (pos & 7)) for pos in positions)

    def __len__(self) -> int:
        """URLs added that were new to the filter (false positives are not counted)."""
        return self._count

    @property
    def memory_bytes(self) -> int:
        """Size of the bit table in bytes: ⌈m/8⌉."""
        return int(self._bits.nbytes)

    def fill_ratio(self) -> float:
        """Share of the m bits set."""
        with self._lock:
            if self._set_bits is None:
                # A table, not np.bitwise_count: that needs numpy 2 (pyproject allows 1.26).
                self._set_bits = int(_BITS_IN[self._bits].sum(dtype=np.int64))
            return self._set_bits / self.m_bits

    def estimated_fp_rate(self) -> float:
        """Current false-positive probability from the fill: (bits set / m)^k."""
        return self.fill_ratio() ** self.k

    def expected_fp_rate(self, n: int | None = None) -> float:
        """Theoretical rate after ``n`` insertions (default: those so far): (1 − e^(−kn/m))^k."""
        n = self._count if n is None else n
        return (1.0 - math.exp(-self.k * n / self.m_bits)) ** self.k

    def over_capacity(self) -> bool:
        """True once more URLs were added than the filter was sized for (the rate degrades)."""
        return self._count > self.expected
