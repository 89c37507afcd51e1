"""Metadata manager: the SQLite store of URLs, links, observations, versions and state.

Knows nothing of HTTP; imports neither ``ranking`` nor ``refresh`` (DESIGN.md §1).

Usage::

    with MetadataStore.open(path) as store:       # creates or migrates in place
        writer = store.writer()                   # THE writer thread
        writer.submit(FetchRecord(...))           # thread-safe, batched transactions
        writer.flush()
        graph = store.export_graph()              # CSR in URL-id order

Layout: :mod:`metadata.schema` (DDL, versions, migrations), :mod:`metadata.views`
(operator views), :mod:`metadata.records` (ops and shapes), :mod:`metadata.writer` and
:mod:`metadata.apply` (batched writes, group commit), :mod:`metadata.opqueue` (the writer's
bounded queue), :mod:`metadata.resolver` (URL ids: candidates by 64-bit hash, text compare,
writer cache), :mod:`metadata.idmap` (the in-memory hash → id map that finds URLs not
fetched yet: the hash index holds fetched pages only), :mod:`metadata.graph` (CSR export:
child lists are int32 BLOBs, one row per page, so the export is ``np.frombuffer`` over
their concatenation), :mod:`metadata.status` (``xyro status``).
"""

from metadata.connection import database_failure
from metadata.errors import MetadataError
from metadata.records import (
    MAX_CHILDREN, TYPE_CODES, ClearPending, Dequeue, Enqueue, FetchRecord, FoundSeed,
    FrontierRow, Graph, HostDelay, HostPause, JobRun, Op, PageType, SaveOpic, SetPending, SetRanks, SetRefresh, SetState, UnitSpent,
    XmlVersion,
)
from metadata.store import MetadataStore
from metadata.writer import Writer

__all__ = [
    "MAX_CHILDREN", "TYPE_CODES", "ClearPending", "Dequeue", "Enqueue", "FetchRecord",
    "FoundSeed", "FrontierRow", "Graph", "HostDelay", "HostPause", "JobRun", "MetadataError", "MetadataStore",
    "Op", "PageType", "database_failure",
    "SaveOpic", "SetPending", "SetRanks", "SetRefresh", "SetState", "UnitSpent", "Writer",
    "XmlVersion",
]
