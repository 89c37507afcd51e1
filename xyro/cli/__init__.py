"""The ``xyro`` command line (click). Thin: parse, build the App, call a component, print.

Every error a user can cause ends as one line on stderr and an exit code (2 for bad
configuration or usage, 1 for runtime failures), never a traceback.

The package (DESIGN.md §1): the group and its commands here, the commands that live in
their own modules (documents, plan, status, views; each ``register(cli)``) and the shared
context (context.py: the lazily built App, the summary formatter). Command modules import
the context, never this module nor each other. May import everything below it: xyro.service,
xyro.jobs, xyro.app, xyro.crawl, ..., the shared leaves, xyro.synthweb, metadata, ranking.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click

from metadata import MetadataError, database_failure
from xyro import __version__
from xyro.app import App
from xyro.cli.context import FiniteFloat, LazyApp, app_of, canonical_url, format_status
from xyro.config import MAX_GLOBAL_ROUNDS
from xyro.config_load import ConfigError, load_config
from xyro.crawl.frontier import URGENT
from xyro.errors import UsageError, XyroError, permission_message
from xyro.service import numba_cache
from xyro.service.logs import bare_fatal, log_fatal
from xyro.service.signals import exit_on_sigterm

log = logging.getLogger("xyro.cli")

#: Frontier priority of seeds and configured sitemaps (0 is the loader's DTDs, 4 background).
SEED_PRIORITY = URGENT


class XyroGroup(click.Group):
    """Maps Xyro's own errors to one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            _fail(str(exc), exc.exit_code)
        except (XyroError, MetadataError) as exc:
            _fail(f"error: {exc}", getattr(exc, "exit_code", 1))
        except PermissionError as exc:  # one no check foresaw: still one line (DESIGN.md §7)
            _fail(f"error: {permission_message(exc)}", 2)
        except RuntimeError as exc:
            if not numba_cache.is_cache_failure(exc):
                raise
            _fail(f"error: {numba_cache.cache_failure_message(exc)}", 2)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except OSError as exc:   # the output's disk is full (stdout to a file, a pipe's end)
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            _fail(f"error: cannot write the output: {exc.strerror}; free space, then try "
                  "again", 2)
        except sqlite3.DatabaseError as exc:   # met after the store opened (DESIGN.md §7)
            lazy = ctx.find_object(LazyApp)
            if lazy is None or lazy.app is None:
                raise
            failure = database_failure(lazy.app.config.storage.database, exc)
            if failure is None:
                raise
            _fail(f"error: {failure}", getattr(failure, "exit_code", 1))


def _fail(message: str, code: int) -> None:
    if not log_fatal(message):   # a daemon logging JSON or to journald: in the log's form
        click.echo(bare_fatal(message), err=True)
    sys.exit(code)


@click.group(cls=XyroGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, envvar="XYRO_CONFIG",
              help="YAML configuration file [default: $XYRO_CONFIG, else ./config/xyro.yaml "
                   "if present, else built-in defaults].")
@click.option("-s", "--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override one config key, e.g. --set crawler.workers=8 (repeatable; "
                   "beats the file and XYRO_* variables).")
@click.option("--demo", "use_demo", is_flag=True,
              help="Work on the demo's own database (demo/xyro.db beside storage.database), "
                   "where `xyro demo` keeps its synthetic web's pages.")
@click.version_option(__version__, prog_name="xyro")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, overrides: tuple[str, ...],
        use_demo: bool) -> None:
    """Xyro: acquire XML documents from the web and keep them fresh.

    Configuration precedence: defaults < file < XYRO_* environment < --set.
    """
    # Loaded on first use, so `xyro CMD --help` works even when the config is broken.
    ctx.obj = LazyApp(config_path, overrides, use_demo)


@cli.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the database and warehouse folder, or upgrade an older database in place."""
    app = app_of(ctx)
    existed = os.path.exists(app.database_path)  # False, not an error, when unreachable
    with app.open_store(create=True) as store:
        version, found = store.schema_version, store.found_version
    verb = ("created" if not existed else "checked" if found == version
            else f"upgraded from schema version {found}:")
    click.echo(f"{verb} {app.database_path} (schema version {version})")


@cli.command()
@click.argument("urls", nargs=-1, required=True)
@click.option("--priority", type=click.IntRange(1, 4), default=SEED_PRIORITY, show_default=True,
              help="Frontier priority (1 urgent … 4 background discovery; 0 is the loader's "
                   "DTDs and entities, outside scope and bandwidth).")
@click.pass_context
def seed(ctx: click.Context, urls: tuple[str, ...], priority: int) -> None:
    """Add start URLs: kept as seeds (their hosts are in a scope derived from the seeds) and
    queued now, or by the crawler running on the database."""
    from xyro.service.crawl_lock import holder_name
    from xyro.service.crawl_run import SEED_POLL_S
    from xyro.service.seeding import seed_urls

    canonical = [canonical_url(u, "seed") for u in urls]
    done = seed_urls(app_of(ctx), canonical, priority)
    if done.running:
        who = holder_name(done.crawler_pid)
        click.echo(f"stored {len(canonical)} seed URL(s) at priority {priority} for the running "
                   f"crawler ({who}): `xyro run` queues them within {SEED_POLL_S:g} s, "
                   "`xyro crawl` at its next start")
    else:
        click.echo(f"queued {len(canonical)} URL(s) at priority {priority}")


@cli.command()
@click.option("--pages", type=click.IntRange(min=1), default=None,
              help="Stop after this many page fetches.")
@click.option("--seconds", type=FiniteFloat(min=0, min_open=True), default=None,
              help="Stop after this many seconds (clock time); fetches still running 5 s "
                   "later are cut and stay queued.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.pass_context
def crawl(ctx: click.Context, pages: int | None, seconds: float | None, as_json: bool) -> None:
    """Crawl from the configured seeds and the persisted frontier.

    Resumes where the last run stopped. SIGTERM or Ctrl-C stops cleanly: in-flight fetches
    finish or go back to the queue, and everything fetched is flushed to the database.
    """
    from xyro.service.crawl_run import run_crawl

    app = app_of(ctx)
    with _Progress(pages) as progress:
        summary = run_crawl(app, max_pages=pages, max_seconds=seconds, on_progress=progress)
    if as_json:
        click.echo(json.dumps({"stop_reason": summary.stop_reason, **summary.stats},
                              sort_keys=True, default=str))
    else:
        click.echo(f"crawl stopped: {summary.stop_reason}")
        click.echo(format_status(summary.stats))


@cli.command()
@click.option("--hosts", type=click.IntRange(min=1), default=20, show_default=True,
              help="Hosts in the synthetic web (each on its own 127.0.0.x address).")
@click.option("--web-pages", type=click.IntRange(min=1), default=3000, show_default=True,
              help="Pages in the synthetic web.")
@click.option("--seed", type=int, default=7, show_default=True, help="Seed of the web.")
@click.option("--hostile/--no-hostile", default=True, show_default=True,
              help="Include hostile pages (bombs, slow drip, redirect loops, traps...).")
@click.option("--speed", type=FiniteFloat(min=1), default=60.0, show_default=True,
              help="Clock acceleration: simulated seconds per real second.")
@click.option("--pages", type=click.IntRange(min=1), default=None,
              help="Stop after this many page fetches.")
@click.option("--seconds", type=FiniteFloat(min=0, min_open=True), default=None,
              help="Stop after this many simulated seconds [default: 1 simulated hour when "
                   "--pages is not given].")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.pass_context
def demo(ctx: click.Context, hosts: int, web_pages: int, seed: int, hostile: bool, speed: float,
         pages: int | None, seconds: float | None, as_json: bool) -> None:
    """Serve a synthetic web on 127.0.0.x and crawl it into the demo's own database.

    Each run starts that database afresh (demo/xyro.db beside storage.database, with its
    warehouse): the web's loopback ports change from run to run. `xyro --demo COMMAND`
    looks at the last run.

    The crawl uses the configuration (workers, politeness, limits) with the web's seeds,
    loopback addresses allowed and a 10 s fetch deadline. At the end the web's own request
    log is audited: requests to disallowed URLs and per-host politeness violations.
    """
    from xyro.cli.demo_view import Progress, quiet_logs
    from xyro.cli.status_text import fetched_pages
    from xyro.service.demo import demo_storage, run_demo
    from xyro.synthweb.spec import HOSTILE_KINDS, WebSpec

    if web_pages < hosts:
        raise UsageError(f"--web-pages ({web_pages}) must be at least --hosts ({hosts}): "
                         "every host has a home page")
    if pages is None and seconds is None:
        seconds = 3600.0
    spec = WebSpec(seed=seed, n_hosts=hosts, n_pages=web_pages,
                   hostile=HOSTILE_KINDS if hostile else frozenset())
    lazy = ctx.find_object(LazyApp)
    lazy.get()
    configured = App(lazy.configured, lazy.app.clock)  # run_demo moves it to the demo's store
    with Progress(pages, seconds, speed) as progress, quiet_logs():
        summary, audit = run_demo(configured, spec, speed=speed, max_pages=pages,
                                  max_seconds=seconds, on_progress=progress)
    database = demo_storage(configured.config).storage.database
    stats = summary.stats
    fetched, refused = fetched_pages(stats)
    report = {"stop_reason": summary.stop_reason,
              "pages_fetched": fetched,
              "robots_refused_not_fetched": refused,
              "simulated_s": round(progress.simulated_s, 1),
              "real_s": stats.get("elapsed_s"), "pages_per_real_s": stats.get("pages_per_s"),
              **{k: v for k, v in stats.items() if k not in ("elapsed_s", "pages_per_s", "pages")},
              "audit": audit.as_dict(), "database": database}
    if as_json:
        click.echo(json.dumps(report, sort_keys=True, default=str))
    else:
        click.echo(format_status(report))
        click.echo(f"The demo keeps its own database, {database}: look further with "
                   "`xyro --demo status`, `xyro --demo documents`, "
                   f"`sqlite3 -readonly {database} 'SELECT * FROM v_opic LIMIT 5'` or "
                   f"`sqlite3 -readonly {database} 'SELECT * FROM v_due_per_unit'`.")


class _Progress:
    """A progress bar on stderr when a page budget is known, progress lines otherwise.

    The bar appears with the first progress report, so an error before the crawl starts
    stays the one line on stderr.
    """

    def __init__(self, total: int | None) -> None:
        self._total = total
        self._bar: Any = None
        self._done = 0

    def __enter__(self) -> "_Progress":
        return self

    def __call__(self, snapshot: dict[str, Any]) -> None:
        pages = int(snapshot.get("pages", 0))
        if self._total is not None:
            if self._bar is None:
                self._bar = click.progressbar(length=self._total, label="crawling",
                                              file=sys.stderr, show_pos=True, show_eta=True)
                self._bar.__enter__()
            pages = min(pages, self._total)
            self._bar.update(pages - self._done)
            self._done = pages
        else:
            click.echo(f"{pages} pages, {snapshot.get('pages_per_s', 0)} pages/s, "
                       f"{snapshot.get('queued', 0)} queued, "
                       f"{sum(snapshot.get('errors_by_kind', {}).values())} errors", err=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


@cli.command("run")
@click.option("--speed", type=FiniteFloat(min=1), default=1.0, show_default=True,
              help="Simulations only: run the clock this many times faster than real time "
                   "(against `python -m xyro.synthweb --speed` with the same --epoch).")
@click.option("--epoch", type=FiniteFloat(), default=None,
              help="Simulations only: the wall-clock POSIX time at which the accelerated "
                   "clock reads --sim-start [default: now]; give the synthetic web the same.")
@click.option("--sim-start", type=FiniteFloat(), default=None,
              help="Simulations only: the simulated POSIX time at --epoch [default: the "
                   "epoch itself].")
@click.pass_context
def run_daemon(ctx: click.Context, speed: float, epoch: float | None,
               sim_start: float | None) -> None:
    """Run the daemon: crawl without end, rank on schedule, publish status.

    Meant for systemd (Type=notify: READY/STATUS/STOPPING are sent when $NOTIFY_SOCKET is
    set). SIGTERM stops cleanly (exit 0); SIGHUP re-reads the configuration file.
    """
    from xyro.clock import AcceleratedClock, WallClock
    from xyro.service.daemon import Daemon
    from xyro.service.sdnotify import Notifier

    lazy = ctx.find_object(LazyApp)
    if speed == 1.0 and epoch is None and sim_start is None:
        app = lazy.get()
    else:
        app = lazy.get(AcceleratedClock.from_epoch(
            WallClock().now() if epoch is None else epoch, speed, sim_start))

    def reload_config() -> Any:
        return load_config(lazy.path, os.environ, lazy.overrides)

    daemon = Daemon(app, Notifier(), reload_config)
    with daemon.signals():
        daemon.run()


@cli.command()
@click.option("--edges", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Rank a bare edge list (.npz with n, src, dst[, xml]) "
                                 "instead of the database.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many top pages to show (not used with --compare).")
@click.option("--compare", is_flag=True,
              help="Compare OPIC's importance estimates with the teleport PageRank of the "
                   "same graph instead of ranking: the crawl's stored OPIC checkpoint "
                   "against the stored graph, or with --edges OPIC run on the edge list. "
                   "Writes nothing.")
@click.option("--reads", type=click.IntRange(min=1), default=None,
              help="With --compare --edges: OPIC reads per page, i.e. reads x pages Greedy "
                   "visits [default: 10].")
@click.option("--cluster", "cluster", metavar="ADDRESS", default=None,
              help="Rank on this Dask scheduler (tcp://host:8786), out of core, the slices "
                   "in ranking.cluster_dir; needs the cluster extra. Overrides "
                   "ranking.cluster, and an unreachable scheduler is an error here.")
@click.option("--global-estimate", "global_estimate", is_flag=True,
              help="Estimate the global PageRank of a local domain by crawling a few "
                   "out-of-scope pages (DESIGN.md §5): with --edges, the range --local of the "
                   "edge list, measured against its global PageRank; without, the stored "
                   "graph's in-scope pages (what it allows without fetching). Writes nothing.")
@click.option("--local", "local_range", default=None, metavar="START:STOP",
              help="With --global-estimate --edges: the local domain, ids START to STOP-1.")
@click.option("--selector",
              type=click.Choice(["sc", "sc_learned", "pf", "outlinks", "random"]),
              default=None, help="With --global-estimate: which frontier pages to crawl: "
                                 "sc_learned, SC-Select with each page's unknown links "
                                 "learned from the out-of-scope pages crawled so far; sc, "
                                 "SC-Select as published (the average column) [default: "
                                 "ranking.global_estimate.selector, sc_learned].")
@click.option("--extra", type=FiniteFloat(min=0, min_open=True, max=100), default=None,
              help="With --global-estimate: extra pages, as a multiple of the domain's "
                   "pages [default: ranking.global_estimate.extra_pages_per_local_page, 2].")
@click.option("--rounds", type=click.IntRange(1, MAX_GLOBAL_ROUNDS), default=None,
              help="With --global-estimate: selection rounds [default: "
                   "ranking.global_estimate.rounds, 50].")
@click.option("--out-degree", "out_degree", type=click.Choice(["within", "all"]),
              default=None, help="With --global-estimate: a page's out-degree counts its "
                                 "links inside F (within, the paper's) or all its links "
                                 "[default: ranking.global_estimate.out_degree, within].")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.pass_context
def rank(ctx: click.Context, edges: Path | None, top: int, compare: bool, reads: int | None,
         cluster: str | None, global_estimate: bool, local_range: str | None,
         selector: str | None, extra: float | None, rounds: int | None,
         out_degree: str | None, as_json: bool) -> None:
    """Compute direct importance and inverse interest (PageRank) and store them (mean 1).

    Uses the ranking section of the config (damping, tolerance, dangling, memory budget:
    above it the graph is ranked out of core, in slices; ranking.cluster: on a Dask
    cluster). Progress per sweep on stderr.

    With --compare, measure how close OPIC is to its fixpoint, the teleport PageRank with
    the same damping (DESIGN.md §5): L1 distance, Kendall tau, top-100 overlap and mean
    relative error over the pages both know; progress on stderr.

    With --global-estimate, estimate the global PageRank of a local domain from a small
    extra crawl (DESIGN.md §5, xyro/jobs/global_estimate.py): on an edge list with --edges
    and --local, measured against its global PageRank; on the stored graph, the configured
    scope's pages and what the store allows without fetching.
    """
    from ranking.results import ConvergenceError
    from xyro.jobs.rank_run import rank_edges, run_rank

    def progress(p: Any) -> None:
        click.echo(f"{p.ranking} sweep {p.iteration}: residual {p.residual:.3e}", err=True)

    if cluster is not None:
        _check_cluster(cluster, compare)
    if reads is not None and not (compare and edges is not None):
        raise UsageError("--reads is the number of OPIC reads per page of `xyro rank "
                         "--compare --edges FILE.npz`; add --compare and --edges, or drop "
                         "--reads")
    app = app_of(ctx)
    estimate_options = {"selector": selector, "extra": extra, "rounds": rounds,
                        "degree": out_degree}
    if global_estimate or local_range is not None or any(
            v is not None for v in estimate_options.values()):
        if cluster is not None:
            raise UsageError("--cluster ranks on a Dask cluster; --global-estimate runs on "
                             "this host: drop one of them")
        report = _global_estimate(app, global_estimate, compare, edges, local_range,
                                  estimate_options)
        click.echo(json.dumps(report, sort_keys=True) if as_json else format_status(report))
        return
    try:
        with exit_on_sigterm():   # its temporary slice files are removed on the way out
            if compare:
                from xyro.jobs.opic_compare import compare_opic
                report = compare_opic(app, edges, reads,
                                      lambda line: click.echo(line, err=True))
            else:
                summary = (rank_edges(edges, app, progress, top, cluster)
                           if edges is not None else run_rank(app, progress, top, cluster))
                report = summary.as_dict()
    except ConvergenceError as exc:
        raise XyroError(f"ranking did not converge: {exc} (config keys ranking.max_iter, "
                        "ranking.tolerance, ranking.damping)") from None
    except ValueError as exc:
        verb = "compare" if compare else "rank"
        raise XyroError(f"cannot {verb} {edges or app.database_path}: {exc}") from None
    except OSError as exc:   # a slice file damaged or its disk full (ranking.slices)
        raise XyroError(f"cannot rank {edges or app.database_path}: {exc}") from None
    except MemoryError:
        raise XyroError(f"not enough memory to rank {edges or app.database_path}: its page "
                        "count needs more than this machine has; for the stored graph lower "
                        "ranking.memory_budget_mb (out of core) or set ranking.cluster") from None
    click.echo(json.dumps(report, sort_keys=True) if as_json else format_status(report))


def _global_estimate(app: Any, flag: bool, compare: bool, edges: Path | None,
                     local_range: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """``xyro rank --global-estimate``: the flags checked, then xyro.jobs.global_estimate."""
    from xyro.jobs.global_estimate import GlobalOptions, estimate_edges, estimate_store, \
        parse_range
    if not flag:
        raise UsageError("--local, --selector, --extra, --rounds and --out-degree belong to "
                         "`xyro rank --global-estimate`; add --global-estimate or drop them")
    if compare:
        raise UsageError("--global-estimate and --compare are two different reports; give "
                         "one of them")
    if (edges is None) != (local_range is None):
        raise UsageError("--global-estimate --edges FILE.npz needs --local START:STOP (the "
                         "local domain's ids), and --local needs --edges: on the stored "
                         "graph the local domain is the configured scope")
    chosen = GlobalOptions.from_config(app.config.ranking.global_estimate, **options)
    try:
        if edges is not None:
            try:
                local = parse_range(local_range or "")
            except ValueError as exc:
                raise UsageError(f"--local: {exc}") from None
            return estimate_edges(edges, local, chosen, app.config.ranking.damping)
        return estimate_store(app, chosen)
    except ValueError as exc:
        raise XyroError(f"cannot estimate on {edges or app.database_path}: {exc}") from None
    except MemoryError:
        raise XyroError(f"not enough memory to estimate on {edges or app.database_path}: its "
                        "page count needs more than this machine has") from None


def _check_cluster(address: str, compare: bool) -> None:
    """``--cluster``: a scheduler address, and Dask installed (else exit 2 naming the extra)."""
    from xyro.config import split_cluster
    from xyro.jobs.rank_cluster import load_distributed

    if compare:
        raise UsageError("--cluster ranks on a Dask cluster; --compare runs on this host: "
                         "drop one of them")
    try:
        split_cluster(address)
    except ValueError:
        raise UsageError(f"--cluster {address!r} is not a Dask scheduler address: give "
                         "tcp://HOST:PORT (or tls://), e.g. tcp://10.0.0.5:8786") from None
    load_distributed()


@cli.group("config")
def config_group() -> None:
    """Inspect the effective configuration."""


@config_group.command("show")
@click.pass_context
def config_show(ctx: click.Context) -> None:
    """Print the effective configuration (defaults, file, environment and --set merged)."""
    click.echo(app_of(ctx).config.dump_yaml(), nl=False)


def _register_modules() -> None:
    """Commands that live in their own modules (one idea per module)."""
    from xyro.cli import documents as cli_documents
    from xyro.cli import plan as cli_plan
    from xyro.cli import status as cli_status
    from xyro.cli import views as cli_views

    cli_status.register(cli)
    cli_plan.register(cli)
    cli_documents.register(cli)
    cli_views.register(cli)


_register_modules()


def main(argv: list[str] | None = None) -> None:
    """The command line, called by the entry point :func:`xyro.__main__.main`.

    numba's cache folder is chosen first, before any command imports ``ranking``
    (:mod:`xyro.service.numba_cache`).
    """
    numba_cache.configure()
    cli.main(args=argv, prog_name="xyro")

