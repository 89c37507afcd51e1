"""``xyro status``: what the store holds and what the daemon is doing, for an operator.

The data comes from :func:`metadata.status.store_status` (counts, queues, due pages, job
runs, errors) plus what this side knows: the configuration's refresh settings (G, ρ, the
time unit and the interval clamps of DESIGN.md §6) and the JSON the crawler and the planner
leave in the ``state`` table (``crawl.live``, ``crawl.last_run``, ``refresh.k``,
``refresh.omega``, ``refresh.prior_rate_per_unit``). ``--json`` prints that report with
stable keys; the text is :func:`xyro.cli.status_text.render_status`.

Registered on the main group by ``xyro.cli`` with :func:`register`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import click

from refresh.discovery import discovery_slots
from xyro.app import App
from xyro.clock import unit_index
from xyro.cli.status_text import iso, render_status
from xyro.jobs.global_round_state import STATE_KEY as GLOBAL_ROUNDS_KEY, RoundState
from xyro.service.crawl_lock import crawler_alive

@click.command("status")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (stable keys, POSIX seconds and ISO times).")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """URLs by type, warehouse, frontier, live and last crawl, refresh plan, errors, jobs.

    Times are UTC on the crawler's clock; the refresh figures (G, K, Ω) are explained in
    the output and in DESIGN.md §6.
    """
    from xyro.cli.context import app_of as _app

    app = _app(ctx)
    now = app.clock.now()
    with app.open_store(read_only=True) as store:
        # due_unit counts in the planner's unit, which the config may have changed since
        # (or, for `xyro --demo status`, never had): the store's own unit decides "now"
        unit_s = store.folder_unit_s() or app.time_unit_s
        raw = store.status(current_unit=unit_index(now, unit_s))
    report = status_report(app, {**raw, "unit_s": unit_s}, now)
    if as_json:
        click.echo(json.dumps(report, sort_keys=True, default=str))
    else:
        click.echo(render_status(report, now))


def status_report(app: App, raw: Mapping[str, Any], now: float) -> dict[str, Any]:
    """The ``--json`` report: the store's summary with the crawl state decoded, job runs
    with ISO times and durations, and the refresh plan section."""
    out: dict[str, Any] = {"database": str(app.database_path), **raw}
    runs = [run for run in raw.get("last_job_runs") or [] if isinstance(run, Mapping)]
    out["last_job_runs"] = [job_line(run) for run in runs]
    out["job_runs"] = [job_record(run) for run in runs]
    state = dict(raw.get("state") or {})
    last = decode_state(state.pop("crawl.last_run", None))
    if last is not None:
        out["last_crawl"] = last
    live = decode_state(state.get("crawl.live"))
    if live is not None:
        out["live_crawl"] = live
    # A killed crawler leaves its last counters behind; its lock says whether it still runs.
    out["crawler_running"] = crawler_alive(app.database_path)
    saved = state.pop(GLOBAL_ROUNDS_KEY, None)
    if saved is not None:
        try:
            rounds = asdict(RoundState.from_stored(saved))
            rounds["pending"] = len(rounds["pending"])  # the URLs are the frontier's to show
        except ValueError as exc:
            rounds = {"unreadable": f"{exc}; the daemon starts the rounds again"}
        out["global_estimate"] = rounds
    out["state"] = state
    out["refresh"] = refresh_section(app, raw, state, out["job_runs"])
    out["generated_at"] = iso(now)
    out["generated_at_s"] = now
    return out


def decode_state(value: Any) -> dict[str, Any] | None:
    """A crawl snapshot stored as a JSON string in the ``state`` table, or None."""
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str):
        return None
    try:
        decoded = json.loads(value)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def job_record(run: Mapping[str, Any]) -> dict[str, Any]:
    """One job run with ISO times and its duration in seconds (None while unfinished)."""
    started, finished = run.get("started"), run.get("finished")
    timed = isinstance(started, (int, float)) and isinstance(finished, (int, float))
    return {**run, "started_iso": iso(started) if isinstance(started, (int, float)) else None,
            "finished_iso": iso(finished) if isinstance(finished, (int, float)) else None,
            "seconds": round(finished - started, 3) if timed else None}


def job_line(run: Mapping[str, Any]) -> str:
    """``rank 2026-…Z (0.2 s) ok: detail``: the one-line form ``last_job_runs`` keeps."""
    rec = job_record(run)
    took = f" ({rec['seconds']:.1f} s)" if rec["seconds"] is not None else ""
    return (f"{run.get('name')} {rec['started_iso'] or '?'}{took} {run.get('status')}: "
            f"{run.get('detail') or ''}")


def refresh_section(app: App, raw: Mapping[str, Any], state: Mapping[str, Any],
                    runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The refresh settings (configuration) beside what the last planning run left: K, Ω
    and the prior rate (None until ``xyro plan --run`` or the daemon has planned a unit)."""
    cfg = app.config.refresh
    g, share = unit_bandwidth(raw) or cfg.bandwidth_pages_per_unit, cfg.discovery_share
    plans = [r for r in runs if r.get("name") == "plan"]
    prior = _number(state.get("refresh.prior_rate_per_unit"))
    unit_s = raw.get("unit_s", cfg.time_unit_s)  # the stored folders' unit (`status`)
    return {
        "unit": raw.get("current_unit"), "unit_s": unit_s,
        "configured_unit_s": cfg.time_unit_s,
        "bandwidth_pages_per_unit": g,
        "configured_bandwidth_pages_per_unit": cfg.bandwidth_pages_per_unit,
        "discovery_share": share,
        # Whole fetches, as the planner and the unit budget split G (refresh/discovery.py).
        "refresh_pages_per_unit": int(g) - discovery_slots(int(g), share),
        "discovery_pages_per_unit": discovery_slots(int(g), share),
        "min_interval_units": cfg.min_interval_units,
        "max_interval_units": cfg.max_interval_units,
        "due_now": raw.get("due_now"),
        "k": _number(state.get("refresh.k")),
        "omega": _number(state.get("refresh.omega")),
        "prior_rate_per_unit": prior,
        "prior_rate_per_day": None if prior is None else prior * 86400.0 / unit_s,
        "planned_at_s": plans[0]["finished"] if plans else None,
        "planned_at": plans[0]["finished_iso"] if plans else None,
    }


def unit_bandwidth(raw: Mapping[str, Any]) -> int | None:
    """G as the crawl's newest unit spent it (its ``fetch_units`` row), or None before any
    unit: the crawl that filled the store may have had another G than this configuration
    (``xyro demo`` gives its own; an operator may have changed the key since)."""
    units = raw.get("fetch_units") or []
    g = units[0].get("bandwidth") if units and isinstance(units[0], Mapping) else None
    return g if isinstance(g, int) and not isinstance(g, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def register(cli: click.Group) -> None:
    """Add ``status`` to the main ``xyro`` group."""
    cli.add_command(status)
