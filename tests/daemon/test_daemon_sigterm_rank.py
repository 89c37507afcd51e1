"""SIGTERM while ``xyro run`` ranks a large graph: exit 0 within 10 s, nothing lost.

The ranking job checks the daemon's stop flag all along its run (inside the store's scans,
between the chunks and slices of the out-of-core path, every sweep, every committed piece of
the write-back), so a stop never waits for a whole ranking. A real store of half a million
pages and ten million links, written straight into SQLite as tests/bench/rank_job_memory.py
does (about 8 s, once per module), makes each long step of one ranking (to a tolerance of
1e-10) last seconds in the daemon on the 2-core test machine, which is all a stop in it
needs (twice that store made the module take 2.5 minutes of the suite for nothing more);
the daemon itself needs seconds to start on it (its seen-set of every URL). The signal is
sent in each long step of the run, found from the job's log lines. The crawl is busy at the
same time: four hosts answer robots.txt at once and never answer a page, so each has one
fetch in flight and four URLs queued when the signal comes, and all twenty must still be in
the ``frontier`` table after the stop (in-flight work goes back, DESIGN.md §7).

The stop points themselves are checked in process first, on a small store: a stop at any
of them ends the run with the caller's exception (never SQLite's), leaves no temporary file,
and what is read with the stop check is what is read without it.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from metadata import MetadataStore, SetRanks
from metadata.urlkeys import url_hash
from ranking.sweep import SolverParams
from xyro.app import App
from xyro.config_load import load_config
from xyro.jobs import rank_run
from xyro.jobs.rank_job import RankParams, RankReport, rank_graph, rank_stream, read_csr

REPO = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin"}
PAGES = 500_000
LINKS = 10_000_000
ROWS_PER_TRANSACTION = 200_000
STOP_WITHIN_S = 10.0
OUT_OF_CORE_MB = 256   # the daemon itself holds ~200 MB: the ranking gets its minimum share
TOLERANCE = 1e-10      # 40 sweeps of each ranking: a long run from a store quick to build
IN_MEMORY_MB = 4096

# What the daemon and the ranking job log (INFO), in the order of a run.
STARTED = "ranking started"
SLICED = "slices for the out-of-core sweeps"
WRITING_BACK = "writing them back"
RANKED = "INFO xyro.service.daemon: ranked "
INTERRUPTED = "ranking interrupted: the daemon is stopping"
ABANDONED_WRITE_BACK = "ranking abandoned in its write-back"


# ---- the store: a large link graph, written straight into SQLite -------------------------

def _build_store(path: Path, n: int, m: int, seed: int = 3) -> None:
    """``n`` pages (10 % XML) and ``m`` links with power-law-ish out- and in-degrees.

    The pages are typed but never fetched (no access): the refresh planner's first unit,
    run as the daemon starts, then has nothing to re-file, so the ranking is the only long
    job when the signal comes."""
    MetadataStore.open(path).close()  # schema, migrations, views
    rng = np.random.default_rng(seed)
    types = np.where(rng.random(n) < 0.1, "xml", "html")
    weights = rng.pareto(1.5, n) + 1.0
    degree = np.minimum(np.floor(weights * (m / weights.sum())), 60_000).astype(np.int64)
    degree[: m - int(degree.sum())] += 1  # exactly m links (the remainder is < n)
    perm = rng.permutation(n).astype(np.int32)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO hosts (id, host) VALUES (1, 'www.big.example.org')")
        for a in range(0, n, ROWS_PER_TRANSACTION):
            ids = range(a + 1, min(n, a + ROWS_PER_TRANSACTION) + 1)
            urls = [f"http://www.big.example.org/p/{i}.{types[i - 1]}" for i in ids]
            conn.executemany("INSERT INTO urls (id, hash, type, host_id, depth, url) "
                             "VALUES (?, ?, ?, 1, 1, ?)",
                             zip(ids, map(url_hash, urls), types[a:a + len(urls)].tolist(),
                                 urls))
        for a in range(0, n, ROWS_PER_TRANSACTION):
            deg = degree[a:a + ROWS_PER_TRANSACTION]
            kids = (perm[(n * rng.random(int(deg.sum())) ** 2.5).astype(np.int64)] + 1)
            kids = kids.astype("<i4")
            cuts = np.concatenate([[0], np.cumsum(deg)]).tolist()
            conn.executemany("INSERT INTO links (src, n, children) VALUES (?, ?, ?)",
                             ((a + j + 1, k, kids[cuts[j]:cuts[j + 1]].tobytes())
                              for j, k in enumerate(deg.tolist()) if k))
        conn.execute("COMMIT")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("big") / "xyro.db"
    _build_store(path, PAGES, LINKS)
    yield path
    path.unlink()  # ~150 MB: not worth keeping among pytest's last runs


@pytest.fixture
def db(big_store: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the big store for one daemon run (removed after the test)."""
    copy = tmp_path / "xyro.db"
    shutil.copyfile(big_store, copy)
    yield copy
    for leftover in tmp_path.glob("xyro.db*"):
        leftover.unlink()


# ---- the stop points, in process, on a small store ------------------------------------------

class _Stop(Exception):
    """What the caller's stop check raises (the daemon's is its own ``_Stopped``)."""


class _StopAt:
    """A stop check that counts its calls and raises at call ``at`` (never when 0)."""

    def __init__(self, at: int = 0) -> None:
        self.at = at
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == self.at:
            raise _Stop


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("small") / "xyro.db"
    _build_store(path, 20_000, 200_000)
    return path


def _stop_points(run: Callable[[_StopAt], object]) -> list[int]:
    """Calls of the stop check in a whole ``run``: a few first, some in the middle, the last."""
    total = _StopAt()
    run(total)
    assert total.calls > 10
    return sorted({1, 2, 3, total.calls // 3, total.calls // 2, total.calls - 1, total.calls})


def test_the_graph_read_with_a_stop_check_is_the_exported_graph(small_store: Path) -> None:
    with MetadataStore.open(small_store) as store:
        graph = store.export_graph()
        checked = store.export_graph(check_stop=_StopAt())
        indptr, indices, mask = read_csr(partial(store.stream_graph, check_stop=_StopAt()))
    for other in (checked.indptr, indptr):
        np.testing.assert_array_equal(other, graph.indptr)
    for other in (checked.indices, indices):
        np.testing.assert_array_equal(other, graph.indices)
    np.testing.assert_array_equal(mask, graph.xml_mask)
    assert indices.dtype == np.int32 and 0 < mask.sum() < len(mask)


def test_a_stop_inside_an_sqlite_scan_raises_the_callers_exception(
        small_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export is a few statements: SQLite's progress handler is what checks inside them
    (called more often here, the small store being read in a few milliseconds)."""
    monkeypatch.setattr("metadata.store.STOP_CHECK_INSTRUCTIONS", 1_000)
    with MetadataStore.open(small_store) as store:
        for at in _stop_points(lambda check: store.export_graph(check_stop=check)):
            with pytest.raises(_Stop):
                store.export_graph(check_stop=_StopAt(at))

        def stream(check: _StopAt) -> None:
            with store.stream_graph(5_000, check_stop=check) as links:
                for _ in links.chunks:
                    pass
        for at in _stop_points(stream):
            with pytest.raises(_Stop):
                stream(_StopAt(at))
        assert store.graph_counts() == (20_000, 200_000)  # the store reads on as before


@pytest.mark.parametrize("memory_budget_bytes", [8 << 20, 2 << 30],
                         ids=["out-of-core", "in-memory"])
def test_a_stop_at_any_point_of_a_ranking_ends_it_and_leaves_no_file(
        small_store: Path, tmp_path: Path, memory_budget_bytes: int) -> None:
    """Out of core (several chunks and slices): reading, spooling, slicing, first pass and
    sweeps; in memory: reading, sweeps. Every point where the check is called can end it."""
    params = RankParams(solver=SolverParams(tol=1e-6), memory_budget_bytes=memory_budget_bytes,
                        work_dir=tmp_path)

    with MetadataStore.open(small_store) as store:
        def rank(check: _StopAt) -> RankReport:
            read = partial(store.stream_graph, check_stop=check)
            if memory_budget_bytes > 1 << 30:
                indptr, indices, mask = read_csr(read, check)
                return rank_graph(indptr, indices, mask, params, check_stop=check)
            report = rank_stream(read, params, check_stop=check)
            assert report.out_of_core and report.slices > 2
            return report

        counted = _StopAt()
        report = rank(counted)
        sweeps = report.importance_iterations + report.interest_iterations
        # at least once per slice of each sweep out of core (both rankings share a scan),
        # once per sweep of each ranking in memory
        assert counted.calls > (report.slices * (sweeps // 2 + 1) if report.out_of_core
                                else sweeps)
        for at in _stop_points(rank):
            with pytest.raises(_Stop):
                rank(_StopAt(at))
            assert list(tmp_path.iterdir()) == []


def test_the_write_back_stops_between_committed_pieces(
        small_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """With the writer's flush, each piece of the write-back is committed before the stop is
    checked again: a stop leaves no backlog in the writer and says what was written."""
    db = tmp_path / "xyro.db"
    shutil.copyfile(small_store, db)
    app = App(load_config(None, {}, [f"storage.database={db}",
                                     f"storage.warehouse_dir={tmp_path / 'w'}"]))
    monkeypatch.setattr(rank_run, "WRITE_BACK_IDS", 5_000)  # 4 pieces of 20,000 pages
    ops: list[object] = []
    flushed: list[int] = []
    check = _StopAt()

    def flush() -> None:
        flushed.append(len(ops))
        if len(flushed) == 2:
            check.at = check.calls + 1  # stop at the next check: before the third piece

    with app.open_store() as store, caplog.at_level(logging.INFO, "xyro.jobs"):
        with pytest.raises(_Stop):
            rank_run.rank_store(app, store, ops.append, check_stop=check, flush=flush)
    assert flushed == [1, 2] and all(isinstance(op, SetRanks) for op in ops)
    assert "ranking abandoned in its write-back: 10000 of 20000 pages" in caplog.text


# ---- hosts that keep a fetch in flight -------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    server: _HangingHost

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        if self.path == "/robots.txt":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            return
        self.server.in_flight.add(self.path)
        self.server.closing.wait(120.0)  # never answers: the client gives up, or we close

    def log_message(self, *_args: object) -> None:
        pass


class _HangingHost(ThreadingHTTPServer):
    """A host on its own loopback address: robots.txt is a 404 (allow all) at once, every
    other request is read and never answered, so its fetch stays in flight."""

    daemon_threads = True

    def __init__(self, address: str) -> None:
        super().__init__((address, 0), _Handler)
        self.in_flight: set[str] = set()
        self.closing = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.1})
        self._thread.start()

    def url(self, path: str) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}{path}"

    def close(self) -> None:
        self.closing.set()
        self.shutdown()
        self.server_close()


@pytest.fixture
def hosts() -> Iterator[list[_HangingHost]]:
    started = [_HangingHost(f"127.0.0.{i}") for i in range(2, 6)]
    try:
        yield started
    finally:
        for host in started:
            host.close()


# ---- the daemon ------------------------------------------------------------------------------

def _config(path: Path, db: Path, seeds: list[str], budget_mb: int, tolerance: float) -> Path:
    """Ranking every second (the first run starts 1 s after the daemon), nothing else due."""
    path.write_text(
        f"seeds: {json.dumps(seeds)}\n"
        "scope: {allow_private_addresses: true}\n"
        "crawler: {workers: 4, politeness: {delay_s: 0}, "
        "limits: {read_timeout_s: 600, deadline_s: 600}}\n"
        f"ranking: {{schedule_s: 1, memory_budget_mb: {budget_mb}, tolerance: {tolerance}}}\n"
        "refresh: {time_unit_s: 3600}\n"
        "publication: {refresh_s: 3600}\n"
        f"storage: {{database: '{db}', warehouse_dir: '{db.parent / 'w'}'}}\n")
    return path


# ``xyro run`` whose ranking ignores the stop flag: its stop check is made a no-op.
DEAF_RANKING = """
import sys
from xyro.cli import main
from xyro.service import numba_cache
numba_cache.configure()  # before anything imports ranking, as main() does
from xyro.service.daemon import Daemon
Daemon._stop_check = lambda self: None
main(sys.argv[1:])
"""


class _Daemon:
    """``xyro run`` as a subprocess; a thread reads its stderr into ``lines``, each with
    the (monotonic) time it arrived."""

    def __init__(self, config: Path, deaf_ranking: bool = False) -> None:
        program = ["-c", DEAF_RANKING] if deaf_ranking else ["-m", "xyro"]
        self.proc = subprocess.Popen([sys.executable, *program, "-c", str(config), "run"],
                                     env=ENV, cwd=REPO, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line))

    @property
    def log(self) -> str:
        return "".join(line for _, line in self.lines)

    def wait_until(self, what: str, ready: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert self.proc.poll() is None, f"the daemon exited early:\n{self.log}"
            assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s\n{self.log}"
            time.sleep(0.02)

    def wait_for(self, text: str, timeout_s: float) -> float:
        """When the first line with ``text`` arrived."""
        self.wait_until(f"log line {text!r}", lambda: text in self.log, timeout_s)
        return next(t for t, line in self.lines if text in line)

    def exit_code(self, timeout_s: float) -> int:
        try:
            code = self.proc.wait(timeout_s)
        finally:
            self.kill()
        self._reader.join(5.0)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _frontier_urls(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {url for (url,) in conn.execute(
            "SELECT u.url FROM frontier f JOIN urls u ON u.id = f.url_id")}
    finally:
        conn.close()


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _crawling(db: Path, hosts: list[_HangingHost], budget_mb: int,
              tolerance: float = TOLERANCE,
              deaf_ranking: bool = False) -> tuple[_Daemon, set[str]]:
    """A daemon on ``db`` with one fetch in flight per host, the other URLs queued, and all
    of them in the frontier table. Returns it and the URLs."""
    urls = {h.url(f"/page-{k}.html") for h in hosts for k in range(5)}
    config = _config(db.parent / "xyro.yaml", db, sorted(urls), budget_mb, tolerance)
    daemon = _Daemon(config, deaf_ranking)
    try:
        daemon.wait_until("one fetch in flight per host",
                          lambda: all(h.in_flight for h in hosts), 60.0)
        daemon.wait_until("every URL in the frontier table",
                          lambda: urls <= _frontier_urls(db), 30.0)
    except BaseException:
        daemon.kill()
        raise
    return daemon, urls


def _not_ranked_yet(daemon: _Daemon) -> None:
    assert RANKED not in daemon.log and INTERRUPTED not in daemon.log, daemon.log


# ---- the tests -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("budget_mb, tolerance, step, after_s", [
    (OUT_OF_CORE_MB, TOLERANCE, STARTED, 0.5),  # the child lists streamed and spooled
    (OUT_OF_CORE_MB, TOLERANCE, SLICED, 1.0),   # the first pass and the sweeps, slice by slice
    (OUT_OF_CORE_MB, 1e-3, WRITING_BACK, 1.0),  # a few sweeps, then the paced write-back
    (IN_MEMORY_MB, TOLERANCE, STARTED, 0.5),    # the whole graph read into one CSR
], ids=["out-of-core-reading", "out-of-core-sweeps", "write-back", "in-memory-reading"])
def test_sigterm_while_ranking_exits_0_within_10_s_and_keeps_the_frontier(
        db: Path, hosts: list[_HangingHost], budget_mb: int, tolerance: float, step: str,
        after_s: float) -> None:
    daemon, urls = _crawling(db, hosts, budget_mb, tolerance)
    reached = daemon.wait_for(step, 90.0)
    time.sleep(max(0.0, reached + after_s - time.monotonic()))
    _not_ranked_yet(daemon)
    signalled = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    code = daemon.exit_code(STOP_WITHIN_S + 30.0)
    took = time.monotonic() - signalled
    print(f"[{step!r} + {after_s} s, {budget_mb} MB] exit {code} {took:.2f} s after SIGTERM")
    assert code == 0, daemon.log
    assert took < STOP_WITHIN_S, daemon.log
    assert INTERRUPTED in daemon.log and RANKED not in daemon.log, daemon.log
    assert (ABANDONED_WRITE_BACK in daemon.log) == (step == WRITING_BACK), daemon.log
    assert "Traceback" not in daemon.log and "ERROR" not in daemon.log, daemon.log
    assert _integrity(db) == "ok"
    assert urls <= _frontier_urls(db)  # queued and in flight: none lost


@pytest.mark.slow
def test_a_second_sigterm_exits_at_once_while_the_ranking_runs(
        db: Path, hosts: list[_HangingHost]) -> None:
    """The forced exit waits for no job. The real ranking ends within milliseconds of the
    first signal, so here it is made deaf to the stop (its stop check is a no-op, as if a
    step could not be interrupted): after the first SIGTERM the crawl ends and the shutdown
    waits for the running job; the second SIGTERM must exit at once all the same, leaving
    the store sound and the frontier whole (a second signal sent before the first was
    handled would be merged with it by Python: one pending flag per signal number)."""
    daemon, urls = _crawling(db, hosts, OUT_OF_CORE_MB, deaf_ranking=True)
    daemon.wait_for(STARTED, 30.0)
    daemon.proc.send_signal(signal.SIGTERM)
    daemon.wait_for("crawl loop ended", STOP_WITHIN_S)  # now waiting for the running job
    _not_ranked_yet(daemon)
    signalled = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    code = daemon.exit_code(STOP_WITHIN_S)
    took = time.monotonic() - signalled
    print(f"[second SIGTERM] exit {code} {took:.2f} s after it")
    assert code == 128 + signal.SIGTERM, daemon.log
    assert "received SIGTERM again: exiting now" in daemon.log
    _not_ranked_yet(daemon)  # the job was still running when the process ended
    assert took < 2.0, daemon.log
    assert _integrity(db) == "ok"
    assert urls <= _frontier_urls(db)
