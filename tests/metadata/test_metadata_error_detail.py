"""An error detail quotes what a server sent (a Content-Type, a parser's message): its control
characters are stored escaped, so a hostile escape sequence (``\\x1b[8m`` hides the rest of
a terminal's output) never reaches an operator's `xyro status`, sqlite3 or csv. Real SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from metadata import FetchRecord, MetadataStore, PageType


def test_control_characters_of_an_error_detail_are_stored_escaped(tmp_path: Path) -> None:
    with MetadataStore.open(tmp_path / "x.db") as store:
        writer = store.writer()
        writer.submit(FetchRecord(
            "http://a.example/p", 1_700_000_000.0, PageType.ERROR, 200, None,
            error_kind="content_type",
            error_detail="Content-Type application/x\x1b[8m\x1b[1a\x9b2K not accepted\x00"))
        writer.close()
    conn = sqlite3.connect(tmp_path / "x.db")
    try:
        (detail,), = conn.execute("SELECT detail FROM errors")
    finally:
        conn.close()
    assert detail == ("Content-Type application/x\\x1b[8m\\x1b[1a\\x9b2K not accepted\\x00")
