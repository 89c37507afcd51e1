"""The sliced out-of-core ranking on a Dask cluster (003 §5.3–5.4; config
``ranking.cluster: tcp://host:8786``, ``xyro rank --cluster ADDRESS``).

The numerics are ``ranking.blocks``: the slices are written once, into a directory every
worker sees at the same path (``ranking.cluster_dir``, a shared filesystem), grouped into
one block of consecutive slices per worker thread, and each sweep is one task per block:
block Jacobi across the workers, point Gauss-Seidel inside each block, the stopping rule
and the reported residuals of the one-host sweep. Here is only what Dask adds: the
tasks, where they run, a task run again on another worker when its worker dies (the
scheduler's own retry: a task reads only files the sweep does not change, so a re-run
gives the same values), and the driver's waiting, which checks ``check_stop`` every
:data:`POLL_S` seconds so that a stopping daemon cancels the sweep instead of waiting for it.

Why Dask's ``distributed`` (the optional extra ``xyro[cluster]``): the work is numpy arrays
and a numba kernel, which its workers run as they are (plain Python processes, no JVM as
Spark needs, no object store to size as Ray does), it reschedules the task of a dead worker
by itself, and ``LocalCluster`` runs the same scheduler on one machine for the tests.

Memory: ``ranking.memory_budget_mb`` is what one block task may hold on its worker (a worker
with T threads runs up to T blocks at once). The slices are cut under that budget less
what the largest worker process already holds (its resident set, measured before slicing),
as the one-host ranking counts its own process.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ranking.blocks import BlockRanking, Scratch, SliceHook, rank_blocks
from ranking.results import ProgressFn
from ranking.slices import SliceStore, StopCheck, budget_for_slices, stop_point
from xyro.errors import XyroError
from xyro.jobs.rank_job import RankParams, RankReport, mean_one, process_rss_bytes, \
    ranking_bytes

log = logging.getLogger(__name__)

EXTRA = "xyro[cluster]"
POLL_S = 0.5            # the driver checks check_stop this often while a sweep runs
WORKERS_WAIT_S = 10.0   # at most this long for a scheduler without workers to get one
#: A sweep gives up once the scheduler has had no worker this long (seconds): Dask keeps
#: the tasks of a cluster that lost every worker waiting for new ones for ever, and the
#: daemon's rank job (one at a time) with them, so importance would silently go stale.
#: Long enough for a supervisor to bring the workers back.
WORKERS_GONE_S = 120.0
CONNECT_SLACK_S = 2.0   # beyond ranking.cluster_timeout_s for the client's own timeout
SLICES_PER_THREAD = 4   # at least: blocks of whole slices, balanced to a quarter of one


class ClusterMissing(XyroError):
    """Dask's ``distributed`` is not installed, or cannot be imported here (exit code 2:
    install the extra, or give it what its import needs)."""

    exit_code = 2


class ClusterUnreachable(XyroError):
    """The scheduler cannot be reached, or has no worker."""


class ClusterError(XyroError):
    """The cluster was reached but cannot rank (e.g. its workers do not see the slices)."""


def missing_message() -> str:
    return (f"ranking on a Dask cluster needs the `distributed` package, which is not "
            f"installed: install Xyro's cluster extra (pip install '{EXTRA}')")


def load_distributed() -> Any:
    """The ``distributed`` module; ClusterMissing when it is absent (naming the extra) or
    its import fails otherwise (naming what failed)."""
    try:
        import distributed
    except ImportError:
        raise ClusterMissing(missing_message()) from None
    except Exception as exc:  # e.g. psutil reading /proc/meminfo, which ProcSubset=pid hides
        hint = ("; under systemd, remove ProcSubset=pid from the unit (it hides /proc/meminfo)"
                if "/proc/" in str(exc) else "")
        raise ClusterMissing(f"ranking on a Dask cluster needs the `distributed` package, "
                             f"whose import failed ({exc.__class__.__name__}: {exc}){hint}"
                             ) from None
    return distributed


def peak_rss_bytes() -> int:
    """This process's peak resident set (VmHWM); 0 where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _on_worker(function: Callable[..., Any], before_slice: SliceHook | None,
               item: Any) -> tuple[Any, int, int]:
    """Run one block task; with the worker's pid and peak resident set."""
    result = function(item, before_slice)
    return result, os.getpid(), peak_rss_bytes()


@dataclass
class DaskTasks:
    """``ranking.blocks.RunTasks`` on a Dask client: one task per item, all submitted at
    once; waits for all of them, checking ``check_stop`` every :data:`POLL_S` (a stop
    cancels them). ``before_slice`` (``ranking.blocks.SliceHook``, picklable, run on the
    workers: fault injection in tests) is None in production. Records each worker
    process's peak resident set seen at the end of its tasks (``peak_rss``, by pid)."""

    client: Any
    check_stop: StopCheck | None = None
    before_slice: SliceHook | None = None
    peak_rss: dict[int, int] = field(default_factory=dict)
    workers_gone_s: float = WORKERS_GONE_S

    def __call__(self, function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        name = getattr(function, "__name__", "task")
        tag = os.urandom(6).hex()
        futures = self.client.map(partial(_on_worker, function, self.before_slice), items,
                                  pure=False,
                                  key=[f"xyro-rank-{name}-{tag}-{i}" for i in range(len(items))])
        try:
            for future in futures:
                self._wait(future)
            results = self.client.gather(futures)
        except BaseException:
            self.client.cancel(futures)
            raise
        finally:
            # Released now, before the next sweep is sent, not whenever the garbage
            # collector frees them (a TimeoutError's traceback holds a future in a cycle):
            # a task still held is run again by the scheduler when the worker holding its
            # result dies, and a first pass or a finished sweep run again in the middle of a
            # later sweep would overwrite the files that sweep reads.
            for future in futures:
                future.release()
            del futures
        out = []
        for result, pid, rss in results:
            self.peak_rss[pid] = max(self.peak_rss.get(pid, 0), rss)
            out.append(result)
        return out


    def _wait(self, future: Any) -> None:
        """Until ``future`` is done (raising what its task raised), checking for a stop
        and for a cluster left without workers every :data:`POLL_S`."""
        gone_since: float | None = None
        while True:
            try:
                future.result(timeout=POLL_S)
                return
            except TimeoutError:
                stop_point(self.check_stop)
                gone_since = self._workers_gone(gone_since)

    def _workers_gone(self, since: float | None) -> float | None:
        """When the scheduler was first seen without a worker (None while it has one);
        ClusterUnreachable once that has lasted :attr:`workers_gone_s`."""
        if self.client.nthreads():
            return None
        now = time.monotonic()
        if since is None:
            return now
        if now - since < self.workers_gone_s:
            return since
        raise ClusterUnreachable(
            f"the Dask cluster at {self.client.scheduler.address} has had no worker for "
            f"{self.workers_gone_s:g} s in the middle of a ranking (all of them lost): the "
            "ranking is given up and importance keeps its last values; start the workers "
            "again before the next ranking")


def _worker_rss() -> int:
    return process_rss_bytes()


@dataclass
class ClusterSession:
    """A connected client and what the last ranking on it cost."""

    client: Any
    address: str
    before_slice: SliceHook | None = None
    last: BlockRanking | None = None
    peak_rss: dict[int, int] = field(default_factory=dict)

    def threads(self) -> int:
        """Worker threads in the cluster now: one block each."""
        workers = self.client.scheduler_info().get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))

    def slice_budget(self, budget: int, n: int, m: int) -> int:
        """The budget the slices are cut under: what ``budget`` leaves on the largest
        worker (its own resident set and the kernel still to load counted:
        ``rank_job.ranking_bytes``), and small enough for :data:`SLICES_PER_THREAD` slices
        per worker thread, so that the blocks (whole slices) can be balanced."""
        in_use = max(self.client.run(_worker_rss).values(), default=0)
        return min(ranking_bytes(budget, in_use),
                   budget_for_slices(n, m, SLICES_PER_THREAD * self.threads()))

    def rank(self, store: SliceStore, mask: np.ndarray, params: RankParams,
             progress: ProgressFn | None = None,
             check_stop: StopCheck | None = None) -> RankReport:
        """Both rankings over ``store`` (in a directory the workers see) on the cluster."""
        tasks = DaskTasks(self.client, check_stop, self.before_slice)
        try:
            ranking = rank_blocks(store, mask, params.solver, run_tasks=tasks,
                                  blocks=self.threads(), dangling=params.dangling,
                                  interest_from_importance=params.interest_from_importance,
                                  progress=progress, check_stop=check_stop)
        except FileNotFoundError as exc:  # raised on a worker, which does not see the files
            raise ClusterError(
                f"a worker of the Dask cluster at {self.address} cannot read the slices in "
                f"{store.directory} ({exc.strerror}: {exc.filename}): ranking.cluster_dir "
                "must be a folder every worker sees at the same path (a shared "
                "filesystem)") from None
        finally:  # the workers' reused arrays (ranking.blocks.Scratch) go with the ranking
            self._release_scratch()
        self.last, self.peak_rss = ranking, tasks.peak_rss
        both = ranking.result
        log.info("ranked on the Dask cluster at %s: %d slices in %d blocks, %d sweeps, "
                 "%.2f s a sweep", self.address, store.count, len(ranking.blocks),
                 both.importance.iterations, both.seconds_per_sweep)
        return RankReport(mean_one(both.importance.values), mean_one(both.interest.values),
                          both.importance.iterations, both.interest.iterations,
                          both.importance.residuals, both.interest.residuals,
                          both.importance.seconds, True, both.slices)


    def _release_scratch(self) -> None:
        try:
            self.client.run(Scratch.release)
        except Exception as exc:  # a worker gone: its memory went with it
            log.debug("could not release the workers' scratch arrays: %s", exc)


def connect(address: str, timeout_s: float) -> Any:
    """A client of the scheduler at ``address`` with at least one worker;
    ClusterUnreachable (what went wrong) otherwise, ClusterMissing without the extra."""
    distributed = load_distributed()
    try:
        client = _client_within(distributed, address, timeout_s)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterUnreachable(f"cannot reach the Dask scheduler at {address} within "
                                 f"{timeout_s:g} s ({exc.__class__.__name__}: {exc})") from None
    try:
        client.wait_for_workers(1, timeout=max(timeout_s, WORKERS_WAIT_S))
    except (OSError, TimeoutError) as exc:
        client.close()
        raise ClusterUnreachable(f"the Dask scheduler at {address} has no worker "
                                 f"({exc.__class__.__name__}: {exc})") from None
    return client


def _client_within(distributed: Any, address: str, timeout_s: float) -> Any:
    """``distributed.Client(address)``, or TimeoutError after ``timeout_s`` (and a little):
    the Client's own timeout does not bound its handshake, so a port that accepts and never
    answers as a scheduler (another service, a stuck scheduler) held it for ever, and with
    it the daemon's ranking and its stop. The attempt left behind runs on in a daemon
    thread; a client it makes after all is closed."""
    lock, box = threading.Lock(), {}

    def make() -> None:
        try:
            made: Any = distributed.Client(address, timeout=timeout_s, set_as_default=False)
        except BaseException as exc:   # handed to the caller, which raises it
            made = exc
        with lock:
            if box.get("abandoned"):
                if not isinstance(made, BaseException):
                    made.close()
                return
            box["made"] = made
    thread = threading.Thread(target=make, name="xyro-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout_s + CONNECT_SLACK_S)
    with lock:
        if "made" not in box:
            box["abandoned"] = True
            raise TimeoutError(f"no answer as a Dask scheduler in {timeout_s:g} s")
    made = box["made"]
    if isinstance(made, BaseException):
        raise made
    return made


@contextmanager
def open_cluster(address: str | None, timeout_s: float, *, required: bool = False,
                 before_slice: SliceHook | None = None) -> Iterator[ClusterSession | None]:
    """The cluster session for ``address``, or None: when no cluster is configured, or,
    unless ``required``, when it cannot be used (not installed, unreachable, no worker),
    which is logged as one warning saying the ranking runs on this host instead."""
    if not address:
        yield None
        return
    try:
        client = connect(address, timeout_s)
    except (ClusterMissing, ClusterUnreachable) as exc:
        if required:
            raise
        log.warning("ranking.cluster: %s; ranking on this host instead", exc)
        yield None
        return
    try:
        yield ClusterSession(client, address, before_slice)
    finally:
        client.close()
