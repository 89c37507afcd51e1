"""``xyro rank --global-estimate`` through click's CliRunner, on a bare edge list (measured
against networkx's global PageRank of the same 0/1 graph) and on a real database whose
scope keeps one of two hosts."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner, Result

from xyro.cli import cli

C = 0.85


def _config(tmp_path: Path, db: Path, extra: str = "") -> Path:
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage: {{database: '{db}', warehouse_dir: '{tmp_path / 'w'}'}}\n"
                      + extra)
    return config


def _run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["-c", str(config), "rank", *args])


@pytest.fixture
def edge_file(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """600 pages in 6 sites of 100 ids; 80 % of the links stay in their site; a self-link
    and a duplicate link that the paper's 0/1 graph drops."""
    rng = np.random.default_rng(11)
    n, m = 600, 4000
    src = rng.integers(0, n, m)
    dst = np.where(rng.random(m) < 0.8, (src // 100) * 100 + rng.integers(0, 100, m),
                   rng.integers(0, n, m))
    src, dst = np.append(src, [5, 7]), np.append(dst, [5, dst[0]])
    path = tmp_path / "graph.npz"
    np.savez(path, n=np.int64(n), src=src.astype(np.int32), dst=dst.astype(np.int32))
    return path, src, dst


def _pagerank(nodes: range, edges: set[tuple[int, int]]) -> np.ndarray:
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    pr = nx.pagerank(g, alpha=C, tol=1e-14, max_iter=2000)
    return np.array([pr[i] for i in nodes])


def test_edges_mode_reports_errors_against_the_global_pagerank(
        tmp_path: Path, edge_file: tuple[Path, np.ndarray, np.ndarray]) -> None:
    path, src, dst = edge_file
    result = _run(_config(tmp_path, tmp_path / "x.db"), "--global-estimate", "--edges",
                  str(path), "--local", "200:300", "--rounds", "10", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    edges = {(int(a), int(b)) for a, b in zip(src, dst) if a != b}
    truth = _pagerank(range(600), edges)[200:300]
    local = _pagerank(range(200, 300), {(a, b) for a, b in edges
                                        if 200 <= a < 300 and 200 <= b < 300})
    expected_local_l1 = float(np.abs(local / local.sum() - truth / truth.sum()).sum())
    assert report["local_pr"]["l1"] == pytest.approx(expected_local_l1, abs=1e-7)
    assert report["links"] == len(edges)
    assert (report["local_pages"], report["extra_pages"], report["rounds"]) == (100, 200, 10)
    assert report["estimate"]["l1"] < report["local_pr"]["l1"]
    assert report["gain_l1"] == pytest.approx(report["local_pr"]["l1"]
                                              / report["estimate"]["l1"])
    assert set(report["estimate_after_n_extra"]) == {"l1", "linf", "kendall_tau"}
    assert len(report["top_pages"]) == 10
    text = _run(_config(tmp_path, tmp_path / "x.db"), "--global-estimate", "--edges",
                str(path), "--local", "200:300", "--selector", "pf", "--extra", "1",
                "--out-degree", "all")
    assert text.exit_code == 0 and "extra_pages: 100" in text.stdout
    learned = _run(_config(tmp_path, tmp_path / "x.db"), "--global-estimate", "--edges",
                   str(path), "--local", "200:300", "--selector", "sc_learned", "--json")
    assert learned.exit_code == 0, learned.output
    assert json.loads(learned.stdout)["selector"] == "sc_learned"


def test_the_config_section_sets_the_defaults_and_flags_override_it(
        tmp_path: Path, edge_file: tuple[Path, np.ndarray, np.ndarray]) -> None:
    """No flag: ``ranking.global_estimate``'s selector, budget, rounds and out-degree (the
    daemon's), so the report shows what the daemon would do; a flag wins over the config."""
    path = str(edge_file[0])
    default = _run(_config(tmp_path, tmp_path / "x.db"), "--global-estimate", "--edges",
                   path, "--local", "200:300", "--json")
    assert default.exit_code == 0, default.output
    report = json.loads(default.stdout)
    assert (report["selector"], report["extra_pages"], report["rounds"]) == \
        ("sc_learned", 200, 50)
    section = ("ranking: {global_estimate: {selector: pf, extra_pages_per_local_page: 0.5,"
               " rounds: 5, out_degree: all}}\n")
    config = _config(tmp_path, tmp_path / "x.db", section)
    configured = json.loads(_run(config, "--global-estimate", "--edges", path, "--local",
                                 "200:300", "--json").stdout)
    assert (configured["selector"], configured["extra_pages"], configured["rounds"],
            configured["out_degree"]) == ("pf", 50, 5, "all")
    flagged = json.loads(_run(config, "--global-estimate", "--edges", path, "--local",
                              "200:300", "--selector", "random", "--rounds", "4",
                              "--json").stdout)
    assert (flagged["selector"], flagged["extra_pages"], flagged["rounds"]) == \
        ("random", 50, 4)


@pytest.mark.parametrize(("args", "message"), [
    (["--global-estimate", "--local", "1:x"], "--local: '1:x' is not a range START:STOP"),
    (["--global-estimate", "--local", "9:3"], "START must be below STOP"),
    (["--global-estimate", "--local", "0:601"], "reaches past the graph's 600 pages"),
    (["--global-estimate", "--local", "0:10", "--compare"], "two different reports"),
    (["--local", "0:10"], "add --global-estimate or drop them"),
    (["--global-estimate"], "needs --local START:STOP"),
    (["--global-estimate", "--local", "0:10", "--extra", "0"], "--extra"),
    # The config's bound, not a memory error blamed on the graph's size.
    (["--global-estimate", "--local", "0:10", "--rounds", "1000000000000"],
     "1000000000000 is not in the range 1<=x<=10000"),
    (["--global-estimate", "--local", "0:10", "--cluster", "tcp://127.0.0.1:9"],
     "--global-estimate runs on this host"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path: Path, edge_file: tuple[Path, ...],
                                            args: list[str], message: str) -> None:
    result = _run(_config(tmp_path, tmp_path / "x.db"), "--edges", str(edge_file[0]), *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_missing_edge_file_exits_2(tmp_path: Path) -> None:
    result = _run(_config(tmp_path, tmp_path / "x.db"), "--global-estimate", "--edges",
                  str(tmp_path / "nope.npz"), "--local", "0:5")
    assert result.exit_code == 2 and "does not exist" in result.output


@pytest.mark.parametrize("selector", ["sc", "sc_learned"])
def test_database_mode_computes_what_the_store_allows(tmp_path: Path, store_pages,  # noqa: ANN001
                                                      selector: str) -> None:
    """Scope: a.example. Stored: 30 pages of a.example and 3 of b.example (fetched before the
    scope narrowed); b.example/10.. are only linked, and a.example/99 is in scope, unread."""
    a, b = "http://a.example/{}".format, "http://b.example/{}".format
    rng = np.random.default_rng(3)
    fetched = {a(i): tuple(a(int(j)) for j in rng.choice(30, 3, replace=False))
               + (b(i % 12),) for i in range(30)}
    fetched[a(0)] += (a(99),)
    fetched.update({b(i): (a(i), b(i + 20)) for i in range(3)})
    db = tmp_path / "xyro.db"
    store_pages(db, fetched)
    config = _config(tmp_path, db, "scope: {allowed_domains: [a.example]}\n")
    result = _run(config, "--global-estimate", "--rounds", "20", "--selector", selector,
                  "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["selector"] == selector and report["local_pages"] == 30
    assert report["stored_out_of_scope_pages_with_links"] == 3
    # frontier outside the scope: b/3..b/11 and b/20..b/22; inside: a/99
    assert report["frontier_out_of_scope_pages"] == 12
    assert report["frontier_in_scope_unread_pages"] == 1
    assert report["budget_extra_pages"] == 60 and report["rounds"] == 20
    chosen = [p["url"] for p in report["next_pages"]]
    assert len(chosen) == 3 and all(u.startswith("http://b.example/") for u in chosen)
    assert not set(chosen) & {b(0), b(1), b(2)}
    assert report["estimate_change_from_local_pr_l1"] > 0
    assert all(p["url"].startswith("http://a.example/") for p in report["top_pages"])


def test_database_mode_without_in_scope_pages_is_a_clear_error(
        tmp_path: Path, store_pages) -> None:  # noqa: ANN001
    db = tmp_path / "xyro.db"
    store_pages(db, {"http://b.example/0": ("http://b.example/1",)})
    result = _run(_config(tmp_path, db, "scope: {allowed_domains: [a.example]}\n"),
                  "--global-estimate")
    assert result.exit_code == 1
    assert "holds no fetched page inside the configured scope" in result.output


def test_an_exact_estimate_is_strict_json(tmp_path: Path) -> None:
    """A domain that is the whole graph: local PageRank is already global, the L1 errors are
    0, and the report stays valid JSON (no bare Infinity for the gain)."""
    path = tmp_path / "ring.npz"
    np.savez(path, n=np.array(4), src=np.array([0, 1, 2, 3]), dst=np.array([1, 2, 3, 0]))
    result = _run(_config(tmp_path, tmp_path / "x.db"), "--global-estimate", "--edges",
                  str(path), "--local", "0:4", "--json")
    assert result.exit_code == 0, result.output

    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not JSON")

    report = json.loads(result.stdout, parse_constant=refuse)
    assert report["local_pr"]["l1"] == pytest.approx(0, abs=1e-12)
    assert report["gain_l1"] is None


def _damaged(path: Path, compressed: bool) -> Path:
    """An edge list whose zip directory reads but whose arrays do not: one byte of the
    stored src array flipped (a bad CRC), or the compressed stream broken."""
    n, src, dst = np.int64(50), np.arange(50) % 7, np.arange(50) % 11
    (np.savez_compressed if compressed else np.savez)(path, n=n, src=src, dst=dst)
    data = bytearray(path.read_bytes())
    at = data.index(b"src.npy") + 200 if not compressed else data.index(b"src.npy") + 60
    for k in range(at, at + (1 if not compressed else 60)):
        data[k] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("mode", [[], ["--global-estimate", "--local", "0:5"]])
def test_a_damaged_edge_file_is_a_clear_error(tmp_path: Path, compressed: bool,
                                              mode: list[str]) -> None:
    edges = _damaged(tmp_path / "damaged.npz", compressed)
    result = _run(_config(tmp_path, tmp_path / "x.db"), "--edges", str(edges), *mode)
    assert result.exit_code == 1, result.output
    assert "is not a readable .npz edge list" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_an_edge_file_too_large_for_memory_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "huge.npz"
    np.savez(path, n=np.int64(2 ** 40), src=np.array([0]), dst=np.array([1]))
    result = _run(_config(tmp_path, tmp_path / "x.db"), "--global-estimate", "--edges",
                  str(path), "--local", "0:5")
    assert result.exit_code == 1, result.output
    assert "more than the 2147483647 a graph may hold" in result.output   # nothing allocated
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_database_mode_lists_no_page_the_crawler_would_refuse(tmp_path: Path,
                                                              store_pages) -> None:  # noqa: ANN001
    # Every in-scope page links the same out-of-scope .pdf (skipped by suffix): the best
    # candidate by far, which the daemon's round would pass over, so the report does too.
    a, b = "http://a.example/{}".format, "http://b.example/{}".format
    fetched = {a(i): (a((i + 1) % 10), "http://b.example/doc.pdf", b(i)) for i in range(10)}
    db = tmp_path / "xyro.db"
    store_pages(db, fetched)
    config = _config(tmp_path, db, "scope: {allowed_domains: [a.example]}\n"
                                   "crawler: {skip_suffixes: ['.pdf']}\n")
    result = _run(config, "--global-estimate", "--rounds", "2", "--selector", "pf", "--json")
    assert result.exit_code == 0, result.output
    chosen = [p["url"] for p in json.loads(result.stdout)["next_pages"]]
    assert len(chosen) == 10 and "http://b.example/doc.pdf" not in chosen
