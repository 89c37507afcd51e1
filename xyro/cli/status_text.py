"""Text for people: the ``xyro status`` report and the generic renderer of command summaries.

Pure functions of plain data (no click, no database), so they are tested on dictionaries.
:func:`render_status` takes the report ``xyro status --json`` prints (built by
:mod:`xyro.cli.status`) and lays it out in labelled sections, every number with its unit;
the refresh figures are those of DESIGN.md §6 (G, K, t_i, Ω). :func:`format_report` renders
any other summary (``crawl``, ``demo``, ``rank``, ``plan``) generically.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from xyro.crawl.frontier import BACKGROUND, DISCOVERY, LOADER, REFRESH, URGENT

PRIORITY_NAMES = {LOADER: "loader", URGENT: "urgent", REFRESH: "refresh",
                  DISCOVERY: "discovery", BACKGROUND: "background"}
NOT_PLANNED = "not computed yet (run `xyro plan --run`, or let `xyro run` plan each unit)"
_INDENT = "  "
DETAIL_CHARS = 100  # error details longer than this are cut in the text


# -- units and numbers -----------------------------------------------------------------------

def iso(t: float | None) -> str:
    """POSIX seconds as UTC ISO 8601 (``2026-01-01T00:00:00Z``); ``-`` for None."""
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(seconds: float) -> str:
    """A span in the largest fitting unit: ``0.4 s``, ``12 s``, ``3 min``, ``1.5 h``, ``2 days``."""
    s = abs(float(seconds))
    for span, unit in ((86400.0, "day"), (3600.0, "h"), (60.0, "min")):
        if s >= span:
            value = s / span
            text = f"{value:.0f}" if value >= 10 else f"{value:.1f}".removesuffix(".0")
            return f"{text} {unit}" + ("s" if unit == "day" and text != "1" else "")
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def ago(t: float | None, now: float) -> str:
    """``2026-…Z, 12 s ago`` (or ``… ahead of this clock`` for a time after ``now``)."""
    if t is None:
        return "time not recorded"
    delta = now - t
    when = f"{duration(delta)} ago" if delta >= 0 else f"{duration(delta)} ahead of this clock"
    return f"{iso(t)}, {when}"


def number(value: float | int | None, digits: int = 4) -> str:
    """Thousands separators for counts and large values, ``digits`` significant digits for
    small ones; ``-`` for None, ``∞`` for infinity."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if math.isnan(value):
        return "NaN"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def size(n: int | float | None) -> str:
    """Bytes in binary units: ``306,007 bytes`` → ``298.8 KiB``."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value):,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def counts(mapping: Mapping[Any, Any] | None, empty: str = "none") -> str:
    """``html 39 · xml 210``, largest first."""
    if not mapping:
        return empty
    items = sorted(mapping.items(), key=lambda kv: (-_as_number(kv[1]), str(kv[0])))
    return " · ".join(f"{k} {number(v)}" for k, v in items)


def _as_number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _section(title: str, rows: Iterable[tuple[str, str]]) -> list[str]:
    rows = list(rows)
    width = max((len(label) for label, _ in rows), default=0)
    return [title, *(f"{_INDENT}{label:<{width}}  {text}".rstrip() for label, text in rows)]


# -- xyro status ------------------------------------------------------------------------------

def render_status(report: Mapping[str, Any], now: float) -> str:
    """The ``xyro status`` text: one section per part of the system an operator checks."""
    blocks = [_header(report), _urls(report), _opic(report, now), _frontier(report),
              _live_crawl(report, now),
              _last_crawl(report, now), _refresh(report, now), _global_estimate(report, now),
              _errors(report, now), _jobs(report, now)]
    return "\n\n".join("\n".join(block) for block in blocks if block)


def _header(r: Mapping[str, Any]) -> list[str]:
    return [f"Xyro store {r.get('database', '?')} (schema version {r.get('schema_version')}), "
            f"status at {r.get('generated_at', '?')}"]


def _urls(r: Mapping[str, Any]) -> list[str]:
    wh = r.get("warehouse") or {}
    return _section(f"URLs: {number(r.get('urls', 0))} known on {number(r.get('hosts', 0))} "
                    "host(s)", [
        ("by type", counts(r.get("by_type"))
                    + (f" ({number(r['retrying'])} error(s) to be tried again)"
                       if r.get("retrying") else "")),
        ("XML warehouse", f"{number(wh.get('documents', 0))} document(s), "
                          f"{number(wh.get('dtds_and_entities', 0))} DTD(s) and entity "
                          f"file(s), {number(r.get('xml_versions', 0))} stored version(s)"),
        ("loader", f"{number(r.get('pending', 0))} document(s) waiting for DTDs/entities"),
    ])


def _opic(r: Mapping[str, Any], now: float) -> list[str]:
    opic = r.get("opic")
    if not isinstance(opic, Mapping):
        return []
    rows = [(f"{i + 1}.", f"{page.get('estimate') or 0:.3g} (cash {page.get('cash') or 0:.3g}, "
                          f"history {page.get('history') or 0:.3g})  {page.get('url')}")
            for i, page in enumerate(opic.get("top") or [])]
    return _section(f"OPIC: {number(opic.get('pages', 0))} page(s), clock G "
                    f"{opic.get('clock_g', 0):.4g}, checkpoint {ago(opic.get('written_at'), now)} "
                    "(per page: the view v_opic)", rows)


def _frontier(r: Mapping[str, Any]) -> list[str]:
    queued = r.get("frontier") or {}
    by_level = " · ".join(f"{p} {name}: {number(int(queued.get(p, queued.get(str(p), 0))))}"
                          for p, name in PRIORITY_NAMES.items())
    rows = [("by priority", by_level)]
    if r.get("seeds_stored"):
        found = int(r.get("seeds_found") or 0)
        text = f"{number(r['seeds_stored'] - found)} added with `xyro seed`"
        if found:
            text += f", {number(found)} found where a seed redirected"
        rows.append(("seeds", text + " (table seeds)"))
    return _section(f"frontier: {number(r.get('frontier_total', 0))} URL(s) queued "
                    "(persisted; priority 0 is served first)", rows)


#: Optional counters of a crawl snapshot: (key, label, text with ``{}`` for the number).
_CRAWL_EXTRAS = (
    ("not_modified", "not modified", "{} (answered 304, body not read again)"),
    ("discovered", "discovered", "{} new URL(s)"),
    ("seen_urls", "seen", "{} URL(s) in the seen-set"),
)


def fetched_pages(snapshot: Mapping[str, Any]) -> tuple[int, int]:
    """(pages fetched, records of URLs robots.txt forbade) of a crawl snapshot: its ``pages``
    count holds both, and the refused ones were never fetched."""
    refused = int((snapshot.get("errors_by_kind") or {}).get("robots", 0))
    return int(snapshot.get("pages", 0)) - refused, refused


def _crawl_rows(c: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The labelled counters of one crawl snapshot (``CrawlStats.snapshot`` keys)."""
    errors = c.get("errors_by_kind") or {}
    fetched, refused = fetched_pages(c)
    rows = [
        ("pages", f"{number(fetched)} fetched in {duration(c.get('elapsed_s') or 0)} real "
                  f"({number(c.get('pages_per_s'))} pages/s), {size(c.get('bytes'))}"
                  + (f"; {number(refused)} more refused by robots.txt, not fetched"
                     if refused else "")),
        ("by type", counts(c.get("by_type"))),
        ("errors", f"{number(sum(errors.values()))}: {counts(errors)}" if errors else "0"),
    ]
    rows += [(label, text.format(number(c[key]))) for key, label, text in _CRAWL_EXTRAS
             if key in c]
    if "queued" in c:
        rows.append(("queue", f"{number(c.get('queued', 0))} queued, "
                              f"{number(c.get('in_flight', 0))} in flight, "
                              # hosts_waiting counts the hosts holding queued URLs,
                              # whether their politeness delay has run out or not
                              f"{number(c.get('hosts_waiting', 0))} host(s) with queued "
                              "URLs"))
    if c.get("refused_by_reason"):
        rows.append(("refused", counts(c["refused_by_reason"])))
    if "loader_pending" in c:
        rows.append(("loader", f"{number(c['loader_pending'])} document(s) held for "
                               f"DTDs/entities, {number(c.get('loader_cached', 0))} DTD/entity "
                               "file(s) cached"))
    sources = c.get("loader_dtd_sources")
    if isinstance(sources, Mapping):
        rows.append(("DTDs/entities", f"{number(sources.get('catalog', 0))} from XML catalogs, "
                                      f"{number(sources.get('cache', 0))} from the cache, "
                                      f"{number(sources.get('web', 0))} fetched from the web"))
    opic = c.get("opic")
    if isinstance(opic, Mapping):
        rows.append(("OPIC", f"{number(opic.get('visits', 0))} visit(s) over "
                             f"{number(opic.get('pages', 0))} page(s), G "
                             f"{opic.get('clock_g', 0):.4g}, V {opic.get('virtual_cash', 0):.3g}, "
                             f"total cash {opic.get('total_cash', 0):.12g}, focus "
                             f"{opic.get('focus_granted', 0):.3g}, "
                             f"{number(opic.get('checkpoints', 0))} checkpoint(s)"))
    pub = c.get("publication")
    if isinstance(pub, Mapping):
        rows.append(("publication", _publication_row(pub)))
    return rows


_PUBLICATION_KEYS = ("sources", "read", "listed_urls", "trusted_sources")


def _publication_row(pub: Mapping[str, Any]) -> str:
    """Sitemaps/feeds known and read, URLs they dated, sources believed, judged outcomes."""
    outcomes = {k: v for k, v in pub.items() if k not in _PUBLICATION_KEYS}
    return (f"{number(pub.get('sources', 0))} sitemap/feed source(s), "
            f"{number(pub.get('read', 0))} read, {number(pub.get('listed_urls', 0))} "
            f"dated URL(s), {number(pub.get('trusted_sources', 0))} trusted; "
            f"judged: {counts(outcomes)}")


def _live_crawl(r: Mapping[str, Any], now: float) -> list[str]:
    live = r.get("live_crawl")
    if not isinstance(live, Mapping):
        return ["live crawl: none published (`xyro run` publishes its counters every 10 s)"]
    when = live.get("updated_at")
    stamp = ago(when, now) if isinstance(when, (int, float)) else \
        "update time not recorded: stale if the daemon has stopped"
    if r.get("crawler_running") is False:
        return _section(f"last counters of a crawler that is no longer running (published "
                        f"{stamp}; it ended without a clean stop, e.g. killed):",
                        _crawl_rows(live))
    return _section(f"live crawl of the daemon ({stamp}):", _crawl_rows(live))


def _last_crawl(r: Mapping[str, Any], now: float) -> list[str]:
    last = r.get("last_crawl")
    if not isinstance(last, Mapping):
        return []
    ended = _last_finished(r, ("crawl", "daemon"))
    stamp = f"ended {ago(ended, now)}" if ended is not None else "end time not recorded"
    return _section(f"last finished crawl ({stamp}):", _crawl_rows(last))


def _last_finished(r: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    ends = [run.get("finished") for run in r.get("job_runs") or []
            if run.get("name") in names and isinstance(run.get("finished"), (int, float))]
    return max(ends) if ends else None


def _due_now(p: Mapping[str, Any], r: Mapping[str, Any]) -> str:
    """Due pages the plan has queued (their folders moved on when it did) and those still
    waiting in the folders up to this unit."""
    if p.get("due_now") is None:
        return "-"
    frontier = r.get("frontier") or {}
    queued = int(frontier.get(REFRESH, frontier.get(str(REFRESH), 0)))
    return (f"{number(queued)} page(s) queued for refresh, {number(p.get('due_now'))} more "
            f"in folders up to unit {p.get('unit')}")


def _refresh(r: Mapping[str, Any], now: float) -> list[str]:
    p = r.get("refresh") or {}
    unit_s = float(p.get("unit_s") or 86400.0)
    planned = p.get("planned_at_s")
    stamp = f"last planned {ago(planned, now)}" if planned is not None else "never planned"
    title = (f"refresh plan (unit {p.get('unit')}, unit length {duration(unit_s)}; "
             f"{stamp}):")
    configured = float(p.get("configured_unit_s") or unit_s)
    k, omega, prior = p.get("k"), p.get("omega"), p.get("prior_rate_per_unit")
    share = float(p.get("discovery_share") or 0.0)
    g = p.get("bandwidth_pages_per_unit")  # the last unit's G (the config's before any unit)
    configured_g = p.get("configured_bandwidth_pages_per_unit")
    rows = [
        ("budget G", f"{number(g)} pages/unit: "
                     f"{number(p.get('refresh_pages_per_unit'))} refresh + "
                     f"{number(p.get('discovery_pages_per_unit'))} discovery "
                     f"(ρ = {share:.0%})"
                     + ("" if configured_g in (None, g) else
                        f", as the crawl's last unit had it; the configuration says "
                        f"{number(configured_g)}")),
        *_spent_rows(r.get("fetch_units") or [], unit_s),
        ("due now", _due_now(p, r)),
        ("K", NOT_PLANNED if k is None else
              f"{number(k)} (t_i = K/√(r_i·λ_i) in units, λ_i in changes/unit; t_i clamped "
              f"to [{number(p.get('min_interval_units'))}, "
              f"{number(p.get('max_interval_units'))}] units)"),
        ("predicted Ω", NOT_PLANNED if omega is None else
                        f"{number(omega)} changes (importance-weighted changes not yet "
                        "re-read, time average; lower is fresher)"),
        ("prior rate", NOT_PLANNED if prior is None else
                       f"{number(prior)} changes/unit ({number(prior * 86400.0 / unit_s)} "
                       "changes/day) for pages read too few times to estimate"),
    ]
    if configured != unit_s:
        rows.append(("unit length", f"the stored folders count in units of "
                                    f"{duration(unit_s)}, the configuration says "
                                    f"{duration(configured)}: the next planning refiles them"))
    return _section(title, rows)


def _spent_rows(units: list[Mapping[str, Any]], unit_s: float) -> list[tuple[str, str]]:
    """The bandwidth the crawl spent in its last units (table fetch_units), newest first;
    a unit of another length than ``unit_s`` (the plan's) says its own."""
    rows = []
    for u in units:
        left = ("" if u.get("carried_over") is None else
                f"; {number(u['carried_over'])} due page(s) carried over to the next unit")
        own = float(u.get("unit_s") or unit_s)
        rows.append((f"unit {u.get('unit')}" + ("" if own == unit_s else
                                                 f" of {duration(own)}"),
                     f"{number(u.get('fetched'))} of {number(u.get('bandwidth'))} fetched "
                     f"({number(u.get('refresh'))} refresh, {number(u.get('discovery'))} "
                     f"discovery, {number(u.get('urgent'))} urgent)"
                     + (left if u.get("ended") else ", running or stopped in it")))
    if rows:
        rows[-1] = (rows[-1][0], rows[-1][1] + " (every unit: the view v_fetch_units)")
    return rows


def _errors(r: Mapping[str, Any], now: float) -> list[str]:
    """Failed fetches by kind; links the admission refused (out of scope, too deep, a trap:
    no fetch failed) are counted apart, after them."""
    kinds = r.get("errors_by_kind") or {}
    if not kinds:
        return ["errors: none recorded"]
    last = r.get("errors_last") or {}
    rows = []
    ordered = sorted(kinds.items(), key=lambda kv: (kv[0] == "refused", -kv[1], kv[0]))
    for kind, n in ordered:
        e = last.get(kind) or {}
        status = f" HTTP {e['http_status']}" if e.get("http_status") else ""
        detail = f": {_short(e['detail'], e.get('url'))}" if e.get("detail") else ""
        rows.append((kind, f"{number(n)}, last {iso(e.get('at'))} {e.get('url', '')}"
                           f"{status}{detail}"))
    refused = int(kinds.get("refused", 0))
    recorded = sum(kinds.values()) - refused
    # Not all are failed fetches: robots.txt refusals and feed or sitemap notes count too.
    also = f"; {number(refused)} links refused, not fetched" if refused else ""
    return _section(f"errors: {number(recorded)} by kind{also} (count, newest):",
                    rows)


def _short(detail: str, url: str | None, limit: int = DETAIL_CHARS) -> str:
    """An error detail without the URL it repeats, cut to ``limit`` characters (the whole
    text is in the ``v_recent_errors`` view and in ``--json``)."""
    if url and detail.startswith(f"{url}: "):
        detail = detail[len(url) + 2:]
    return detail if len(detail) <= limit else detail[:limit - 1] + "…"


def _global_estimate(r: Mapping[str, Any], now: float) -> list[str]:
    """The daemon's global PageRank estimate (``ranking.global_estimate``, DESIGN.md §5)."""
    g = r.get("global_estimate")
    if not isinstance(g, Mapping):
        return []
    if g.get("unreadable"):
        return [f"global PageRank estimate: {g['unreadable']}"]
    budget = int(g.get("budget") or 0)
    if g.get("finished"):
        stage = "finished"
    elif budget:
        stage = f"round {g.get('round', 0)} of {g.get('rounds', 0)}"
    else:
        stage = (f"waiting for the scope to stop growing ({number(g.get('local_pages', 0))} "
                 "in-scope page(s) with links at the last check)")
    change = g.get("estimate_change_l1")
    title = f"global PageRank estimate: {stage}, updated {ago(g.get('updated_at'), now)}"
    selection = ([("selection", f"selector {g['selector']}, out-degree "
                                f"{g.get('out_degree') or '-'}")] if g.get("selector") else [])
    return _section(title, [
        ("local domain", f"{number(g.get('local_pages', 0))} in-scope page(s) with links (n)"),
        *selection,
        ("extra pages", f"{number(g.get('spent', 0))} of a budget of {number(budget)} "
                        f"out-of-scope page(s) queued for their links; "
                        f"{number(g.get('pending', 0))} of the last round not fetched yet"),
        ("estimate", "-" if change is None else
                     f"{change:.3g} from local PageRank (L1, over the in-scope pages)"),
    ])


def _jobs(r: Mapping[str, Any], now: float) -> list[str]:
    runs = r.get("job_runs") or []
    if not runs:
        return ["job runs: none yet"]
    rows = []
    for run in runs:
        took = run.get("seconds")
        took_text = f"took {duration(took)}" if took is not None else "still running or killed"
        rows.append((str(run.get("name")),
                     f"started {ago(run.get('started'), now)}, {took_text}, "
                     f"{run.get('status')}: {run.get('detail') or ''}".rstrip(": ")))
    return _section("last job runs (newest of each job):", rows)


# -- any other summary ----------------------------------------------------------------------

def format_report(report: Mapping[str, Any]) -> str:
    """Render a summary dictionary as aligned sections: scalars on one line, dictionaries and
    lists indented below their key; counts with thousands separators."""
    lines: list[str] = []
    for key, value in report.items():
        if isinstance(value, Mapping):
            lines.append(f"{key}:")
            if not value:
                lines.append(f"{_INDENT}(none)")
            width = max((len(str(k)) for k in value), default=0)
            lines.extend(f"{_INDENT}{str(k):<{width}}  {format_value(v, str(k))}"
                         for k, v in value.items())
        elif isinstance(value, list):
            lines.append(f"{key}:")
            lines.extend(f"{_INDENT}{format_value(v)}" for v in value) if value \
                else lines.append(f"{_INDENT}(none)")
        else:
            lines.append(f"{key}: {format_value(value, str(key))}")
    return "\n".join(lines)


def format_value(value: Any, key: str = "") -> str:
    """One value for :func:`format_report`. Integers named like an index (``…unit``,
    ``…version``, ``…id``) keep their plain digits; None reads ``none``."""
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={format_value(v, str(k))}" for k, v in value.items())
    if isinstance(value, int) and not isinstance(value, bool) and key.endswith(
            ("unit", "version", "id")):
        return str(value)
    if isinstance(value, (int, float)):
        return number(value)
    return str(value)
