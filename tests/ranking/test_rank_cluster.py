"""The sliced out-of-core ranking on a Dask cluster (``xyro.jobs.rank_cluster``): a real
``LocalCluster`` of 2 worker processes (1 thread each) on 127.0.0.1, shared by the module.

The cluster's answer is the one-host answer (L1 ≤ 1e-9, both converged far below it) on
LAW cnr-2000 and on a graph whose slices are uneven; a worker killed in the middle of a
sweep (from inside its task, on the task's first attempt only) is survived with the same
answer; the rank job ranks on the configured cluster, and on this host, with one warning,
when nothing listens at the configured address; ``xyro rank --cluster`` without Dask says
which extra to install.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from metadata import MetadataStore
from ranking.graph import LinkGraph
from ranking.outofcore import rank_out_of_core
from ranking.slices import ArrayCsrSource, SliceStore
from ranking.sweep import SolverParams
from xyro.app import App
from xyro.config_load import load_config
from xyro.jobs.rank_cluster import ClusterError, ClusterUnreachable, DaskTasks, open_cluster
from xyro.jobs.rank_job import RankParams
from xyro.jobs.rank_run import rank_store

distributed = pytest.importorskip(
    "distributed", reason="Dask's distributed is not installed: pip install -e '.[test]' "
                          "(or the cluster extra) to run the cluster tests")

# The hooks below travel to the workers by value: they cannot import this test module.
pytest.importorskip("cloudpickle").register_pickle_by_value(sys.modules[__name__])

REPO = Path(__file__).resolve().parents[2]
CNR = REPO / ".." / "shared" / "data" / "cnr-2000-edges.npz"
TIGHT = SolverParams(tol=1e-11, max_iter=1000)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The scheduler address of a LocalCluster: 2 worker processes, 1 thread each, every
    port on 127.0.0.1, no dashboards, the workers' scratch space in a test folder; closed
    (workers and nannies ended) after the module."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  worker_dashboard_address=None,
                                  local_directory=str(tmp_path_factory.mktemp("dask")),
                                  silence_logs=logging.ERROR) as local:
        yield local.scheduler_address


def l1_normalized(a: np.ndarray, b: np.ndarray) -> float:
    """L1 distance of the two vectors scaled to sum 1 (the report's are mean 1)."""
    return float(np.abs(a / a.sum() - b / b.sum()).sum())


def uneven_graph(n: int = 3000, m: int = 100_000, seed: int = 5) -> LinkGraph:
    """60 % of the links point to 40 hub pages (the lowest ids): the first slice holds few
    pages and many links, the last one few of both."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    hubs = rng.random(m) < 0.6
    dst[hubs] = (40 * rng.random(int(hubs.sum())) ** 2).astype(np.int64)
    dst[::11] = src[::11]  # self-links
    pairs = np.unique(np.column_stack([src, dst]), axis=0)
    return LinkGraph.from_edges(pairs[:, 0], pairs[:, 1], n)


def uneven_store(directory: Path) -> tuple[SliceStore, np.ndarray]:
    graph = uneven_graph()
    store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), directory, 500_000,
                             chunk_links=5000)
    return store, np.random.default_rng(3).random(graph.n) < 0.1


def _one_host_and_cluster(address: str, store: SliceStore, xml: np.ndarray,
                          params: RankParams):
    one = rank_out_of_core(store, xml, params.solver, dangling=params.dangling,
                           interest_from_importance=params.interest_from_importance)
    with open_cluster(address, 10.0, required=True) as session:
        report = session.rank(store, xml, params)
        blocks = session.last.blocks
    return one, report, blocks


@dataclass(frozen=True)
class Uneven:
    store: SliceStore
    xml: np.ndarray
    params: RankParams
    one: object        # the one-host result
    report: object     # the cluster's
    blocks: tuple


@pytest.fixture(scope="module")
def uneven(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Uneven:
    """The uneven graph ranked on one host and on the cluster (paper variant, E′)."""
    store, xml = uneven_store(tmp_path_factory.mktemp("uneven"))
    params = RankParams(solver=TIGHT)
    return Uneven(store, xml, params, *_one_host_and_cluster(cluster, store, xml, params))


def test_cluster_equals_one_host_on_cnr_2000(cluster: str, tmp_path: Path) -> None:
    if not CNR.exists():
        pytest.skip(f"LAW cnr-2000 edge list not found at {CNR} (shared/data)")
    with np.load(CNR) as z:
        graph = LinkGraph.from_edges(z["src"], z["dst"], int(z["n"]))
    xml = np.random.default_rng(7).random(graph.n) < 0.1
    store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), tmp_path, 16 << 20)
    params = RankParams(solver=TIGHT, dangling="teleport")
    one, report, blocks = _one_host_and_cluster(cluster, store, xml, params)
    assert store.count >= 8 and len(blocks) == 2
    assert report.out_of_core and report.slices == store.count
    assert l1_normalized(report.importance, one.importance.values) <= 1e-9
    assert l1_normalized(report.interest, one.interest.values) <= 1e-9
    # the one-host stopping rule and reported residuals; cnr's links stay mostly inside
    # a block (URL order), so block Jacobi costs few sweeps here
    assert report.importance_residuals[-1] < TIGHT.tol
    assert report.interest_residuals[-1] < TIGHT.tol
    assert report.importance_iterations <= 1.2 * one.importance.iterations


def test_cluster_equals_one_host_on_uneven_slices(uneven: Uneven) -> None:
    store, report, one = uneven.store, uneven.report, uneven.one
    rows = np.diff(store.bounds)
    links = [store.link_count(k) for k in range(store.count)]
    assert store.count >= 3 and rows.max() >= 2 * rows.min() and max(links) >= 3 * min(links)
    assert len(uneven.blocks) == 2
    assert l1_normalized(report.importance, one.importance.values) <= 1e-9
    assert l1_normalized(report.interest, one.interest.values) <= 1e-9
    assert abs(report.importance.mean() - 1) < 1e-12 and abs(report.interest.mean() - 1) < 1e-12


def test_cluster_equals_one_host_with_teleport_and_xml_importance(cluster: str,
                                                                  uneven: Uneven) -> None:
    params = RankParams(solver=TIGHT, dangling="teleport", interest_from_importance=True)
    one, report, _ = _one_host_and_cluster(cluster, uneven.store, uneven.xml, params)
    assert l1_normalized(report.importance, one.importance.values) <= 1e-9
    assert l1_normalized(report.interest, one.interest.values) <= 1e-9


@dataclass(frozen=True)
class KillOnFirstAttempt:
    """Before slice ``slice`` of sweep ``sweep``: the first time (no marker file yet), make
    the marker and SIGKILL this worker process; the task's re-run goes on."""

    marker: str
    sweep: int
    slice: int

    def __call__(self, sweep: int, k: int) -> None:
        if (sweep, k) != (self.sweep, self.slice):
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_mid_sweep_is_survived(cluster: str, uneven: Uneven,
                                               tmp_path: Path) -> None:
    second = uneven.blocks[1]
    assert second[1] - second[0] >= 2
    marker = tmp_path / "killed"
    # sweep 3, the second slice of the second block: the task has written its first
    # slice's pages into this sweep's files when its worker dies
    kill = KillOnFirstAttempt(str(marker), 3, second[0] + 1)
    with open_cluster(cluster, 10.0, required=True, before_slice=kill) as session:
        pids_before = set(session.client.run(os.getpid).values())
        survived = session.rank(uneven.store, uneven.xml, uneven.params)
        pids_after = set(session.client.run(os.getpid).values())
    assert marker.exists()  # the worker was killed ...
    assert pids_before - pids_after  # ... its process is gone (the nanny started another)
    # the same answer, bit for bit: a block task reads only files its sweep does not write
    clean = uneven.report
    np.testing.assert_array_equal(survived.importance, clean.importance)
    np.testing.assert_array_equal(survived.interest, clean.interest)
    assert survived.importance_residuals == clean.importance_residuals
    assert survived.interest_residuals == clean.interest_residuals


def _kill_own_worker(item: int, before_slice: object) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return item


def test_a_cluster_that_lost_every_worker_ends_the_sweep_with_an_error(
        tmp_path: Path) -> None:
    """With no nanny to start another, the only worker (a process of its own) dies inside
    its task: Dask would keep the task waiting for a worker for ever (and a daemon's
    ranking with it); the sweep ends with ClusterUnreachable once the scheduler has had
    none for ``workers_gone_s``."""
    with distributed.LocalCluster(n_workers=0, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=logging.CRITICAL
                                  ) as local, \
            distributed.Client(local.scheduler_address, set_as_default=False) as client:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", local.scheduler_address,
             "--no-nanny", "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
             "--local-directory", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client.wait_for_workers(1, timeout=60)
        except BaseException:
            worker.kill()
            raise
        outcome: list[BaseException] = []

        def sweep() -> None:
            try:
                DaskTasks(client, workers_gone_s=1.0)(_kill_own_worker, [1, 2])
            except BaseException as exc:
                outcome.append(exc)
        runner = threading.Thread(target=sweep, daemon=True)
        runner.start()
        runner.join(60.0)
        assert worker.wait(10) == -signal.SIGKILL   # it died in its task
        assert not runner.is_alive(), "the sweep still waits for a worker after 60 s"
    assert len(outcome) == 1 and isinstance(outcome[0], ClusterUnreachable), outcome
    assert "no worker for 1 s" in str(outcome[0])
    assert "start the workers" in str(outcome[0])


@dataclass(frozen=True)
class SlicesOutOfSight:
    """What a worker that does not see the shared folder meets before its first slice."""

    def __call__(self, sweep: int, k: int) -> None:
        raise FileNotFoundError(2, "No such file or directory", "/elsewhere/in-ptr-00000.bin")


def test_workers_that_do_not_see_the_slices_are_told_of(cluster: str, uneven: Uneven) -> None:
    with open_cluster(cluster, 10.0, required=True, before_slice=SlicesOutOfSight()) as session:
        with pytest.raises(ClusterError, match="ranking.cluster_dir must be a folder every "
                                               "worker sees at the same path"):
            session.rank(uneven.store, uneven.xml, uneven.params)


def _free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _app(db: Path, *settings: str) -> App:
    return App(load_config(None, {}, [f"storage.database={db}",
                                      f"storage.warehouse_dir={db.parent / 'warehouse'}",
                                      "ranking.tolerance=1e-12", *settings]))


def _rank_like_the_daemon(app: App) -> object:
    """What the daemon's rank job runs (``Daemon._rank_job``): rank_store, no --cluster."""
    with app.open_store() as store:
        writer = store.writer(now=app.clock.now)
        try:
            return rank_store(app, store, writer.submit, check_stop=lambda: None,
                              flush=writer.flush)
        finally:
            writer.close()


def test_rank_job_uses_the_cluster_and_falls_back_to_one_host(
        cluster: str, tmp_path: Path, make_store, caplog: pytest.LogCaptureFixture) -> None:
    dbs = [tmp_path / name / "xyro.db" for name in ("cluster", "fallback")]
    for db in dbs:
        db.parent.mkdir()
        make_store(db, n=3000, m=30_000, seed=8)
    caplog.set_level(logging.INFO, logger="xyro")
    on_cluster = _rank_like_the_daemon(_app(dbs[0], f"ranking.cluster={cluster}",
                                            f"ranking.cluster_dir={tmp_path}"))
    assert on_cluster.report.out_of_core
    assert f"on the Dask cluster at {cluster}" in caplog.text
    caplog.clear()
    nowhere = f"tcp://127.0.0.1:{_free_port()}"
    fallback = _rank_like_the_daemon(_app(dbs[1], f"ranking.cluster={nowhere}",
                                          "ranking.cluster_timeout_s=0.5"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"cannot reach the Dask scheduler at {nowhere}" in warnings[0]
    assert "ranking on this host instead" in warnings[0]
    assert not fallback.report.out_of_core  # 3000 pages fit the host's memory
    assert on_cluster.pages == fallback.pages == 3000
    with MetadataStore.open(dbs[0]) as a, MetadataStore.open(dbs[1]) as b:
        assert a.graph_counts() == b.graph_counts()
    assert [u for u, _ in on_cluster.top_importance] == [u for u, _ in fallback.top_importance]
    assert l1_normalized(on_cluster.report.importance, fallback.report.importance) <= 1e-9
    assert l1_normalized(on_cluster.report.interest, fallback.report.interest) <= 1e-9
    assert list(tmp_path.glob("xyro-*")) == []  # the slices went with the run


def test_unreachable_cluster_is_an_error_when_required() -> None:
    nowhere = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(ClusterUnreachable, match="cannot reach the Dask scheduler"):
        with open_cluster(nowhere, 0.5, required=True):
            pass


def test_a_port_that_never_answers_as_a_scheduler_is_unreachable_within_the_timeout() -> None:
    # It accepts and says nothing (another service, a stuck scheduler): Dask's own timeout
    # does not bound that handshake, and the daemon's ranking and its stop waited for ever.
    import threading
    import time
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    silent = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    started = time.monotonic()
    try:
        with pytest.raises(ClusterUnreachable, match="no answer as a Dask scheduler"):
            with open_cluster(silent, 1.0, required=True):
                pass
        with open_cluster(silent, 1.0) as session:   # the daemon's: this host instead
            assert session is None
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert time.monotonic() - started < 20


def _edges(tmp_path: Path) -> Path:
    graph = uneven_graph(n=2000, m=20_000)
    src = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    path = tmp_path / "edges.npz"
    np.savez(path, n=graph.n, src=src, dst=graph.indices,
             xml=np.random.default_rng(1).random(graph.n) < 0.1)
    return path


def _xyro(tmp_path: Path, *args: str, block_dask: bool = False) -> subprocess.CompletedProcess:
    prelude = "sys.modules['distributed'] = None; " if block_dask else ""
    code = "import sys; " + prelude + "from xyro.cli import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "XYRO_CONFIG": os.devnull})


def test_xyro_rank_cluster_ranks_on_the_cluster(cluster: str, tmp_path: Path) -> None:
    edges = _edges(tmp_path)
    done = _xyro(tmp_path, "rank", "--edges", str(edges), "--cluster", cluster, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["out_of_core"] and report["pages"] == 2000
    assert report["importance_residual"] < 1e-8


def test_xyro_rank_cluster_without_dask_names_the_extra(tmp_path: Path) -> None:
    """``distributed`` made unimportable in the child (sys.modules entry None), not
    uninstalled."""
    edges = _edges(tmp_path)
    done = _xyro(tmp_path, "rank", "--edges", str(edges), "--cluster", "tcp://127.0.0.1:8786",
                 block_dask=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "pip install 'xyro[cluster]'" in done.stderr and "distributed" in done.stderr


def test_xyro_rank_cluster_malformed_address_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from xyro.cli import cli

    done = CliRunner().invoke(cli, ["-c", os.devnull, "rank", "--edges", str(_edges(tmp_path)),
                                    "--cluster", "sched:8786"])
    assert done.exit_code == 2 and "not a Dask scheduler address" in done.output
