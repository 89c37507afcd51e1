"""``xyro status``: labelled sections with units, and ``--json`` with stable keys.

The store is a real SQLite file written by the project's own writer, with the state the
crawler and the planner leave (``crawl.live``, ``crawl.last_run``, ``refresh.*``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from metadata import Enqueue, FetchRecord, JobRun, MetadataStore, PageType, SetState, XmlVersion
from xyro.cli import status as cli_status
from xyro.cli import cli
from xyro.cli.status_text import duration, format_report, number, render_status
from xyro.jobs.global_round_state import STATE_KEY as GLOBAL_KEY
from xyro.jobs.global_round_state import RoundState
from xyro.service.crawl_lock import CrawlLock

if "status" not in cli.commands:
    cli_status.register(cli)

DAY = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DOC, DTD = "http://shop.example/catalog.xml", "http://shop.example/catalog.dtd"
LEGACY_KEYS = {"database", "schema_version", "urls", "by_type", "frontier", "frontier_total",
               "current_unit", "due_now", "last_job_runs", "errors_by_kind", "hosts",
               "xml_versions", "pending", "state"}
SNAPSHOT = {"pages": 12345, "pages_per_s": 41.25, "elapsed_s": 299.3, "robots_fetches": 3,
            "bytes": 5 * 2**20, "not_modified": 7, "discovered": 2345,
            "by_type": {"html": 12000, "xml": 345}, "errors_by_kind": {"timeout": 2},
            "refused_by_reason": {}, "queued": 523, "queued_by_priority": {"3": 523},
            "in_flight": 4, "hosts_waiting": 9, "seen_urls": 15000}


def _md5(text: str) -> bytes:
    return hashlib.md5(text.encode()).digest()


def fill(db: Path, planned: bool) -> None:
    """One HTML page, one XML document and its DTD, a timeout, job runs, crawl state."""
    with MetadataStore.open(db) as store, store.writer() as w:
        w.submit(FetchRecord("http://shop.example/", DAY, PageType.HTML, 200, _md5("home"),
                             children=(DOC,)))
        w.submit(FetchRecord(DOC, DAY + 60, PageType.XML, 200, _md5("<c/>")))
        w.submit(XmlVersion(DOC, _md5("<c/>"), _md5("c14n"), DAY + 60, 4, "aa/1", True,
                            dtd_url=DTD))
        w.submit(FetchRecord(DTD, DAY + 50, PageType.DTD, 200, _md5("<!ELEMENT c EMPTY>")))
        w.submit(XmlVersion(DTD, _md5("<!ELEMENT c EMPTY>"), None, DAY + 50, 18, "aa/2", None))
        w.submit(FetchRecord("http://slow.example/x", DAY + 90, PageType.ERROR, None,
                             error_kind="timeout", error_detail="read deadline 30 s exceeded"))
        w.submit(JobRun("crawl", DAY, DAY + 600, "ok", "page budget reached"))
        w.submit(JobRun("rank", DAY + 700, DAY + 702.5, "ok", "1145 pages"))
        w.submit(SetState("crawl.last_run", json.dumps({**SNAPSHOT, "queued": 0})))
        w.submit(SetState("crawl.live", json.dumps({**SNAPSHOT, "updated_at": DAY + 900})))
        if planned:
            w.submit(JobRun("plan", DAY + 800, DAY + 800.5, "ok", "unit 20454: 2 planned"))
            w.submit(SetState("refresh.k", 1.329))
            w.submit(SetState("refresh.omega", 32.36))
            w.submit(SetState("refresh.prior_rate_per_unit", 0.26))


@pytest.fixture(params=[True, False], ids=["planned", "never-planned"])
def site(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, object]:
    db = tmp_path / "xyro.db"
    fill(db, planned=request.param)
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {db}\n  warehouse_dir: {tmp_path / 'w'}\n"
                      "refresh:\n  time_unit_s: 86400\n  bandwidth_pages_per_unit: 5000\n"
                      "  discovery_share: 0.2\n")
    return {"config": config, "planned": request.param}


def run(site: dict[str, object], *args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), env={"XYRO_CONFIG": str(site["config"])},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_json_keeps_its_keys_and_adds_decoded_sections(site: dict[str, object]) -> None:
    report = json.loads(run(site, "status", "--json").stdout)
    assert LEGACY_KEYS <= set(report)
    assert report["by_type"] == {"html": 1, "xml": 1, "dtd": 1, "error": 1}
    assert report["errors_by_kind"] == {"timeout": 1}
    assert report["retrying"] == 1   # the timeout: tried again later
    by_type = next(line for line in run(site, "status").stdout.splitlines()
                   if line.strip().startswith("by type"))
    assert by_type.endswith("error 1 · html 1 · xml 1 (1 error(s) to be tried again)"), by_type
    assert report["errors_last"]["timeout"]["url"] == "http://slow.example/x"
    assert report["warehouse"] == {"documents": 1, "dtds_and_entities": 1}
    assert report["last_crawl"]["pages"] == 12345 and report["last_crawl"]["queued"] == 0
    assert "crawl.last_run" not in report["state"]
    assert report["live_crawl"]["updated_at"] == DAY + 900
    assert all(isinstance(line, str) for line in report["last_job_runs"])
    rank = next(r for r in report["job_runs"] if r["name"] == "rank")
    assert rank["seconds"] == 2.5 and rank["started_iso"] == "2026-01-01T00:11:40Z"
    plan = report["refresh"]
    assert plan["bandwidth_pages_per_unit"] == 5000 and plan["unit_s"] == 86400
    assert plan["refresh_pages_per_unit"] == 4000 and plan["discovery_pages_per_unit"] == 1000
    if site["planned"]:
        assert (plan["k"], plan["omega"], plan["prior_rate_per_unit"]) == (1.329, 32.36, 0.26)
        assert plan["planned_at"] == "2026-01-01T00:13:20Z"
    else:
        assert plan["k"] is None and plan["omega"] is None and plan["planned_at"] is None


def test_text_has_labelled_sections_with_units(site: dict[str, object]) -> None:
    with CrawlLock(Path(str(site["config"])).with_name("xyro.db")):  # the daemon runs
        text = run(site, "status").stdout
    assert "{" not in text  # no raw JSON line left
    for needle in ("URLs: 4 known on 2 host(s)",
                   "1 document(s), 1 DTD(s) and entity file(s), 2 stored version(s)",
                   "live crawl of the daemon (2026-01-01T00:15:00Z, ",
                   "12,345 fetched in 5 min real (41.25 pages/s), 5.0 MiB",
                   "523 queued, 4 in flight, 9 host(s) with queued URLs",
                   "last finished crawl (ended 2026-01-01T00:10:00Z, ",
                   "refresh plan (unit ", "unit length 1 day",
                   "5,000 pages/unit: 4,000 refresh + 1,000 discovery (ρ = 20%)",
                   "timeout  1, last 2026-01-01T00:01:30Z http://slow.example/x: read deadline",
                   "rank   started 2026-01-01T00:11:40Z, ", "took 2.5 s, ok: 1145 pages"):
        assert needle in text, needle
    if site["planned"]:
        assert "K            1.329 (t_i = K/√(r_i·λ_i) in units" in text
        assert "predicted Ω  32.36 changes (importance-weighted" in text
        assert "0.26 changes/unit (0.26 changes/day)" in text
        assert "not computed yet" not in text
    else:
        assert "K            not computed yet (run `xyro plan --run`" in text
        assert "never planned" in text


def test_killed_crawlers_counters_are_marked_stale(site: dict[str, object]) -> None:
    """No crawler holds the database, yet ``crawl.live`` is there: a killed daemon's."""
    report = json.loads(run(site, "status", "--json").stdout)
    assert report["crawler_running"] is False
    text = run(site, "status").stdout
    assert "last counters of a crawler that is no longer running (published " in text
    assert "live crawl of the daemon" not in text


def test_render_status_times_are_relative_to_now() -> None:
    report = {"database": "x.db", "generated_at": "2026-01-01T00:00:12Z",
              "live_crawl": {"pages": 1234, "pages_per_s": 41.2, "elapsed_s": 30,
                             "updated_at": DAY},
              "refresh": {"unit": 20454, "unit_s": 3600.0}}
    text = render_status(report, DAY + 12)
    assert "live crawl of the daemon (2026-01-01T00:00:00Z, 12 s ago):" in text
    assert "1,234 fetched in 30 s real (41.2 pages/s)" in text
    assert "unit length 1 h" in text and "errors: none recorded" in text
    report["live_crawl"]["errors_by_kind"] = {"robots": 34}
    assert ("1,200 fetched in 30 s real (41.2 pages/s), -; 34 more refused by robots.txt, "
            "not fetched") in render_status(report, DAY + 12)
    report["live_crawl"].update(loader_pending=0, loader_cached=3,
                                loader_dtd_sources={"catalog": 41, "cache": 7, "web": 2})
    assert ("DTDs/entities  41 from XML catalogs, 7 from the cache, 2 fetched from the web"
            in render_status(report, DAY + 12))
    report["live_crawl"].pop("updated_at")
    assert "update time not recorded" in render_status(report, DAY)
    assert "live crawl: none published" in render_status({}, DAY)


def test_links_refused_are_counted_apart_from_failed_fetches() -> None:
    # An out-of-scope link is an `errors` row of kind refused, but no fetch failed: the
    # section must not read 3,472 errors where one fetch failed.
    report = {"errors_by_kind": {"refused": 3471, "timeout": 1},
              "errors_last": {"timeout": {"at": DAY, "url": "http://a.example/slow"}}}
    lines = render_status(report, DAY).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("errors:"))
    assert lines[start] == ("errors: 1 by kind; 3,471 links refused, not "
                            "fetched (count, newest):")
    assert lines[start + 1].split()[0] == "timeout" and lines[start + 2].split()[0] == "refused"


def test_generic_renderer_and_units() -> None:
    text = format_report({"pages": 1234567, "current_unit": 20782, "k": None,
                          "rate": 0.000123456, "by_type": {"html": 12000},
                          "top": [{"url": "u", "score": 3.5}], "empty": {}})
    assert text.splitlines() == ["pages: 1,234,567", "current_unit: 20782", "k: none",
                                 "rate: 0.0001235", "by_type:", "  html  12,000", "top:",
                                 "  url=u, score=3.5", "empty:", "  (none)"]
    assert [duration(s) for s in (0.25, 12, 90, 3600, 5400, 86400, 3 * 86400)] == [
        "0.2 s", "12 s", "1.5 min", "1 h", "1.5 h", "1 day", "3 days"]
    assert [number(v) for v in (12345, 214.77, 1234.5, float("inf"), None)] == [
        "12,345", "214.8", "1,234", "∞", "-"]


def test_status_of_a_fresh_database(tmp_path: Path) -> None:
    MetadataStore.open(tmp_path / "x.db").close()
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {tmp_path / 'x.db'}\n")
    text = run({"config": config}, "status").stdout
    assert "URLs: 0 known on 0 host(s)" in text and "job runs: none yet" in text
    assert "live crawl: none published" in text and "errors: none recorded" in text
    assert "K            not computed yet" in text


def test_status_shows_the_global_estimate_rounds(tmp_path: Path) -> None:
    db = tmp_path / "xyro.db"
    fill(db, planned=False)
    state = RoundState(round=3, rounds=50, local_pages=1200, budget=2400, spent=144,
                       pending=((7, "http://out.example/a"), (9, "http://out.example/b")),
                       estimate_change_l1=0.0812, updated_at=DAY + 100,
                       selector="sc_learned", out_degree="within")
    with MetadataStore.open(db) as store, store.writer() as w:
        w.submit(SetState(GLOBAL_KEY, state.to_json()))
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {db}\n  warehouse_dir: {tmp_path / 'w'}\n")
    site = {"config": config}
    report = json.loads(run(site, "status", "--json").output)
    assert report["global_estimate"]["spent"] == 144 and report["global_estimate"]["pending"] == 2
    assert GLOBAL_KEY not in report["state"]
    text = render_status(report, DAY + 160)
    assert "global PageRank estimate: round 3 of 50, updated 2026-01-01T00:01:40Z, 1 min ago" in text
    assert ("144 of a budget of 2,400 out-of-scope page(s) queued for their links; 2 of the "
            "last round not fetched yet") in text
    assert "0.0812 from local PageRank (L1" in text
    assert "selector sc_learned, out-degree within" in text
    report["global_estimate"].pop("selector")   # a state saved before selectors were kept
    assert "selector" not in render_status(report, DAY + 160)
    report["global_estimate"].update(budget=0, local_pages=40)
    assert "waiting for the scope to stop growing (40 in-scope" in render_status(report, DAY)
    report["global_estimate"].update(budget=80, finished=True)
    assert "global PageRank estimate: finished" in render_status(report, DAY)


def test_status_names_a_saved_round_state_it_cannot_read(tmp_path: Path) -> None:
    db = tmp_path / "xyro.db"
    fill(db, planned=False)
    with MetadataStore.open(db) as store, store.writer() as w:
        w.submit(SetState(GLOBAL_KEY, '{"round": 1, "bogus": 2}'))
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {db}\n  warehouse_dir: {tmp_path / 'w'}\n")
    result = run({"config": config}, "status")
    assert result.exit_code == 0, result.output
    assert ("global PageRank estimate: the saved state 'global_estimate.rounds' is not a "
            "round state this version of Xyro can read") in result.output
    assert "the daemon starts the rounds again" in result.output
    assert "waiting for the scope" not in result.output


def test_due_now_counts_in_the_unit_the_folders_were_filed_in(tmp_path: Path) -> None:
    """`xyro --demo status`, or a config whose time unit changed since the last planning:
    due_unit holds folder numbers of the planner's unit, not of the configured one."""
    import sqlite3
    import time

    db = tmp_path / "xyro.db"
    fill(db, planned=True)
    with MetadataStore.open(db) as store, store.writer() as w:
        w.submit(SetState("folders.unit_s", 600.0))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE urls SET due_unit = ? WHERE url = ?",
                 (int(time.time() // 600) - 1, DOC))
    conn.commit()
    conn.close()
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {db}\n  warehouse_dir: {tmp_path / 'w'}\n"
                      "refresh:\n  time_unit_s: 86400\n")
    site = {"config": config}
    plan = json.loads(run(site, "status", "--json").stdout)["refresh"]
    assert plan["due_now"] == 1 and plan["unit_s"] == 600 and plan["configured_unit_s"] == 86400
    assert abs(plan["unit"] - int(time.time() // 600)) <= 1  # a unit may end meanwhile
    text = run(site, "status").stdout
    assert "unit length 10 min" in text and "the configuration says 1 day" in text
    # The pages the plan already queued count too: their folders moved on when it did.
    with MetadataStore.open(db) as store, store.writer() as w:
        w.submit(Enqueue("http://site.example/queued.xml", 2, enqueued_at=1.0))
    text = run(site, "status").stdout
    assert "1 page(s) queued for refresh, 1 more in folders up to unit" in text, text
