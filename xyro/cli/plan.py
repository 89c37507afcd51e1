"""``xyro plan``: show the refresh plan, explain one page, or run the current unit.

Registered on the main group by ``xyro.cli`` with :func:`register`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from xyro.app import App, build_admission, scope_seeds
from xyro.cli.context import canonical_url
from xyro.crawl.admission import Source
from xyro.crawl.frontier import admit_offline, records
from xyro.errors import UsageError, XyroError
from xyro.jobs.plan_explain import summary
from xyro.jobs.plan_job import RefreshPlanner
from xyro.jobs.plan_settings import PlannerSettings
from xyro.net.urls import ScopeSeeds
from xyro.service.crawl_lock import CrawlerRunning, CrawlLock, holder_name


def _app(ctx: click.Context) -> App:
    from xyro.cli.context import app_of

    return app_of(ctx)


def _render(report: dict[str, Any]) -> str:
    from xyro.cli.context import format_status

    return format_status(report)


@click.command("plan")
@click.option("--run", "run_unit", is_flag=True,
              help="Estimate, plan and enqueue the current unit's pages into the frontier.")
@click.option("--explain", "explain_url", metavar="URL", default=None,
              help="Show r, lambda and its evidence, t and the due unit of one page.")
@click.option("--units", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="How many coming time units to show pages due for.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.pass_context
def plan(ctx: click.Context, run_unit: bool, explain_url: str | None, units: int,
         as_json: bool) -> None:
    """Refresh plan: pages due per time unit, predicted obsolescence, t and lambda spread.

    Rates come from the observations (Last-Modified where the server is reliable, else
    the MD5 maximum-likelihood estimate); t_i = K/sqrt(r_i*lambda_i) within the configured
    interval clamps. Without --run nothing is written.
    """
    if run_unit and explain_url:
        raise UsageError("--run and --explain do not go together: run the unit first, "
                         "then explain a page")
    app = _app(ctx)
    settings = PlannerSettings.from_config(app.config.refresh)
    with app.open_store(read_only=not run_unit) as store:
        # The writer first: a user who cannot write hears so before anything is read.
        writer = store.writer(now=app.clock.now) if run_unit else None
        conn = store.read_connection()
        try:
            planner = RefreshPlanner(conn, writer.submit if writer else _read_only, app.clock,
                                     settings)
            click.echo("planning...", err=True)
            if explain_url is not None:
                report = planner.explain(canonical_url(explain_url, "--explain"))
            elif run_unit:
                with _no_crawler(app):  # its writes committed before a crawler may start
                    report = _run(planner, writer.submit, app, scope_seeds(app, store))
                    writer.flush()
            else:
                report = summary(planner.plan(), units)
        finally:
            conn.close()
            if writer is not None:
                writer.close()
    click.echo(json.dumps(report, sort_keys=True, default=str) if as_json
               else _render(report))


def _run(planner: RefreshPlanner, submit: Any, app: App,
         seeds: ScopeSeeds) -> dict[str, Any]:
    """Plan the unit and write its pages to the persisted frontier through the frontier's
    admission and record building (no crawler runs here; DESIGN.md §2)."""
    unit = planner.current_unit()
    fetch = planner.run_unit(unit)
    admission = build_admission(app, seeds)
    by_priority: dict[str, int] = {}
    refused: dict[str, int] = {}
    for priority, items in planner.offers(fetch).items():
        submitted = admit_offline(admission, Source.REFRESH, items, priority)
        for op in records(submitted.queued, submitted.refused):
            submit(op)
        by_priority[str(priority)] = len(submitted.queued)
        for _, refusal in submitted.refused:
            refused[refusal.kind] = refused.get(refusal.kind, 0) + 1
    return {"unit": unit, "enqueued": sum(by_priority.values()),
            "enqueued_by_priority": by_priority, "refused_by_reason": refused,
            "database": str(app.database_path)}


@contextmanager
def _no_crawler(app: App) -> Iterator[None]:
    """Hold the crawl lock while ``--run`` writes: pages it queued beside a running crawler
    would wait unseen (``xyro run`` plans every unit itself; ``xyro crawl`` reads the
    persisted frontier only at its start)."""
    try:
        lock = CrawlLock(app.database_path, wait_s=0.5)
        lock.acquire()
    except CrawlerRunning as running:
        who = holder_name(running.pid)
        raise UsageError(
            f"a crawler ({who}) is running on {app.database_path}: `xyro plan --run` would "
            "queue pages it never reads (`xyro run` plans every unit itself, `xyro crawl` "
            "reads the queue only at its start); run it when no crawler holds the "
            "database") from None
    try:
        yield
    finally:
        lock.release()


def _read_only(op: object) -> None:
    raise XyroError(f"internal: `xyro plan` without --run tried to write {type(op).__name__}")


def register(cli: click.Group) -> None:
    """Add ``plan`` to the ``xyro`` command group."""
    cli.add_command(plan)
