"""What ``xyro demo`` shows while it runs: one progress line, and the daemon's log quiet."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import click

from xyro.cli.status_text import duration, fetched_pages


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """The demo's own lines on the terminal: the daemon's log would break the progress line
    (errors still show; the hostile pages' warnings are counted in the closing summary)."""
    logger = logging.getLogger("xyro")
    level = logger.level
    logger.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        logger.setLevel(level)


class Progress:
    """One progress line on stderr, rewritten in place on a terminal (a line every 10 s
    otherwise): simulated time and unit, pages fetched against the budget, XML stored, the
    refresh unit's due pages and the planner's predicted obsolescence against Ω(G).

    Simulated and real times are labelled as such; the line appears with the first report,
    so an error before the crawl starts stays the one line on stderr.
    """

    def __init__(self, total: int | None, seconds: float | None, speed: float) -> None:
        self._total = total
        self._seconds = seconds
        self._speed = speed
        self._tty = sys.stderr.isatty()
        self._shown = False
        self._last_line = 0.0
        self._first_unit: int | None = None
        self.simulated_s = 0.0

    def __enter__(self) -> "Progress":
        return self

    def __call__(self, snap: dict[str, Any]) -> None:
        self.simulated_s = float(snap.get("simulated_s", 0.0))
        line = self.line(snap)
        if self._tty:
            click.echo("\r\x1b[2K" + line, nl=False, err=True)
            self._shown = True
        elif time.monotonic() - self._last_line >= 10.0:
            click.echo(line, err=True)
            self._last_line = time.monotonic()

    def line(self, snap: dict[str, Any]) -> str:
        fetched, _refused = fetched_pages(snap)
        budget = f"/{self._total:,}" if self._total else ""
        sim = f"simulated {duration(self.simulated_s)}"
        if self._seconds:
            sim += f"/{duration(self._seconds)}"
        unit = snap.get("unit")
        plan = ""
        if unit is not None:
            self._first_unit = unit if self._first_unit is None else self._first_unit
            plan = (f" · time unit {unit - self._first_unit + 1}: "
                    f"{snap.get('due_this_unit') or 0:,} due, predicted obsolescence "
                    f"{snap.get('omega_plan', 0):.3g} (Ω(G) {snap.get('omega_g', 0):.3g})")
        xml = (snap.get("by_type") or {}).get("xml", 0)
        return (f"{sim} · {fetched:,}{budget} pages fetched · {xml:,} XML stored{plan} · "
                f"{snap.get('pages_per_s', 0):.0f} pages/real s")

    def __exit__(self, *exc: object) -> None:
        if self._shown:
            click.echo("", err=True)
