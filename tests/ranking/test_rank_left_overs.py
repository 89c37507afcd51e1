"""Work folders of rankings killed outright (DESIGN.md §5 "Scale": the out-of-core slices).

SIGKILL (the OOM killer) lets no cleanup run: the spool and slice folders of the ranking stay
beside the database, gigabytes each at 200M links. Their names carry their maker's pid, its
start and its machine, and each ranking starts by removing those whose maker is gone, never
a live process's (two ``xyro rank --edges`` may share a work folder)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from ranking.slices import folder_prefix, machine_tag, process_start
from xyro.jobs.rank_job import UNOWNED_STALE_S, RankParams, rank_graph

REPO = Path(__file__).resolve().parents[2]
LOGGER = "xyro.jobs.rank_job"


def _rank(work_dir: Path) -> None:
    """A small ranking, in memory, working in ``work_dir``."""
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 50, 200).astype(np.int32)
    indptr = np.arange(0, 201, 4, dtype=np.int64)
    rank_graph(indptr, indices, np.arange(50) % 3 == 0, RankParams(work_dir=work_dir))


def _xyro(tmp_path: Path, *args: str) -> subprocess.Popen:
    db = tmp_path / "db" / "xyro.db"
    return subprocess.Popen([sys.executable, "-m", "xyro", "--set", f"storage.database={db}",
                             "--set", f"storage.warehouse_dir={tmp_path / 'wh'}", *args],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "XYRO_CONFIG": os.devnull})


def _wait_for(found, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not found():
        assert proc.poll() is None, f"the ranking exited early ({proc.returncode})"
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.05)


def test_a_killed_rankings_folders_go_at_the_next_ranking(tmp_path: Path, make_store,
                                                          caplog) -> None:
    (tmp_path / "db").mkdir()
    make_store(tmp_path / "db" / "xyro.db", n=1500, m=12_000, seed=5)
    endless = _xyro(tmp_path, "--set", "ranking.memory_budget_mb=1", "--set",
                    "ranking.tolerance=1e-300", "--set", "ranking.max_iter=1000000", "rank")
    try:
        _wait_for(lambda: any((tmp_path / "db").glob("xyro-slices-*/xyro-slices-*/in-idx-*")),
                  endless)
    finally:
        endless.send_signal(signal.SIGKILL)
        endless.wait()
    left = sorted(p.name for p in (tmp_path / "db").glob("xyro-*"))
    assert [name.split("-")[1] for name in left] == ["rank", "slices"]
    assert all(name.split("-")[2].split(".")[0] == str(endless.pid) for name in left)
    caplog.set_level(logging.INFO, logger=LOGGER)
    _rank(tmp_path / "db")
    assert not list((tmp_path / "db").glob("xyro-*"))
    freed = [r.getMessage() for r in caplog.records if "work folder" in r.getMessage()]
    assert len(freed) == 1 and "removed 2 work folder(s)" in freed[0] and "MB freed" in freed[0]
    assert all(name in freed[0] for name in left)


def _folder(where: Path, name: str, age_s: float = 0.0) -> Path:
    """A work folder ``name`` holding one file, last changed ``age_s`` ago."""
    folder = where / name
    folder.mkdir()
    (folder / "importance.bin").write_bytes(b"\0" * 4096)
    then = time.time() - age_s
    for path in (folder / "importance.bin", folder):
        os.utime(path, (then, then))
    return folder


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_live_and_foreign_folders_stay(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    mine = Path(tempfile.mkdtemp(prefix=folder_prefix("rank"), dir=tmp_path))
    live = subprocess.Popen(
        [sys.executable, "-c", "import sys, tempfile; from ranking.slices import folder_prefix;"
         " print(tempfile.mkdtemp(prefix=folder_prefix('slices'), dir=sys.argv[1]),"
         " flush=True); sys.stdin.read()", str(tmp_path)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None
        theirs = Path(live.stdout.readline().strip())
        dead = _dead_pid()
        elsewhere = _folder(tmp_path, f"xyro-rank-{dead}.1-another.host-abcd1234")
        _rank(tmp_path)
        assert mine.is_dir() and theirs.is_dir() and elsewhere.is_dir()
        assert not [r for r in caplog.records if "work folder" in r.getMessage()]
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait()
    _rank(tmp_path)   # its maker is gone now
    assert not theirs.exists() and mine.is_dir() and elsewhere.is_dir()


@pytest.mark.skipif(process_start(os.getpid()) is None, reason="no /proc: start unknown")
def test_a_folder_of_a_pid_now_anothers_goes(tmp_path: Path) -> None:
    """A container's daemon gets the same pid at each restart: a folder with this very pid
    but an earlier start is a killed predecessor's."""
    started = process_start(os.getpid())
    assert started is not None
    before = _folder(tmp_path, f"xyro-rank-{os.getpid()}.{started - 1}-{machine_tag()}-abcd1234")
    dead = _folder(tmp_path, f"xyro-slices-{_dead_pid()}.1-{machine_tag()}-abcd1234")
    _rank(tmp_path)
    assert not before.exists() and not dead.exists()


def test_folders_of_the_older_naming_go_after_a_day_untouched(tmp_path: Path) -> None:
    day = UNOWNED_STALE_S
    old = _folder(tmp_path, "xyro-slices-abcd1234", age_s=day + 60)
    recent = _folder(tmp_path, "xyro-rank-abcd5678", age_s=day - 60)
    written = _folder(tmp_path, "xyro-slices-abcd9012", age_s=day + 60)
    (written / "importance.bin").write_bytes(b"\1" * 8)   # a sweep of a live ranking
    others = [_folder(tmp_path, name, age_s=10 * day)
              for name in ("tmpabcd1234", "xyro-rank-mem-abcd1234", "xyro-cache-abcd1234")]
    _rank(tmp_path)
    assert not old.exists()
    assert all(p.is_dir() for p in [recent, written, *others])
