"""``xyro run`` killed with SIGKILL at 20 seeded-random moments and restarted each time.

DESIGN.md §7: "kill -9 at any moment loses at most the last unflushed batch and never
corrupts the store". The daemon runs as a real subprocess on a config file; the synthetic web
runs in the test process on the wall clock. ``xyro run`` has no accelerated clock (its App is
built on the wall clock; only ``xyro demo`` accelerates), so the schedules are made short
instead: the refresh planner runs every second (``refresh.time_unit_s: 1``, plus once at each
start) and the ranking job every 1.5 s, both many times in the test. Some kills come right
after the log says a unit was planned or a ranking run finished (the job's writes are then in
the writer's queue or being committed), some at a predicted planner start, the others at
random moments.

After each kill, on the dead store:

* ``PRAGMA integrity_check`` is ok;
* nothing committed is lost: every URL known, and every URL queued, in a snapshot read from
  the live store just before the kill (and after the previous kill) is still known; each of
  those queued URLs is still queued, or was fetched since, or was refused;
* every unread URL is queued: a restart rebuilds the seen-set from the known URLs, so an
  unread URL outside the frontier would never be fetched;
* only the last moments may be lost: every page the web served to the daemon more than
  ``FLUSH_WINDOW_S`` + ``SLACK_S`` before the kill is recorded (its ``accesses`` grew by as
  many fetches), and so are the links it carries (same transaction);
* every ``xml_versions`` row's blob is in the warehouse (read through
  :class:`~xyro.loader.warehouse.Warehouse`, which checks the SHA-256 name) with the row's
  MD5 and size;
* the folders still hold every known page (DESIGN.md §6, :mod:`xyro.jobs.plan_job`): a
  fetched HTML/XML page with an interval t_i has a folder (always: one ``SetRefresh`` row,
  and the writer re-files only pages with a t_i); and when the stored ledger is the one of the
  last unit whose writes began (``refresh.run`` = the ledger's token, i.e. that unit's writes
  all committed), every fetched HTML/XML page the planner has seen (an observation at or below
  the ledger's watermark) is in a folder unless the planner took it out of the plan on
  purpose (rate estimated, no weight key: r = 0 or below the floor). A unit whose writes a
  kill cut short must be followed by a full-scan rebuild (the next ``plan`` job run says so).

At the end the daemon runs uninterrupted until the web is exhausted (every page the seeds
lead to through followed links of allowed pages is known, nothing is unread, no URL never
fetched is queued), stops cleanly, passes the checks above once more, and knows, and has
fetched, exactly the URLs an uninterrupted run of the same web has. That run goes on from the
start in parallel, on the same servers (so the URLs, ports included, are the same), in its
own folder, with its own user agent so the web's request log tells the two apart.

A kill counts as landing in planning (ranking) when it came within ``FLUSH_WINDOW_S`` after
the job's log line, whose writes were then submitted but perhaps not committed, or when the
store shows it: fewer ``plan`` (``rank``) job runs committed than the run logged, or a torn
unit. Both jobs take milliseconds on this web, so kills land in their writes, rarely in their
computation. Run with ``-n 0 -s`` (one process, output shown) to see where each kill landed.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from xyro.clock import WallClock
from xyro.loader.warehouse import Warehouse
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

SPEC = WebSpec(seed=21, n_hosts=4, n_pages=300, hostile=frozenset(), crawl_delay_share=0.0)
KILLS = 20
RNG_SEED = 20_611
#: The writer commits what arrived within this many seconds of a batch's first op (metadata
#: writer's flush_interval_s): a SIGKILL loses at most that window, plus the slack below.
FLUSH_WINDOW_S = 0.5
SLACK_S = 1.0
UNIT_S = 1.0      # refresh.time_unit_s: the planner runs every second
RANK_S = 1.5      # ranking.schedule_s
DELAY_S = 0.15    # politeness: ~27 pages/s over 4 hosts, so discovery lasts many restarts
G = 24            # fetches per unit: the budget binds at times, half of it for discovery
KILL_AGENT = "XyroKill/0.1"
REF_AGENT = "XyroRef/0.1"

READY = re.compile(r"daemon ready")
PLANNED = re.compile(r"refresh unit planned")
RANKED = re.compile(r"ranked \d+ pages")


def _xyro(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "xyro", "--config", str(config), *args]


def _config(tmp_path: Path, web: SyntheticWeb, name: str, agent: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    config = folder / "xyro.yaml"
    config.write_text(
        f"seeds: {json.dumps(web.seeds)}\n"
        "scope: {allow_private_addresses: true}\n"
        f"crawler: {{workers: 4, user_agent: '{agent}', politeness: {{delay_s: {DELAY_S}}}}}\n"
        f"ranking: {{schedule_s: {RANK_S}}}\n"
        f"refresh: {{time_unit_s: {UNIT_S}, bandwidth_pages_per_unit: {G}, "
        "discovery_share: 0.5}\n"
        f"storage: {{database: '{folder / 'xyro.db'}', warehouse_dir: '{folder / 'w'}'}}\n")
    subprocess.run(_xyro(config, "init"), check=True, capture_output=True, timeout=60)
    return config


class Daemon:
    """One ``xyro run`` subprocess and its stderr lines, each with the monotonic time it came."""

    def __init__(self, config: Path) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(_xyro(config, "run"), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        self._eof = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_for(self, pattern: re.Pattern[str], start: int = 0, timeout: float = 30.0) -> int:
        """Index of the first line at or after ``start`` matching ``pattern``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(start, len(self.lines)):
                    if pattern.search(self.lines[i][1]):
                        return i
                start = max(start, len(self.lines))
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    raise AssertionError(f"no {pattern.pattern!r} from the daemon "
                                         f"({'it exited' if self._eof else 'timeout'}):\n"
                                         + self.text()[-3000:])
                self._cond.wait(left)

    def times(self, pattern: re.Pattern[str]) -> list[float]:
        with self._cond:
            return [t for t, line in self.lines if pattern.search(line)]

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def kill(self) -> float:
        """SIGKILL; returns the monotonic time it was sent."""
        at = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)
        self._end()
        assert self.proc.returncode == -signal.SIGKILL, self.text()[-3000:]
        return at

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        self._end()
        return self.proc.returncode

    def _end(self) -> None:
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(10)


@dataclass
class Snapshot:
    """What the store holds at one moment (one read transaction)."""

    urls: dict[str, tuple]            # url -> (type, accesses and robots.txt refusals)
    frontier: set[str]
    max_job: int
    plan_jobs: list[str] = field(default_factory=list)  # details of every plan job run


def _connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    conn.execute("PRAGMA query_only = 1")
    return conn


def snapshot(db: Path) -> Snapshot:
    conn = _connect(db)
    try:
        conn.execute("BEGIN")
        # A URL's records: its accesses, and the refusals of robots.txt (no request made,
        # so no access, but the URL's outcome, which takes it out of the frontier).
        urls = {u: (t, a) for u, t, a in conn.execute(
            "SELECT url, type, accesses + (SELECT count(*) FROM errors e WHERE e.url_id = "
            "urls.id AND e.kind = 'robots') FROM urls")}
        frontier = {u for (u,) in conn.execute(
            "SELECT u.url FROM frontier f JOIN urls u ON u.id = f.url_id")}
        max_job = conn.execute("SELECT coalesce(max(id), 0) FROM job_runs").fetchone()[0]
        plans = [d for (d,) in conn.execute(
            "SELECT detail FROM job_runs WHERE name = 'plan' ORDER BY id")]
        conn.execute("COMMIT")
        return Snapshot(urls, frontier, max_job, plans)
    finally:
        conn.close()


def _state(conn: sqlite3.Connection, key: str) -> object:
    row = conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
    return None if row is None else json.loads(row[0])


def folder_problems(conn: sqlite3.Connection) -> tuple[list[str], str]:
    """Pages the folders lost (module doc), and the planner's state: "none" (no unit wrote
    yet), "whole" (the last unit whose writes began committed them all) or "torn"."""
    problems = [f"t_i but no folder: {u}" for (u,) in conn.execute(
        "SELECT url FROM urls WHERE type IN ('html', 'xml') AND accesses > 0 "
        "AND interval_units IS NOT NULL AND due_unit IS NULL")]
    text = _state(conn, "refresh.ledger")
    ledger = json.loads(text) if isinstance(text, str) else None
    run = _state(conn, "refresh.run")
    status = "none" if run is None else "whole" if ledger and ledger["token"] == run else "torn"
    if status == "whole":
        assert ledger is not None
        problems += [f"seen by the planner, in no folder and not taken out of the plan: {u}"
                     for (u,) in conn.execute(
            "SELECT u.url FROM urls u WHERE u.type IN ('html', 'xml') AND u.accesses > 0 "
            "AND u.due_unit IS NULL AND NOT (u.rate IS NOT NULL AND u.weight IS NULL) "
            "AND EXISTS (SELECT 1 FROM observations o WHERE o.url_id = u.id AND o.id <= ?)",
            (ledger["watermark"],))]
    return problems, status


def version_problems(conn: sqlite3.Connection, warehouse: Warehouse) -> tuple[list[str], int]:
    """XML versions whose bytes are missing or do not match the stored MD5 and size."""
    problems, n = [], 0
    for url, key, md5, size in conn.execute(
            "SELECT u.url, v.storage_key, v.md5, v.size FROM xml_versions v "
            "JOIN urls u ON u.id = v.url_id"):
        n += 1
        try:
            body = warehouse.get(key)
        except Exception as exc:  # WarehouseError, or a key that is not one
            problems.append(f"{url}: {exc}")
            continue
        if hashlib.md5(body, usedforsecurity=False).digest() != md5 or len(body) != size:
            problems.append(f"{url}: blob {key} does not match the row's md5/size")
    return problems, n


@dataclass
class Kill:
    mode: str
    delay: float
    at: float = 0.0
    since_plan: float | None = None   # seconds from the last "unit planned" line to the kill
    since_rank: float | None = None
    plan_cut: bool = False   # a unit logged as planned had not committed its job run
    rank_cut: bool = False
    torn: bool = False       # some of a unit's writes committed, not its ledger
    pages: int = 0           # fetched pages in the store after the kill
    served: int = 0          # page requests of the run checked as recorded

    @property
    def during_plan(self) -> bool:
        return self.plan_cut or self.torn or (self.since_plan is not None
                                               and self.since_plan <= FLUSH_WINDOW_S)

    @property
    def during_rank(self) -> bool:
        return self.rank_cut or (self.since_rank is not None and self.since_rank <= FLUSH_WINDOW_S)


def _requests(web: SyntheticWeb, agent: str, after: float, before: float) -> Counter[str]:
    """Page GETs the daemon with ``agent`` started after ``after`` and saw end before ``before``."""
    return Counter(r.url for r in web.log.requests()
                   if r.user_agent and r.user_agent.startswith(agent.split("/")[0] + "/")
                   and r.method == "GET" and r.target != "/robots.txt"
                   and r.start >= after and r.end is not None and r.end <= before)


def _children(web: SyntheticWeb, url: str) -> set[str]:
    page = web.page_for(url)
    if page is None:
        return set()
    return {web.url_of(l.host, l.path) for l in web.model.pages[page].links if not l.nofollow}


def _reachable(web: SyntheticWeb) -> set[str]:
    """The pages of the web the seeds lead to through followed links of allowed pages."""
    model = web.model
    todo = [model.page_at[(h.index, "/")] for h in model.normal_hosts]
    seen = set(todo)
    while todo:
        page = model.pages[todo.pop()]
        if page.disallowed:
            continue
        for link in page.links:
            child = model.page_at.get((link.host, link.path))
            if not link.nofollow and child is not None and child not in seen:
                seen.add(child)
                todo.append(child)
    return {web.url(p) for p in seen}


def _choose(rng: random.Random) -> tuple[str, float]:
    mode = rng.choices(["plan", "rank", "plan-start", "random"], [0.3, 0.3, 0.15, 0.25])[0]
    if mode == "random":
        return mode, rng.uniform(0.3, 2.5)
    if mode == "plan-start":  # around the planner's next start (it runs every UNIT_S)
        return mode, rng.uniform(-0.02, 0.05)
    return mode, rng.uniform(0.0, FLUSH_WINDOW_S - 0.05)


def _kill_moment(daemon: Daemon, mode: str, delay: float, rng: random.Random) -> float:
    """The monotonic time to kill at, after waiting for the line the mode needs."""
    ready = daemon.wait_for(READY)
    if mode == "random":
        return daemon.lines[ready][0] + delay
    if mode == "plan-start":
        # Units start one UNIT_S apart from the first at the start: predict the next one from
        # the last planned line (the job itself takes milliseconds).
        first = daemon.wait_for(PLANNED, ready)
        last = daemon.wait_for(PLANNED, first + 1)
        return daemon.lines[last][0] + UNIT_S * rng.randint(1, 2) + delay
    pattern = PLANNED if mode == "plan" else RANKED
    i = daemon.wait_for(pattern, ready)
    if mode == "plan" and rng.random() < 0.5:  # the start unit, or the next one
        i = daemon.wait_for(pattern, i + 1)
    return daemon.lines[i][0] + delay


def _sleep_until(t: float) -> None:
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


def exhausted(db: Path, pages: set[str]) -> bool:
    """Every page of ``pages`` known, nothing unread, no URL never fetched in the frontier."""
    conn = _connect(db)
    try:
        if pages - {u for (u,) in conn.execute("SELECT url FROM urls")}:
            return False
        unread = conn.execute("SELECT count(*) FROM urls WHERE type = 'unread'").fetchone()[0]
        fresh = conn.execute("SELECT count(*) FROM frontier f JOIN urls u ON u.id = f.url_id "
                             "WHERE u.accesses = 0").fetchone()[0]
        fetched = conn.execute("SELECT count(*) FROM urls WHERE accesses > 0").fetchone()[0]
        return unread == 0 and fresh == 0 and fetched > 0
    finally:
        conn.close()


def check_after_kill(db: Path, warehouse: Warehouse, web: SyntheticWeb, kill: Kill,
                     pre: Snapshot, before: Snapshot, daemon: Daemon) -> Snapshot:
    """Every check of the module doc on the dead store; returns its snapshot."""
    conn = _connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        problems, planner = folder_problems(conn)
        assert not problems, problems[:5]
        bad, _ = version_problems(conn, warehouse)
        assert not bad, bad[:5]
    finally:
        conn.close()
    post = snapshot(db)
    kill.torn = planner == "torn"
    where = f"kill {kill.mode} +{kill.delay:.2f}s"

    # Nothing committed is lost.
    for snap, when in ((before, "after the previous kill"), (pre, "just before the kill")):
        lost = set(snap.urls) - set(post.urls)
        assert not lost, f"{where}: URLs known {when} are gone: {sorted(lost)[:5]}"
        gone = [u for u in snap.frontier if u not in post.frontier
                and post.urls[u][1] <= snap.urls[u][1] and post.urls[u][0] != "refused"]
        assert not gone, f"{where}: URLs queued {when} left the frontier unfetched: {gone[:5]}"
    unqueued = [u for u, (t, _) in post.urls.items() if t == "unread" and u not in post.frontier]
    assert not unqueued, f"{where}: unread URLs outside the frontier: {unqueued[:5]}"

    # Only the last moments may be lost.
    served = _requests(web, KILL_AGENT, daemon.started, kill.at - FLUSH_WINDOW_S - SLACK_S)
    kill.served = sum(served.values())
    for url, n in served.items():
        grew = post.urls.get(url, ("?", 0))[1] - before.urls.get(url, ("?", 0))[1]
        assert grew >= n, f"{where}: {url} served {n}x well before the kill, {grew} recorded"
        missing = _children(web, url) - set(post.urls)
        assert not missing, f"{where}: links of {url} (fetched well before) lost: {missing}"

    # The job runs of this run against its log lines.
    new_plans = post.plan_jobs[len(before.plan_jobs):]
    kill.plan_cut = len(new_plans) < len(daemon.times(PLANNED))
    conn = _connect(db)
    try:
        ranks = conn.execute("SELECT count(*) FROM job_runs WHERE name = 'rank' AND id > ?",
                             (before.max_job,)).fetchone()[0]
    finally:
        conn.close()
    kill.rank_cut = ranks < len(daemon.times(RANKED))
    plans, rankings = daemon.times(PLANNED), daemon.times(RANKED)
    kill.since_plan = min((kill.at - t for t in plans if t <= kill.at), default=None)
    kill.since_rank = min((kill.at - t for t in rankings if t <= kill.at), default=None)
    kill.pages = sum(1 for _, a in post.urls.values() if a > 0)
    return post


@pytest.mark.slow
def test_daemon_survives_sigkill_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(RNG_SEED)
    began = time.monotonic()
    with SyntheticWeb(SPEC, WallClock()) as web:
        ref_config = _config(tmp_path, web, "reference", REF_AGENT)
        config = _config(tmp_path, web, "killed", KILL_AGENT)
        db, ref_db = config.parent / "xyro.db", ref_config.parent / "xyro.db"
        warehouse = Warehouse(config.parent / "w")
        reference = Daemon(ref_config)  # uninterrupted, in parallel on the same web
        kills: list[Kill] = []
        try:
            before = snapshot(db)
            torn_before = False
            for _ in range(KILLS):
                mode, delay = _choose(rng)
                kill = Kill(mode, delay)
                daemon = Daemon(config)
                try:
                    target = _kill_moment(daemon, mode, delay, rng)
                    _sleep_until(target - 0.05)
                    pre = snapshot(db)   # committed before the kill: none of it may go
                    _sleep_until(target)
                    kill.at = daemon.kill()
                finally:
                    if daemon.proc.poll() is None:
                        daemon.kill()
                assert "Traceback" not in daemon.text(), daemon.text()[-3000:]
                post = check_after_kill(db, warehouse, web, kill, pre, before, daemon)
                if torn_before:  # the unit cut short is followed by a rebuild
                    first = post.plan_jobs[len(before.plan_jobs):][:1]
                    assert not first or "full scan" in first[0], first
                torn_before = kill.torn
                kills.append(kill)
                before = post

            # Uninterrupted to the end: the web exhausted, the same URLs as the reference.
            daemon = Daemon(config)
            try:
                # Its signal handlers are in place once it is ready; a unit is planned then.
                daemon.wait_for(PLANNED, daemon.wait_for(READY))
                pages = _reachable(web)
                assert len(pages) > 0.9 * SPEC.n_pages
                deadline = time.monotonic() + 90
                streak = 0
                while streak < 2:
                    assert time.monotonic() < deadline, "the crawl did not exhaust the web"
                    time.sleep(0.5)
                    streak = streak + 1 if exhausted(db, pages) and exhausted(ref_db, pages) else 0
            finally:
                stopped = daemon.stop(), reference.stop()
        finally:
            if reference.proc.poll() is None:
                reference.proc.kill()
    assert stopped == (0, 0), (daemon.text()[-2000:], reference.text()[-2000:])
    for d in (daemon, reference):
        assert "Traceback" not in d.text(), d.text()[-3000:]

    conn = _connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        problems, planner = folder_problems(conn)
        assert planner == "whole" and not problems, (planner, problems[:5])
        bad, n_versions = version_problems(conn, warehouse)
        assert not bad, bad[:5]
    finally:
        conn.close()
    final, ref = snapshot(db), snapshot(ref_db)
    assert set(final.urls) == set(ref.urls), (
        f"only after the kills: {sorted(set(final.urls) - set(ref.urls))[:5]}; "
        f"only uninterrupted: {sorted(set(ref.urls) - set(final.urls))[:5]}")
    fetched = {u for u, (_, a) in final.urls.items() if a > 0}
    assert fetched == {u for u, (_, a) in ref.urls.items() if a > 0}
    assert n_versions > 0
    assert sum(k.served for k in kills) > 30, "the request log check saw too few requests"

    during_plan = sum(k.during_plan for k in kills)
    during_rank = sum(k.during_rank for k in kills)
    print(f"\n{KILLS} kills in {time.monotonic() - began:.1f} s; {len(final.urls)} URLs, "
          f"{len(fetched)} fetched, {n_versions} XML versions; during planning {during_plan} "
          f"(cut {sum(k.plan_cut for k in kills)}, torn {sum(k.torn for k in kills)}), "
          f"during ranking {during_rank} (cut {sum(k.rank_cut for k in kills)})")
    for k in kills:
        print(f"  {k.mode:10s} +{k.delay:5.2f}s  since plan "
              f"{'-' if k.since_plan is None else f'{k.since_plan:.2f}'}  since rank "
              f"{'-' if k.since_rank is None else f'{k.since_rank:.2f}'}  plan_cut "
              f"{k.plan_cut:d} rank_cut {k.rank_cut:d} torn {k.torn:d}  pages {k.pages} "
              f"checked {k.served}")
    assert during_plan >= 3 and during_rank >= 3, "too few kills landed in the jobs"
