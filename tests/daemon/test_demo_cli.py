"""``xyro demo`` end to end, as a new user runs it: the daemon on the synthetic web with an
accelerated clock, progress on stderr, a closing summary with the web's own audit, and the
demo database that ``xyro --demo status`` then reads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def _xyro(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xyro", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def test_demo_page_budget_is_exact_and_the_audit_clean(tmp_path: Path) -> None:
    # A web of 3,000 pages: the daemon's budget is a tenth of it per unit, so the 300 pages
    # take at most the rest of the current unit and the next one.
    run = _xyro(tmp_path, "demo", "--hosts", "6", "--web-pages", "3000", "--pages", "300",
                "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["stop_reason"] == "page budget reached"
    assert report["pages_fetched"] == 300     # robots-refused URLs are not counted as fetched
    # Every fetch reached the web: pages, and the DTDs/entities their documents needed.
    assert report["audit"]["page_requests"] + report["audit"]["dtd_and_entity_requests"] == 300
    assert report["audit"]["robots_requests"] == report["robots_fetches"]
    assert report["audit"]["disallowed_fetched"] == 0
    assert report["audit"]["politeness_violations"] == 0
    assert report["simulated_s"] > report["real_s"] > 0     # both times, each labelled
    assert report["opic"]["checkpoints"] >= 1 and abs(report["opic"]["total_cash"] - 1) < 1e-12
    assert "simulated" in run.stderr and "pages fetched" in run.stderr
    assert "INFO" not in run.stderr   # the daemon's log does not break the progress line

    status = _xyro(tmp_path, "--demo", "status")
    assert status.returncode == 0, status.stderr
    assert "(schema version 11)" in status.stdout and "OPIC:" in status.stdout


def test_demo_runs_the_daemon_loop_through_time_units(tmp_path: Path) -> None:
    """A time budget of four demo units: the planner plans more than once, the daemon ranks."""
    run = _xyro(tmp_path, "demo", "--hosts", "4", "--web-pages", "300", "--no-hostile",
                "--seconds", "2400", "--speed", "300", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["stop_reason"] == "time budget reached"
    assert report["audit"]["politeness_violations"] == 0
    db = tmp_path / "var" / "demo" / "xyro.db"
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        jobs = dict(conn.execute("SELECT name, count(*) FROM job_runs GROUP BY name"))
    finally:
        conn.close()
    assert jobs.get("plan", 0) >= 2 and jobs.get("rank", 0) >= 1, jobs

    # `xyro --demo plan` plans as the demo did: its 600 s units and its bandwidth (a tenth of
    # the web), not the configuration's day; `--run` leaves its folders in those units.
    plan = _xyro(tmp_path, "--demo", "plan", "--json")
    assert plan.returncode == 0, plan.stderr
    assert abs(json.loads(plan.stdout)["current_unit"] - time.time() // 600) <= 1
    ran = _xyro(tmp_path, "--demo", "plan", "--run", "--json")
    assert ran.returncode == 0, ran.stderr
    conn = sqlite3.connect(db)
    try:
        folder_unit = conn.execute("SELECT value FROM state WHERE key = 'folders.unit_s'")
        assert float(json.loads(folder_unit.fetchone()[0])) == 600
    finally:
        conn.close()


def test_the_demo_store_is_always_beside_the_configured_one(tmp_path: Path) -> None:
    """An operator's database in a folder named demo stays the operator's: the demo nests
    its own store below it; and ``xyro --demo demo`` is the plain demo, not a demo in demo."""
    operator = tmp_path / "demo" / "xyro.db"
    small = ("--hosts", "2", "--no-hostile", "--web-pages", "40", "--pages", "10", "--json")
    run = _xyro(tmp_path, "--set", f"storage.database={operator}", "demo", *small)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout)["database"] == str(tmp_path / "demo" / "demo" / "xyro.db")
    assert not operator.exists()
    again = _xyro(tmp_path, "--demo", "demo", *small)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["database"] == "var/demo/xyro.db"
    assert (tmp_path / "var" / "demo" / "xyro.db").exists()
    assert not (tmp_path / "var" / "demo" / "demo").exists()


def _hosts(db: Path) -> set[str]:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return {h for (h,) in conn.execute("SELECT host FROM hosts")}
    finally:
        conn.close()


def test_each_demo_starts_a_fresh_demo_database(tmp_path: Path) -> None:
    # The web listens on new ports each run: the last run's URLs would stay queued for
    # good, and status would show both webs together.
    db = tmp_path / "var" / "demo" / "xyro.db"
    runs = []
    for _ in range(2):
        run = _xyro(tmp_path, "demo", "--hosts", "3", "--web-pages", "30", "--pages", "20",
                    "--no-hostile", "--json")
        assert run.returncode == 0, run.stderr[-3000:]
        runs.append(_hosts(db))
    assert len(runs[0]) == len(runs[1]) == 3, runs   # the second web's hosts alone


def test_demo_status_before_any_demo_says_to_run_the_demo(tmp_path: Path) -> None:
    status = _xyro(tmp_path, "--demo", "status")
    assert status.returncode == 2 and "Traceback" not in status.stderr
    assert "run `xyro demo` first" in status.stderr and "xyro init" not in status.stderr
