"""The machine a benchmark ran on, for its JSON line: the one definition every benchmark in
tests/bench imports (``from benchmachine import machine``; tests/bench is sys.path[0] when a
benchmark runs as a script).

Keys, the same in every benchmark so figures can be compared across them: ``cpu`` (model
name), ``cores``, ``ram_gb`` (GiB), ``python``, ``load_avg_1min_at_start``, plus whatever
keyword extras a benchmark passes (``machine(sqlite=sqlite3.sqlite_version)``).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

# Taken when the benchmark imports this module, i.e. before it starts measuring: a load
# average read when the JSON line is written would count the benchmark's own work, and
# what matters for a figure is how busy the machine was with everything else.
_LOAD_AT_IMPORT = round(os.getloadavg()[0], 2)

BASE_KEYS = ("cpu", "cores", "ram_gb", "python", "load_avg_1min_at_start")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gb() -> float:
    """Physical memory in GiB (one decimal)."""
    return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)


def machine(**extras: object) -> dict[str, object]:
    """The base keys plus ``extras`` (e.g. library versions the figures depend on).

    An extra may not redefine a base key: that is how the copies used to drift apart.
    """
    clash = set(extras) & set(BASE_KEYS)
    if clash:
        raise ValueError(f"machine(): {sorted(clash)} are base keys, not extras")
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "ram_gb": ram_gb(),
            "python": platform.python_version(), "load_avg_1min_at_start": _LOAD_AT_IMPORT,
            **extras}


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), in MB; NaN where /proc is unavailable.

    VmHWM rather than ru_maxrss: the latter carries the parent's peak over fork + exec.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")
