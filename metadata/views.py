"""Inspection views for operators (``sqlite3 xyro.db 'SELECT * FROM v_pages_by_type'``).

Times in the tables are POSIX seconds on the crawler's clock line; the views show them as
UTC text with ``datetime(x, 'unixepoch')``. Rates are changes per day. The views are
dropped and recreated when a writer opens a store whose views differ from these (after a
migration, or a new Xyro with the same schema), so their SQL can change between versions.

v_pages_by_type     pages per type, with fetched and never-fetched counts ('refused': link
                    targets the frontier's admission refused, never fetched; their reasons
                    are in errors rows of kind 'refused')
v_frontier          persisted frontier size per priority (0 = most urgent)
v_xml_documents     one row per XML document: versions, latest version, validity, DTD (not
                    the DTD and entity files, whose versions carry no c14n signature:
                    metadata.status.ENTITY_VERSION; ``xyro documents --dtds`` lists them)
v_xml_versions      every stored XML version, newest first, of a document or of a DTD or
                    entity file (``kind``)
v_due_per_unit      pages waiting in each refresh folder (time unit)
v_top_importance    pages by direct importance (PageRank × N, mean 1), highest first
v_top_interest      pages by interest (inverse rank, mean 1), highest first
v_opic              pages by OPIC estimate (their share of importance, summing to 1, as
                    of the crawl's last OPIC checkpoint), with cash and history
v_change_rates      estimated change rate λ, its source, and the observations behind it
v_hosts             hosts with URL, fetch and error counts
v_recent_errors     errors grouped by kind: count, last time, last URL and detail
v_job_runs          periodic job runs, newest first
v_fetch_units       the crawl bandwidth per refresh time unit, newest first: the budget G,
                    page fetches spent against it by level, what was left unspent, and the
                    due pages carried over to the next unit (a unit whose time has
                    passed and no run closed, as after a kill -9: "stopped in it, never
                    closed", by the wall clock)
"""

from __future__ import annotations

#: The order of ``fetch_units`` rows, newest first: by the time each row was last written.
#: Not by unit number, nor by start time (unit × unit_s): after ``refresh.time_unit_s``
#: changes, a row of the old length can have a larger number (a shorter unit) or a later
#: start (the last short unit inside the first long one) than the unit running now.
NEWEST_UNIT_FIRST = "updated_at DESC, unit * unit_s DESC"

VIEWS: dict[str, str] = {
    "v_pages_by_type": """
        SELECT type, count(*) AS pages, sum(accesses > 0) AS fetched,
               sum(accesses) AS accesses, sum(changes) AS changes
        FROM urls GROUP BY type ORDER BY pages DESC""",
    "v_frontier": """
        SELECT priority, count(*) AS queued,
               datetime(min(enqueued_at), 'unixepoch') AS oldest_enqueued
        FROM frontier GROUP BY priority ORDER BY priority""",
    "v_xml_documents": """
        SELECT u.id, u.url, count(v.id) AS versions,
               datetime(max(v.fetched_at), 'unixepoch') AS latest,
               (SELECT hex(x.md5) FROM xml_versions x WHERE x.url_id = u.id
                ORDER BY x.fetched_at DESC LIMIT 1) AS latest_md5,
               (SELECT x.valid FROM xml_versions x WHERE x.url_id = u.id
                ORDER BY x.fetched_at DESC LIMIT 1) AS latest_valid,
               (SELECT x.dtd_url FROM xml_versions x WHERE x.url_id = u.id
                ORDER BY x.fetched_at DESC LIMIT 1) AS dtd_url
        FROM urls u JOIN xml_versions v ON v.url_id = u.id
        GROUP BY u.id
        HAVING (SELECT x.c14n_signature IS NOT NULL FROM xml_versions x WHERE x.url_id = u.id
                ORDER BY x.fetched_at DESC LIMIT 1)""",
    "v_xml_versions": """
        SELECT u.url, datetime(v.fetched_at, 'unixepoch') AS fetched,
               CASE WHEN v.c14n_signature IS NULL THEN 'dtd_or_entity' ELSE 'document' END
                   AS kind,
               hex(v.md5) AS md5, v.size, v.storage_key, v.valid, v.validation_error,
               v.dtd_url, v.schema_url
        FROM xml_versions v JOIN urls u ON u.id = v.url_id
        ORDER BY v.fetched_at DESC""",
    "v_due_per_unit": """
        SELECT due_unit, count(*) AS pages
        FROM urls WHERE due_unit IS NOT NULL GROUP BY due_unit ORDER BY due_unit""",
    "v_top_importance": """
        SELECT id, url, type, importance
        FROM urls WHERE importance IS NOT NULL ORDER BY importance DESC""",
    "v_top_interest": """
        SELECT id, url, type, interest
        FROM urls WHERE interest IS NOT NULL ORDER BY interest DESC""",
    "v_opic": """
        SELECT id, url, type, opic_estimate AS estimate, opic_estimate * (SELECT pages
               FROM opic_checkpoint) AS estimate_x_n, opic_cash AS cash,
               opic_history AS history
        FROM urls WHERE opic_estimate IS NOT NULL ORDER BY opic_estimate DESC""",
    "v_change_rates": """
        SELECT u.id, u.url, u.rate * 86400.0 AS changes_per_day, u.rate_source,
               (SELECT count(*) FROM observations o WHERE o.url_id = u.id) AS observations,
               u.accesses, u.changes, u.interval_units, u.due_unit
        FROM urls u WHERE u.rate IS NOT NULL ORDER BY u.rate DESC""",
    "v_hosts": """
        SELECT h.host, coalesce(c.urls, 0) AS urls,
               h.fetches, h.errors, datetime(h.last_fetch, 'unixepoch') AS last_fetch
        FROM hosts h LEFT JOIN (SELECT host_id, count(*) AS urls FROM urls GROUP BY host_id)
             c ON c.host_id = h.id
        ORDER BY h.fetches DESC""",
    "v_recent_errors": """
        SELECT e.kind, count(*) AS errors, datetime(max(e.at), 'unixepoch') AS last_at,
               (SELECT u.url FROM errors e2 JOIN urls u ON u.id = e2.url_id
                WHERE e2.kind = e.kind ORDER BY e2.at DESC LIMIT 1) AS last_url,
               (SELECT e3.detail FROM errors e3
                WHERE e3.kind = e.kind ORDER BY e3.at DESC LIMIT 1) AS last_detail
        FROM errors e GROUP BY e.kind ORDER BY max(e.at) DESC""",
    "v_job_runs": """
        SELECT name, datetime(started, 'unixepoch') AS started,
               round(finished - started, 3) AS seconds, status, detail
        FROM job_runs ORDER BY started DESC""",
    "v_fetch_units": """
        SELECT unit, datetime(unit * unit_s, 'unixepoch') AS starts, bandwidth, fetched,
               bandwidth - fetched AS unspent, refresh, discovery, urgent, carried_over,
               CASE WHEN ended THEN 'ended'
                    WHEN (unit + 1) * unit_s <= CAST(strftime('%s', 'now') AS REAL)
                    THEN 'stopped in it, never closed'
                    ELSE 'running or stopped in it' END AS state
        FROM fetch_units ORDER BY """ + NEWEST_UNIT_FIRST,
}
