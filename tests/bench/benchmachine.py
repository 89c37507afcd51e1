"""The machine a benchmark ran on, for its JSON line (shared by the benchmark scripts)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine() -> dict[str, object]:
    """CPU model, cores, RAM (GiB, as ``ram_gb``) and Python version."""
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"cpu": model, "cores": os.cpu_count(), "ram_gb": round(ram / 2**30, 1),
            "python": platform.python_version()}
