"""``xyro rank --compare`` through click's CliRunner: OPIC against the teleport PageRank of
the same graph (DESIGN.md §5 "OPIC"), on a generated edge list and on real databases.

The references here are independent of the code under test: networkx's PageRank (its
dangling mass goes along the personalization, i.e. the ``teleport`` variant) on the graph
read straight from the edge list or from the store's ``links`` table."""

from __future__ import annotations

import array
import http.server
import json
import sqlite3
import threading
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner, Result

from metadata import MetadataStore, SaveOpic
from ranking.graph import LinkGraph
from ranking.opic import OpicParams, OpicState
from ranking.opic_select import visit_greedy
from xyro.app import App
from xyro.cli import cli
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.crawl.opic_online import OnlineOpic
from xyro.service.crawl_run import run_crawl

C = 0.85
EdgeFile = tuple[Path, int, np.ndarray, np.ndarray]  # (path, n, src, dst)


def _config(tmp_path: Path, db: Path) -> Path:
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage: {{database: '{db}', warehouse_dir: '{tmp_path / 'w'}'}}\n")
    return config


def _run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["-c", str(config), *args])


def _json(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def _networkx_pagerank(nodes: list, edges: list[tuple]) -> dict:
    g = nx.MultiDiGraph()  # parallel links count once each, as in LinkGraph
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return nx.pagerank(g, alpha=C, tol=1e-13, max_iter=1000)


def _l1(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a / a.sum() - b / b.sum()).sum())


# ---- edge-list mode ------------------------------------------------------------------------

@pytest.fixture
def edge_file(tmp_path: Path) -> EdgeFile:
    """A strongly connected graph (a ring plus power-law-ish links, self-links, a page
    linked twice) of 600 pages, as a bare .npz edge list."""
    rng = np.random.default_rng(7)
    n, m = 600, 3000
    src = np.concatenate([np.arange(n), rng.integers(0, n, m)])
    dst = np.concatenate([(np.arange(n) + 1) % n, (rng.zipf(1.8, m) * 131) % n])
    path = tmp_path / "graph.npz"
    np.savez(path, n=np.int64(n), src=src.astype(np.int32), dst=dst.astype(np.int32))
    return path, n, src, dst


def test_edges_opic_after_ten_reads_is_within_a_few_percent(tmp_path: Path,
                                                            edge_file: EdgeFile) -> None:
    path, n, src, dst = edge_file
    result = _run(_config(tmp_path, tmp_path / "x.db"), "rank", "--compare", "--edges",
                  str(path), "--json")
    report = _json(result)
    assert report["mode"] == "edges" and report["pages"] == n and report["links"] == len(src)
    assert report["reads"] == 10 and report["visits"] == 10 * n
    assert report["damping"] == C and report["selection"] == "greedy"
    inflow, papers = report["inflow"], report["papers"]
    assert inflow["pages"] == papers["pages"] == n
    assert inflow["l1"] < 0.03                      # "within a few %" after 10 reads
    assert papers["l1"] > inflow["l1"]               # the inflow estimate converges faster
    assert inflow["top_k"] == 100 and inflow["top_k_overlap"] >= 0.9
    assert inflow["kendall_tau"] > 0.8 and not inflow["kendall_tau_sampled"]
    assert inflow["mean_relative_error"] < 0.1
    # the same figures from an independent reference: the same OPIC run (deterministic)
    # against networkx's PageRank of the edge list
    pr = _networkx_pagerank(list(range(n)), list(zip(src.tolist(), dst.tolist())))
    reference = np.array([pr[i] for i in range(n)])
    state = OpicState.create(n, OpicParams(damping=C))
    graph = LinkGraph.from_edges(src, dst, n)
    for _ in range(10):
        visit_greedy(state, graph, n)
    assert inflow["l1"] == pytest.approx(_l1(state.estimate("inflow"), reference), abs=1e-6)
    assert papers["l1"] == pytest.approx(_l1(state.estimate("papers"), reference), abs=1e-6)
    # progress, one line per read, on stderr only
    assert "OPIC read 10/10" in result.stderr and "OPIC read" not in result.stdout


def test_edges_text_output_and_reads(tmp_path: Path, edge_file: EdgeFile) -> None:
    path, n, _src, _dst = edge_file
    config = _config(tmp_path, tmp_path / "x.db")
    result = _run(config, "rank", "--compare", "--edges", str(path), "--reads", "2")
    assert result.exit_code == 0, result.output
    assert "visits: 1,200" in result.stdout and "inflow:" in result.stdout
    assert "top_k_overlap" in result.stdout and "OPIC read 2/2" in result.stderr
    two = _json(_run(config, "rank", "--compare", "--edges", str(path), "--reads", "2",
                     "--json"))
    ten = _json(_run(config, "rank", "--compare", "--edges", str(path), "--json"))
    assert two["inflow"]["l1"] > ten["inflow"]["l1"]


def test_reads_without_compare_edges_is_a_usage_error(tmp_path: Path,
                                                     edge_file: EdgeFile) -> None:
    config = _config(tmp_path, tmp_path / "x.db")
    for args in (["--reads", "3"], ["--compare", "--reads", "3"],
                 ["--edges", str(edge_file[0]), "--reads", "3"]):
        result = _run(config, "rank", *args)
        assert result.exit_code == 2, result.output
        assert "--reads" in result.stderr and "--compare" in result.stderr


def test_rank_edges_without_compare_is_unchanged(tmp_path: Path, edge_file: EdgeFile) -> None:
    report = _json(_run(_config(tmp_path, tmp_path / "x.db"), "rank", "--edges",
                        str(edge_file[0]), "--top", "3", "--json"))
    assert report["pages"] == edge_file[1] and len(report["top_importance"]) == 3
    values = [value for _, value in report["top_importance"]]
    assert values == sorted(values, reverse=True)   # best first, as printed
    assert "inflow" not in report


def test_bad_edge_file_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an archive")
    result = _run(_config(tmp_path, tmp_path / "x.db"), "rank", "--compare", "--edges",
                  str(bad))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot compare") and "n, src, dst" in result.stderr


# ---- database mode: a real crawl -----------------------------------------------------------

SITE_PAGES = 15


def _site() -> dict[str, bytes]:
    """Page i links to i+1, 2i and 3i (mod 15): a strongly connected little site."""
    pages = {}
    for i in range(SITE_PAGES):
        links = "".join(f'<a href="/p{j % SITE_PAGES}.html">x</a>' for j in (i + 1, 2 * i, 3 * i))
        pages[f"/p{i}.html"] = f"<html><body>{links}</body></html>".encode()
    pages["/robots.txt"] = b"User-agent: *\nDisallow:\n"
    return pages


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    pages = _site()

    def do_GET(self) -> None:  # noqa: N802
        body = self.pages.get(self.path)
        self.send_response(404 if body is None else 200)
        ctype = "text/plain" if self.path.endswith(".txt") else "text/html"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(config, database) after one real crawl with OPIC on (the default)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    site = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = tmp_path_factory.mktemp("opic_crawl")
    db = tmp / "xyro.db"
    overrides = [f"seeds={json.dumps([site + '/p0.html'])}",
                 "scope.allow_private_addresses=true", "crawler.politeness.delay_s=0",
                 "crawler.workers=2", "loader.catalogs=[]", f"storage.database={db}",
                 f"storage.warehouse_dir={tmp / 'w'}"]
    app = App(load_config(None, {}, overrides), WallClock())
    with app.open_store(create=True):
        pass
    try:
        run_crawl(app, max_pages=SITE_PAGES + 5, max_seconds=60)
    finally:
        server.shutdown()
        server.server_close()
    return _config(tmp, db), db


def test_database_compare_after_a_real_crawl(crawled: tuple[Path, Path]) -> None:
    config, db = crawled
    with MetadataStore.open(db, read_only=True) as store:
        stored = store.opic_checkpoint()
    assert stored is not None, "the crawl wrote no OPIC checkpoint"
    urls, inflow = OnlineOpic.from_checkpoint(stored[3]).estimates()
    _urls, papers = OnlineOpic.from_checkpoint(stored[3], estimate="papers").estimates()
    result = _run(config, "rank", "--compare", "--json")
    report = _json(result)
    assert report["mode"] == "database" and report["database"] == str(db)
    assert report["opic_pages"] == len(urls) == SITE_PAGES
    assert report["compared_pages"] == SITE_PAGES and report["opic_pages_not_in_graph"] == 0
    assert report["opic_unread_pages"] == 0 and report["opic_reads_per_page"] == 1.0
    assert report["estimate"] == "inflow" and report["damping"] == report["opic_damping"] == C
    assert "notes" not in report and "sweep" in result.stderr
    # independent reference: networkx PageRank of the links table over every stored URL,
    # restricted to OPIC's pages by URL text
    conn = sqlite3.connect(db)
    try:
        url_of = dict(conn.execute("SELECT id, url FROM urls"))
        edges = [(src, dst) for src, blob in conn.execute("SELECT src, children FROM links")
                 for dst in array.array("i", blob)]
    finally:
        conn.close()
    pr = _networkx_pagerank(list(url_of), edges)
    by_url = {url_of[i]: v for i, v in pr.items()}
    reference = np.array([by_url[u] for u in urls])
    for kind, values in (("inflow", inflow), ("papers", papers)):
        got = report[kind]
        assert got["pages"] == SITE_PAGES
        assert got["l1"] == pytest.approx(_l1(values, reference), abs=1e-6), kind
        assert 0.0 <= got["top_k_overlap"] <= 1.0 and got["top_k"] == SITE_PAGES
    text = _run(config, "rank", "--compare")
    assert text.exit_code == 0 and "compared_pages: 15" in text.stdout


# ---- database mode: a checkpoint of an OPIC driven by hand ---------------------------------

def _save(db: Path, opic: OnlineOpic) -> None:
    cp = opic.checkpoint()
    with MetadataStore.open(db) as store:
        writer = store.writer()
        try:
            writer.submit(SaveOpic(written_at=1_700_001_000.0, clock=cp.clock, data=cp.data,
                                   urls=cp.urls, cash=cp.cash, history=cp.history,
                                   estimate=cp.estimate))
        finally:
            writer.close()


@pytest.fixture
def hand_driven(tmp_path: Path, store_pages) -> tuple[Path, Path]:  # noqa: ANN001
    """40 stored pages (a ring plus 4 seeded random links each; page 5 also links two pages
    never fetched) and an OPIC checkpoint after 100 Greedy reads per page. OPIC's fixpoint
    needs every page read again and again (000 §3, fairness): the two unread pages are
    visited too, with no known children (all their cash to V), which is what the teleport
    PageRank does with their mass."""
    n = 40
    url = "http://h.example/{}".format
    rng = np.random.default_rng(2)
    children = {url(i): (url((i + 1) % n),) + tuple(url(int(j)) for j in
                                                    rng.choice(n, 4, replace=False))
                for i in range(n)}
    children[url(5)] += (url("unread-a"), url("unread-b"))
    db = tmp_path / "xyro.db"
    store_pages(db, children)
    known = {**children, url("unread-a"): (), url("unread-b"): ()}
    opic = OnlineOpic(OpicParams(damping=C))
    for u in children:
        opic.visit(u, children[u])
    for _ in range(100 * len(known)):
        page = max(known, key=opic.cash)  # Greedy: the page with the most cash
        opic.visit(page, known[page])
    _save(db, opic)
    return _config(tmp_path, db), db


def test_database_compare_converged_opic(hand_driven: tuple[Path, Path]) -> None:
    config, _db = hand_driven
    report = _json(_run(config, "rank", "--compare", "--json"))
    assert report["opic_pages"] == 42 and report["graph_pages"] == 42
    assert report["compared_pages"] == 42 and report["graph_pages_not_in_opic"] == 0
    assert report["opic_unread_pages"] == 0
    assert report["opic_reads_per_page"] == pytest.approx((40 + 100 * 42) / 42, abs=1e-3)
    assert report["inflow"]["l1"] < 0.015 and report["inflow"]["top_k_overlap"] == 1.0
    assert report["inflow"]["kendall_tau"] > 0.9
    # the crawl's OPIC gives new pages no cash of their own (it comes from V), so there
    # is no endowment to subtract: both estimates are the same
    assert report["papers"]["l1"] == pytest.approx(report["inflow"]["l1"])


def test_database_compare_notes_a_damping_mismatch(hand_driven: tuple[Path, Path]) -> None:
    config, _db = hand_driven
    report = _json(_run(config, "-s", "ranking.damping=0.5", "rank", "--compare", "--json"))
    assert report["damping"] == 0.5 and report["opic_damping"] == C
    assert any("--set ranking.damping=0.85" in note for note in report["notes"])
    assert report["inflow"]["l1"] > 0.05  # the wrong fixpoint is visibly off


def test_database_without_checkpoint_is_a_clear_error(tmp_path: Path,
                                                       store_pages) -> None:  # noqa: ANN001
    db = tmp_path / "xyro.db"
    store_pages(db, {"http://h.example/a": ("http://h.example/b",)})
    result = _run(_config(tmp_path, db), "rank", "--compare")
    assert result.exit_code == 1 and result.stdout == ""
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and str(db) in message
    assert "no OPIC checkpoint" in message and "ranking.opic.enabled true" in message


def test_database_compare_out_of_core_gives_the_same_figures(
        hand_driven: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    config, _db = hand_driven
    in_memory = _json(_run(config, "rank", "--compare", "--json"))
    monkeypatch.setattr("xyro.jobs.opic_compare.fits_in_memory", lambda n, m, budget: False)
    sliced = _json(_run(config, "rank", "--compare", "--json"))
    assert sliced["compared_pages"] == in_memory["compared_pages"] == 42
    assert sliced["inflow"]["l1"] == pytest.approx(in_memory["inflow"]["l1"], abs=1e-6)


@pytest.mark.parametrize("arrays, words", [
    ({"n": np.array([3, 4])}, "n must be one whole number"),
    ({"n": np.array(3.5)}, "n must be one whole number"),
    ({"n": np.array(-1)}, "n must be one whole number"),
    ({"n": np.array(3), "xml": np.array([True])}, "xml must hold one flag per page (3)"),
    # Converted to bool, "false" and NaN were True: every page silently XML.
    ({"n": np.array(3), "xml": np.array(["false", "false", "true"])}, "xml must be booleans"),
    ({"n": np.array(3), "xml": np.array([np.nan, 0.0, 1.0])}, "xml must be booleans"),
], ids=["n-vector", "n-float", "n-negative", "xml-length", "xml-strings", "xml-floats"])
def test_malformed_edge_arrays_are_one_error_line(tmp_path: Path, arrays: dict,
                                                  words: str) -> None:
    path = tmp_path / "odd.npz"
    np.savez(path, src=np.array([0, 1, 2]), dst=np.array([1, 2, 0]), **arrays)
    result = _run(_config(tmp_path, tmp_path / "x.db"), "rank", "--edges", str(path))
    assert result.exit_code == 1, result.output
    assert words in result.stderr and "Traceback" not in result.stderr


def test_an_edge_file_too_large_for_memory_is_one_error_line(tmp_path: Path) -> None:
    # Refused before any array of n entries is made: 3e9 pages in a 756-byte file took
    # 23 GB before the page-id limit was checked, and the machine's OOM killer struck.
    path = tmp_path / "huge.npz"
    np.savez(path, n=np.array(3 * 10**9), src=np.array([0]), dst=np.array([1]))
    result = _run(_config(tmp_path, tmp_path / "x.db"), "rank", "--edges", str(path))
    assert result.exit_code == 1, result.output
    assert "more than the 2147483647 a graph may hold" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_edge_file_whose_members_are_not_arrays_is_one_error_line(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "junk.npz"
    with zipfile.ZipFile(path, "w") as z:
        for name in ("n", "src", "dst"):
            z.writestr(f"{name}.npy", b"not numpy at all")
    result = _run(_config(tmp_path, tmp_path / "x.db"), "rank", "--edges", str(path))
    assert result.exit_code == 1, result.output
    assert "n is not a numpy array" in result.stderr and "Traceback" not in result.stderr
