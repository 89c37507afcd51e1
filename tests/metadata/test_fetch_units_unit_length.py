"""The newest ``fetch_units`` row after ``refresh.time_unit_s`` changed: the unit that ran
last, whatever its number or start time in the other unit length (real SQLite files)."""

from __future__ import annotations

from metadata import MetadataStore, UnitSpent

SHORT, LONG = 60.0, 600.0
# The crawl ran in 60-s units up to 60,330 s (unit 1005, started at 60,300 s), then restarted
# with 600-s units at 60,340 s: unit 100, started at 60,000 s. The old rows have the larger
# numbers and the later starts; the 600-s unit ran last.
OLD_ENDED = UnitSpent(1004, SHORT, 50, 50, 40, 10, 0, 3, True, 60_300.0)
OLD_STOPPED = UnitSpent(1005, SHORT, 50, 20, 15, 5, 0, None, False, 60_330.0)
NEW = UnitSpent(100, LONG, 300, 120, 100, 20, 0, None, False, 60_400.0)


def _fill(store: MetadataStore) -> None:
    with store.writer() as w:
        for row in (OLD_ENDED, OLD_STOPPED, NEW):
            w.submit(row)


def test_the_newest_row_is_the_unit_written_last_not_the_largest_number(
        store: MetadataStore) -> None:
    _fill(store)
    assert store.fetch_units(3) == [NEW, OLD_STOPPED, OLD_ENDED]
    assert [u["unit"] for u in store.status()["fetch_units"]] == [100, 1005]
    assert store.status()["fetch_units"][0]["unit_s"] == LONG
    conn = store.read_connection()
    try:
        view = [unit for (unit,) in conn.execute("SELECT unit FROM v_fetch_units")]
    finally:
        conn.close()
    assert view == [100, 1005, 1004]


def test_a_unit_is_found_by_its_number_and_its_length(store: MetadataStore) -> None:
    _fill(store)
    assert store.fetch_unit(100, LONG) == NEW
    assert store.fetch_unit(1005, SHORT) == OLD_STOPPED
    assert store.fetch_unit(1005, LONG) is None  # the same number in 600-s units: no row
    assert store.fetch_unit(101, LONG) is None
