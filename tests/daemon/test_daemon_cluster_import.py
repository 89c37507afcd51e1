"""``ranking.cluster`` where Dask's ``distributed`` is installed but cannot be imported: the
ranking runs on this host after one warning naming what failed, as when the scheduler is
unreachable. Under the unit's ``ProcSubset=pid`` its import (psutil reading /proc/meminfo)
raised FileNotFoundError, which escaped as a traceback from every ranking run."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from xyro.jobs.rank_cluster import ClusterMissing, load_distributed, open_cluster

ROOT = Path(__file__).parents[2]
#: As systemd mounts /proc for ProcSubset=pid and ProtectProc=invisible, in a private mount
#: namespace (needs root, or an unprivileged user namespace).
PROC_SUBSET = ("unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount -t proc -o subset=pid,hidepid=invisible proc /proc && exec "$@"', "sh")
FALLBACK = """
import logging, sys
logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(message)s")
from xyro.jobs.rank_cluster import open_cluster
with open_cluster("tcp://127.0.0.1:9", 1.0) as session:
    print("session:", session)
"""


def test_an_import_failing_under_proc_subset_falls_back_to_this_host(tmp_path: Path) -> None:
    probe = subprocess.run([*PROC_SUBSET, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a ProcSubset=pid /proc here: {probe.stderr.decode()!r}")
    done = subprocess.run([*PROC_SUBSET, sys.executable, "-c", FALLBACK], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                               "NUMBA_CACHE_DIR": str(tmp_path / "numba")})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "session: None", done.stdout
    warnings = [line for line in lines if line.startswith("WARNING ")]
    assert len(warnings) == 1, done.stdout
    assert re.search(r"import failed \(FileNotFoundError: .*/proc/meminfo.*ProcSubset=pid.*"
                     r"ranking on this host instead$", warnings[0]), warnings[0]


@pytest.fixture
def broken_distributed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``distributed`` first on the path whose import fails as under ProcSubset=pid (the
    real one is restored after the test)."""
    package = tmp_path / "shadow" / "distributed"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "raise FileNotFoundError(2, 'No such file or directory', '/proc/meminfo')\n")
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.delitem(sys.modules, "distributed", raising=False)


@pytest.mark.usefixtures("broken_distributed")
def test_any_import_failure_is_cluster_missing_naming_it(
        caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ClusterMissing) as info:
        load_distributed()
    message = str(info.value)
    assert "import failed (FileNotFoundError:" in message and "/proc/meminfo" in message
    assert "remove ProcSubset=pid" in message and info.value.exit_code == 2
    with caplog.at_level(logging.WARNING, logger="xyro.jobs.rank_cluster"), \
            open_cluster("tcp://127.0.0.1:9", 1.0) as session:
        assert session is None
    assert [r.getMessage().endswith("ranking on this host instead") for r in caplog.records] \
        == [True]
    with pytest.raises(ClusterMissing):   # `xyro rank --cluster`: exit 2, not a traceback
        with open_cluster("tcp://127.0.0.1:9", 1.0, required=True):
            pass


def test_the_unit_says_ranking_cluster_needs_proc_subset_removed() -> None:
    lines = (ROOT / "systemd" / "xyro.service").read_text().splitlines()
    at = lines.index("ProcSubset=pid")   # the hardening stays
    comment = []
    for line in reversed(lines[:at]):
        if not line.startswith("#"):
            break
        comment.insert(0, line)
    text = " ".join(comment)
    assert "ranking.cluster" in text and "/proc/meminfo" in text, comment
