"""OPIC in the crawl (000/004, DESIGN.md §5): the URL-level state, its checkpoints through the
writer, and a crawl killed with SIGKILL that continues from its last checkpoint with the total
cash conserved and its estimates carried on."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ranking.opic import OpicParams
from xyro.clock import WallClock
from xyro.crawl.opic_online import Focus, OnlineOpic
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

SPEC = WebSpec(seed=5, n_hosts=6, n_pages=400, hostile=frozenset(), crawl_delay_share=0.0)


def _total(opic: OnlineOpic) -> float:
    return float(opic.snapshot()["total_cash"])


def test_visits_new_pages_and_focus_keep_the_total_cash() -> None:
    opic = OnlineOpic(OpicParams(damping=0.85), Focus(xml=True, patterns=(r"\.rss$",), boost=2.0))
    rng = np.random.default_rng(7)
    pages = [f"http://h{k % 5}.example/p{k}" for k in range(60)]
    for step in range(2000):
        page = pages[int(rng.integers(len(pages)))]
        kids = [pages[int(j)] for j in rng.integers(len(pages), size=6)]
        kids.append(f"http://h0.example/new{step}.rss")        # focus by pattern
        flags = [bool(f) for f in rng.integers(2, size=len(kids))]  # focus by XML look
        opic.visit(page, kids, flags)
    snap = opic.snapshot()
    assert snap["pages"] == 60 + 2000 and snap["visits"] == 2000
    assert snap["focus_granted"] > 0
    assert abs(_total(opic) - 1.0) <= 1e-12
    urls, estimate = opic.estimates()
    assert len(urls) == snap["pages"] and abs(float(estimate.sum()) - 1.0) <= 1e-12


@pytest.mark.parametrize(("estimate", "kernels"), [
    ("inflow", "opic_select._visit_one"),
    ("fixed_window", "opic_select._visit_one, opic_adaptive._window_rates")])
def test_the_crawl_builds_opic_with_its_kernels_loaded(tmp_path: Path, estimate: str,
                                                       kernels: str) -> None:
    """app.build_opic runs every kernel a crawl calls on a scratch state (numba loads a
    kernel at its first call): a fresh process, so no other test loaded them first; the
    crawl's own state is left empty."""
    code = f"""
import json
from ranking import opic_adaptive, opic_select
from xyro.app import App, build_opic
from xyro.clock import WallClock
from xyro.config_load import load_config
db = {str(tmp_path / "x.db")!r}
app = App(load_config(None, {{}}, [f"storage.database={{db}}",
                                  "storage.warehouse_dir={tmp_path / 'w'}",
                                  "ranking.opic.estimate={estimate}"]), WallClock())
kernels = ({kernels},)
before = [len(k.signatures) for k in kernels]
with app.open_store(create=True) as store:
    opic = build_opic(app, store, [].append)
print(json.dumps([before, [len(k.signatures) for k in kernels], len(opic.opic), opic.opic.visits]))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-3000:]
    n = kernels.count(",") + 1
    assert json.loads(run.stdout.splitlines()[-1]) == [[0] * n, [1] * n, 0, 0]


def test_checkpoint_round_trip_is_exact_and_carries_on() -> None:
    opic = OnlineOpic()
    for k in range(200):
        opic.visit(f"http://a.example/{k % 17}", [f"http://a.example/{(k * 7 + j) % 23}"
                                                 for j in range(3)])
    data = opic.checkpoint()
    again = OnlineOpic.from_checkpoint(data.data)
    assert again.snapshot() == {**opic.snapshot(), "visits": 0}
    assert [again.cash(u) for u in data.urls] == [opic.cash(u) for u in data.urls]
    for twin in (opic, again):
        twin.visit("http://a.example/3", ["http://a.example/new"])
    assert again.cash("http://a.example/new") == opic.cash("http://a.example/new")
    assert again.cash("http://never.example/") == 0.0


@pytest.mark.parametrize("blob, message", [
    (b"not a checkpoint", "does not decode"),
    (b"", "does not decode"),
])
def test_a_damaged_checkpoint_is_a_clear_error(blob: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        OnlineOpic.from_checkpoint(blob)
    assert "DELETE FROM opic_checkpoint" in str(err.value)


def test_a_checkpoint_without_its_url_list_is_refused() -> None:
    arrays = OnlineOpic().checkpoint()
    with np.load(io.BytesIO(arrays.data)) as npz:
        kept = {k: npz[k] for k in npz.files if k != "urls"}
    buffer = io.BytesIO()
    np.savez(buffer, **kept)
    with pytest.raises(ValueError, match="no URL list"):
        OnlineOpic.from_checkpoint(buffer.getvalue())


# -- the crawl, killed and restarted -------------------------------------------------------

def _xyro(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "xyro", "--config", str(config), *args]


def _checkpoint(db: Path) -> tuple[OnlineOpic, float] | None:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT data, written_at FROM opic_checkpoint").fetchone()
    except sqlite3.OperationalError:
        return None   # not created yet
    finally:
        conn.close()
    return None if row is None else (OnlineOpic.from_checkpoint(bytes(row[0])), row[1])


def test_sigkill_then_restart_continues_from_the_checkpoint(tmp_path: Path) -> None:
    with SyntheticWeb(SPEC, WallClock()) as web:
        config = tmp_path / "xyro.yaml"
        config.write_text(
            f"seeds: {json.dumps(web.seeds)}\n"
            "scope: {allow_private_addresses: true}\n"
            "crawler: {workers: 4, politeness: {delay_s: 0.05}}\n"
            "ranking: {importance: opic, opic: {checkpoint_interval_s: 0.3}}\n"
            f"storage: {{database: '{tmp_path / 'xyro.db'}', warehouse_dir: '{tmp_path / 'w'}'}}\n")
        subprocess.run(_xyro(config, "init"), check=True, capture_output=True, timeout=60)
        db = tmp_path / "xyro.db"
        proc = subprocess.Popen(_xyro(config, "crawl"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 60
        first = None
        while first is None or first[0].snapshot()["pages"] < 150:
            assert proc.poll() is None, f"crawler exited early: {proc.communicate()}"
            assert time.monotonic() < end, "no OPIC checkpoint of 150 pages within 60 s"
            time.sleep(0.1)
            first = _checkpoint(db)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        before, _ = _checkpoint(db)  # the last one written before the kill
        assert abs(_total(before) - 1.0) <= 1e-12
        urls_before, _ = before.estimates()
        history_before = dict(zip(urls_before, before.checkpoint().history))

        done = subprocess.run(_xyro(config, "crawl", "--pages", "80"), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        after, _ = _checkpoint(db)
        snap_before, snap_after = before.snapshot(), after.snapshot()
        assert abs(_total(after) - 1.0) <= 1e-12          # conserved across the crash
        assert snap_after["clock_g"] > snap_before["clock_g"]   # the clock G went on
        urls_after, estimate = after.estimates()
        assert urls_after[:len(urls_before)] == urls_before     # same pages, same ids
        history_after = after.checkpoint().history
        assert all(history_after[i] >= history_before[u] for i, u in enumerate(urls_before))
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            total, n = conn.execute("SELECT sum(opic_estimate), count(opic_estimate) "
                                    "FROM urls").fetchone()
            mean_importance, = conn.execute("SELECT avg(importance) FROM urls "
                                            "WHERE opic_estimate IS NOT NULL").fetchone()
        finally:
            conn.close()
        # Every page OPIC met is a stored URL; ranking.importance: opic gives the planner
        # N·estimate (mean 1).
        assert n == len(urls_after) and abs(total - 1.0) < 1e-9
        assert abs(mean_importance - 1.0) < 1e-9
        assert float(estimate.sum()) == pytest.approx(1.0, abs=1e-12)
