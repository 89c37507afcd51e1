from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType
from metadata.schema import pack_children
from ranking.graph import LinkGraph

CNR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "cnr-2000-edges.npz"


def random_graph(seed: int, n: int, m: int, self_links: bool = True) -> LinkGraph:
    """Unique links, some dangling pages, some self-links, power-law-ish destinations."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = (rng.zipf(1.7, m) * 7919 + rng.integers(0, 3, m)) % n
    if self_links:
        dst[::9] = src[::9]
    pairs = np.unique(np.column_stack([src, dst]), axis=0)
    return LinkGraph.from_edges(pairs[:, 0], pairs[:, 1], n)


def sink_graph(seed: int, n: int = 2000, dangling: float = 0.5, self_only: float = 0.01
               ) -> LinkGraph:
    """A crawl-like graph where the paper variant is hard for Gauss-Seidel: a share of the
    pages without out-links (unread), a few pages whose only link is to themselves, the
    rest with 1 to 7 uniform out-links."""
    rng = np.random.default_rng(seed)
    kind = rng.random(n)
    linking = np.flatnonzero(kind >= dangling + self_only)
    lonely = np.flatnonzero((kind >= dangling) & (kind < dangling + self_only))
    degree = rng.integers(1, 8, len(linking))
    src = np.concatenate([np.repeat(linking, degree), lonely])
    dst = np.concatenate([rng.integers(0, n, int(degree.sum())), lonely])
    return LinkGraph.from_edges(src, dst, n)


def build_store(path: Path, n: int, m: int, seed: int, xml_share: float = 0.1) -> None:
    """A store of ``n`` pages (a tenth unread, without links) and about ``m`` links with
    power-law-ish destinations, written by direct inserts into the store's own schema."""
    MetadataStore.open(path).close()
    rng = np.random.default_rng(seed)
    draw = rng.random(n)
    types = np.where(draw < 0.1, "unread", np.where(draw < 0.1 + xml_share, "xml", "html"))
    fetched = np.flatnonzero(types != "unread")
    degree = rng.poisson(m / len(fetched), len(fetched))
    degree[::17] = 0  # fetched pages without links
    kids = (n * rng.random(int(degree.sum())) ** 2.5).astype(np.int64) + 1
    kids[::50] = np.repeat(fetched + 1, degree)[::50]  # some self-links
    cuts = np.concatenate([[0], np.cumsum(degree)])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO hosts (id, host) VALUES (1, 'h.example')")
    conn.executemany("INSERT INTO urls (id, hash, type, host_id, url) VALUES (?, ?, ?, 1, ?)",
                     ((i + 1, i, str(t), f"http://h.example/{i}") for i, t in enumerate(types)))
    conn.executemany("INSERT INTO links (src, n, children) VALUES (?, ?, ?)",
                     ((int(s) + 1, int(d), pack_children(kids[cuts[j]:cuts[j + 1]]))
                      for j, (s, d) in enumerate(zip(fetched, degree)) if d))
    conn.execute("COMMIT")
    conn.close()


def dense_m(graph: LinkGraph) -> np.ndarray:
    """M[i, j] = 1/OutDeg(j) when j -> i (003 eq. 2), dense."""
    n = graph.n
    m = np.zeros((n, n))
    inv = graph.inverse_out_degree()
    for j in range(n):
        for i in graph.indices[graph.indptr[j]:graph.indptr[j + 1]]:
            m[i, j] += inv[j]
    return m


@pytest.fixture(scope="session")
def cnr_graph() -> LinkGraph:
    if not CNR.exists():
        pytest.skip(f"LAW cnr-2000 edge list not found at {CNR}")
    with np.load(CNR) as z:
        return LinkGraph.from_edges(z["src"], z["dst"], int(z["n"]))


@pytest.fixture(scope="session")
def make_graph():
    return random_graph


@pytest.fixture(scope="session")
def make_sink_graph():
    return sink_graph


@pytest.fixture(scope="session")
def dense():
    return dense_m


def store_fetched_pages(db: Path, children: dict[str, tuple[str, ...]]) -> None:
    """A real store holding each URL of ``children`` as a fetched HTML page with those
    links (one second apart)."""
    with MetadataStore.open(db) as store:
        writer = store.writer()
        try:
            for k, (url, kids) in enumerate(children.items()):
                writer.submit(FetchRecord(url, 1_700_000_000.0 + k, PageType.HTML,
                                          http_status=200, signature=url.encode(),
                                          children=kids))
        finally:
            writer.close()


@pytest.fixture(scope="session")
def store_pages():
    return store_fetched_pages


@pytest.fixture(scope="session")
def make_store():
    return build_store
