"""Permission problems as a new operator meets them: the real ``xyro`` run as user nobody.

Every failure is one line on stderr naming the path (its owner and mode, the user, what to
do) and exit code 2 (DESIGN.md §7), never a traceback or the advice to restore a healthy
file; the read-only commands work on a database nobody may not write, with its WAL files
present (a daemon writing, or stopped uncleanly) or absent (stopped cleanly); ``xyro rank``
works without a writable numba cache. Real SQLite files, set up as root in a 0755 folder.

The tests that switch to nobody (with ``setpriv``) need root; they are skipped otherwise.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import numpy as np
import pytest

from metadata import MetadataStore
from metadata.records import FetchRecord, PageType, XmlVersion
from metadata.schema import MIGRATIONS
from xyro.loader.warehouse import Warehouse
from xyro.service import numba_cache

SETPRIV = shutil.which("setpriv")
AS_NOBODY = [SETPRIV or "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
XYRO = Path(sys.executable).parent / "xyro"
REPO = Path(__file__).resolve().parent.parent
SEED = "http://a.example/"
DOC = "http://a.example/feed.xml"
BODY = b'<?xml version="1.0"?>\n<feed>hello</feed>\n'
LIVE = "http://live.example/new"

# -- running things --------------------------------------------------------------------

def _env(home: str, **extra: str) -> dict[str, str]:
    """A clean environment: no XYRO_* or NUMBA_* leaking in from the test run."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
            **extra}


def nobody(world: Path, *args: str, module: bool = False, timeout: float = 180,
           **env: str) -> subprocess.CompletedProcess[str]:
    """``xyro ARGS`` (or ``python -m xyro ARGS``) as user nobody, whose HOME does not exist."""
    cmd = [sys.executable, "-m", "xyro"] if module else [str(XYRO)]
    return subprocess.run([*AS_NOBODY, *cmd, *args], cwd=world, env=_env("/nonexistent", **env),
                          capture_output=True, text=True, timeout=timeout)


def as_root(world: Path, *args: str) -> str:
    """``xyro ARGS`` as root (setting up); its numba cache stays inside ``world``."""
    done = subprocess.run([str(XYRO), *args], cwd=world, env=_env(str(world / "roothome")),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return done.stdout


def storage(db: Path, warehouse: Path) -> list[str]:
    return ["--set", f"storage.database={db}", "--set", f"storage.warehouse_dir={warehouse}"]


def one_line(result: subprocess.CompletedProcess[str], code: int, *names: object) -> str:
    """The single stderr line of a failed run, checked for exit code and the names."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    for name in names:
        assert str(name) in lines[0], (name, lines[0])
    return lines[0]


def _why_not_as_nobody() -> str | None:
    if os.geteuid() != 0:
        return "needs root, to run the CLI as user nobody"
    if SETPRIV is None:
        return "setpriv (util-linux) is not installed"
    probe = subprocess.run([*AS_NOBODY, sys.executable, "-c", "import xyro, numba"], cwd="/",
                           env=_env("/nonexistent"), capture_output=True, text=True)
    if probe.returncode != 0:
        return f"user nobody cannot run {sys.executable} with xyro: {probe.stderr.strip()}"
    return None


GRANTS = Path(tempfile.gettempdir()) / "xyro-test-search-grants.json"


def _grant(paths: list[Path], recorded: dict[str, int]) -> None:
    """Search permission for others on every folder above ``paths``; ``recorded`` gets the
    original mode of each folder changed."""
    for path in paths:
        for folder in [path, *path.parents]:
            mode = stat.S_IMODE(folder.stat().st_mode)
            if not mode & stat.S_IXOTH:
                folder.chmod(mode | stat.S_IXOTH)
                recorded.setdefault(str(folder), mode)


def _write(registry: Path, recorded: dict[str, int]) -> None:
    part = registry.with_suffix(".part")
    part.write_text(json.dumps(recorded), encoding="utf-8")
    part.replace(registry)  # whole or not at all, should the run be killed here


def _read(registry: Path) -> dict[str, int]:
    text = registry.read_text(encoding="utf-8") if registry.exists() else ""
    return json.loads(text) if text.strip() else {}


@contextmanager
def _locked(path: Path, how: int) -> Iterator[IO[str]]:
    with open(path, "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, how)
        yield lock


@contextmanager
def search_granted(paths: list[Path], registry: Path = GRANTS) -> Iterator[None]:
    """Others may enter (x, not read) the folders above ``paths`` while the block runs: a
    clone in a 0700 ``mktemp -d`` folder, an interpreter under /root. Test runs on one
    machine overlap (two checkouts, a killed run's orphaned worker) and grant the same
    folders, so one run restoring /root's mode must not pull it from under another's user
    nobody mid-import. ``registry`` keeps each folder's original mode; each run holds a
    shared lock on ``registry.users`` while it needs the grant, and the last one out (its
    exclusive lock then succeeds) restores them; ``registry.lock`` serializes the changes."""
    mutex, users = registry.with_suffix(".lock"), registry.with_suffix(".users")
    with _locked(mutex, fcntl.LOCK_EX):
        recorded = _read(registry)
        _grant(paths, recorded)
        _write(registry, recorded)
        user = open(users, "a+", encoding="utf-8")  # noqa: SIM115 (held past this block)
        fcntl.flock(user, fcntl.LOCK_SH)  # never waits: only a restorer holds EX, under mutex
    try:
        yield
    finally:
        with _locked(mutex, fcntl.LOCK_EX):
            fcntl.flock(user, fcntl.LOCK_UN)
            try:
                fcntl.flock(user, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another run still needs the grant; the last one out restores
            else:
                for folder, mode in _read(registry).items():
                    Path(folder).chmod(mode)
                _write(registry, {})
            finally:
                user.close()


@pytest.fixture(scope="module")
def as_nobody() -> Iterator[None]:
    """Skips the test, saying why, when it cannot run the CLI as user nobody. The checkout
    and the interpreter may sit below folders others cannot enter: those get search
    permission for the module's tests (:func:`search_granted`)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the CLI as user nobody")
    with search_granted([Path(__file__).resolve().parents[1], Path(sys.prefix),
                         Path(sys.executable).resolve().parent]):
        reason = _why_not_as_nobody()
        if reason:
            pytest.skip(reason)
        yield


def test_overlapping_grants_are_restored_when_the_last_run_leaves() -> None:
    """Two runs grant the same 0700 folder; the first to leave must not take it back."""
    base = Path(tempfile.mkdtemp(prefix="xyro-grant-"))
    try:
        base.chmod(0o755)
        private = base / "private"
        private.mkdir()
        private.chmod(0o700)
        (private / "inside").mkdir()
        first = search_granted([private / "inside"], base / "grants.json")
        second = search_granted([private / "inside"], base / "grants.json")

        def mode() -> int:
            return stat.S_IMODE(private.stat().st_mode)

        with first:
            assert mode() == 0o701
            second.__enter__()
        assert mode() == 0o701            # the second run still needs it
        second.__exit__(None, None, None)
        assert mode() == 0o700            # the last one out restored it
        with search_granted([private / "inside"], base / "grants.json"):
            assert mode() == 0o701
        assert mode() == 0o700
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- folders -----------------------------------------------------------------------------

@pytest.fixture
def world(as_nobody: None) -> Iterator[Path]:
    """A 0755 root-owned folder nobody can enter (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="xyro-perm-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def folder(path: Path, *, owner: str = "root", mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, pwd.getpwnam(owner).pw_uid, -1)
    path.chmod(mode)
    return path


@pytest.fixture(scope="module")
def template(as_nobody: None) -> Iterator[Path]:
    """A healthy store made by root (``xyro init``, ``xyro seed``, one XML document), closed
    cleanly: no -wal/-shm files. Copied into each test's folder."""
    base = Path(tempfile.mkdtemp(prefix="xyro-perm-template-"))
    base.chmod(0o755)
    db, warehouse = base / "var" / "xyro.db", base / "var" / "warehouse"
    as_root(base, *storage(db, warehouse), "init")
    as_root(base, *storage(db, warehouse), "seed", SEED)
    key = Warehouse(warehouse).put(BODY)
    md5 = hashlib.md5(BODY).digest()
    with MetadataStore.open(db) as store:
        writer = store.writer()
        writer.submit(FetchRecord(DOC, 1.7e9, PageType.XML, 200, md5,
                                  content_type="application/xml", size=len(BODY)))
        writer.submit(XmlVersion(url=DOC, md5=md5, c14n_signature=md5, fetched_at=1.7e9,
                                 size=len(BODY), storage_key=key, valid=None,
                                 validation_error=None, dtd_url=None, schema_url=None))
        writer.close()
    assert not [p for p in db.parent.iterdir() if p.name.startswith("xyro.db-")]
    yield base / "var"
    shutil.rmtree(base, ignore_errors=True)


def read_only_copy(template: Path, world: Path) -> tuple[Path, Path]:
    """The template's store in ``world/var``: root's folder (0755) and files (0644)."""
    var = world / "var"
    shutil.copytree(template, var)
    for path in [var, *var.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return var / "xyro.db", var / "warehouse"


# -- init / demo: folders nobody may not write -------------------------------------------

def test_init_with_unwritable_warehouse_folder(world: Path) -> None:
    own = folder(world / "own", owner="nobody")
    locked = folder(world / "locked")
    result = nobody(world, *storage(own / "xyro.db", locked / "warehouse"), "init")
    line = one_line(result, 2, locked, "storage.warehouse_dir", "as user nobody")
    assert "cannot write folder" in line and "mode 0755" in line and "owner root" in line
    folder(locked / "warehouse")  # exists but is root's: mkdir alone would not notice
    result = nobody(world, *storage(own / "xyro.db", locked / "warehouse"), "init")
    one_line(result, 2, locked / "warehouse", "storage.warehouse_dir")


def test_init_with_unwritable_database_folder(world: Path) -> None:
    locked = folder(world / "locked")
    result = nobody(world, *storage(locked / "xyro.db", world / "wh"), "init")
    one_line(result, 2, f"cannot write folder {locked}", "storage.database", "mode 0755")
    result = nobody(world, *storage(locked / "var" / "xyro.db", world / "wh"), "init")
    one_line(result, 2, f"cannot create folder {locked / 'var'}", f"folder {locked} (owner")
    secret = folder(world / "secret", mode=0o700)
    result = nobody(world, *storage(secret / "xyro.db", world / "wh"), "init")
    one_line(result, 2, f"cannot enter folder {secret}", "mode 0700")


def test_demo_with_unwritable_folder(world: Path) -> None:
    locked = folder(world / "locked")
    result = nobody(world, *storage(locked / "xyro.db", locked / "warehouse"), "demo",
                    "--seconds", "1", "--hosts", "4", "--web-pages", "20")
    one_line(result, 2, locked, "as user nobody")


def _lock_as_nobody(world: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """The crawl lock of ``db`` taken by user nobody, as the service's ``xyro run`` takes it."""
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            "from pathlib import Path\n"
            "from xyro.service.crawl_lock import CrawlLock\n"
            f"with CrawlLock(Path({str(db)!r})): print('locked')\n")
    return subprocess.run([*AS_NOBODY, sys.executable, "-c", code], cwd=world,
                          env=_env("/nonexistent"), capture_output=True, text=True, timeout=60)


def test_a_root_seed_leaves_a_lock_the_service_user_can_take(world: Path) -> None:
    # `sudo xyro seed` on the service's database creates <database>.lock: owned as the
    # database is, not by root, or the service (another user) could never start again.
    own = folder(world / "own", owner="nobody")
    db, warehouse = own / "xyro.db", own / "warehouse"
    assert nobody(world, *storage(db, warehouse), "init").returncode == 0
    lock = own / "xyro.db.lock"
    lock.unlink(missing_ok=True)
    as_root(world, *storage(db, warehouse), "seed", SEED)
    assert lock.stat().st_uid == pwd.getpwnam("nobody").pw_uid
    taken = _lock_as_nobody(world, db)
    assert taken.returncode == 0 and taken.stdout == "locked\n", taken.stderr
    # A root-owned lock file left by an older version: locked read-only all the same.
    os.chown(lock, 0, 0)
    lock.chmod(0o644)
    taken = _lock_as_nobody(world, db)
    assert taken.returncode == 0 and taken.stdout == "locked\n", taken.stderr


# -- read-only commands on a healthy store nobody may not write ---------------------------

def _hold_open(db: Path) -> subprocess.Popen[str]:
    """A root process with the store open and a write in its WAL (a running daemon)."""
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            "from metadata import MetadataStore, Enqueue\n"
            f"store = MetadataStore.open({str(db)!r}); w = store.writer()\n"
            f"w.submit(Enqueue({LIVE!r}, 2)); w.flush()\n"
            "print('ready', flush=True); sys.stdin.read(); store.close()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _crash_after_write(db: Path) -> None:
    """A root process that writes and dies without closing: -wal and -shm stay behind."""
    code = (f"import os, sys; sys.path.insert(0, {str(REPO)!r})\n"
            "from metadata import MetadataStore, Enqueue\n"
            f"store = MetadataStore.open({str(db)!r}); w = store.writer()\n"
            f"w.submit(Enqueue({LIVE!r}, 2)); w.flush(); os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _check_read_only_commands(world: Path, db: Path, warehouse: Path, urls: int) -> str:
    """status, documents, export and plan as nobody: exit 0 and the right answers."""
    opts = storage(db, warehouse)
    status = nobody(world, *opts, "status", "--json")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    report = json.loads(status.stdout)
    assert report["database"] == str(db) and report["urls"] == urls
    docs = nobody(world, *opts, "documents", "--json")
    assert docs.returncode == 0, docs.stderr
    assert [d["url"] for d in json.loads(docs.stdout)["documents"]] == [DOC]
    export = nobody(world, *opts, "export", DOC)
    assert export.returncode == 0 and export.stdout == BODY.decode(), export.stderr
    plan = nobody(world, *opts, "plan", "--json")
    assert plan.returncode == 0 and "Traceback" not in plan.stderr, plan.stderr
    json.loads(plan.stdout)
    return status.stderr + docs.stderr + export.stderr + plan.stderr


def test_read_only_commands_without_wal_files(template: Path, world: Path) -> None:
    """A cleanly stopped daemon's store in a folder nobody may not write: SQLite cannot
    create the -shm file, so the store is read immutable, with a warning saying so."""
    db, warehouse = read_only_copy(template, world)
    stderr = _check_read_only_commands(world, db, warehouse, urls=2)
    warnings = [line for line in stderr.splitlines() if "immutable" in line]
    assert len(warnings) == 4 and all(str(db) in w and "daemon" in w for w in warnings)
    # The lock file is the template's (`xyro seed` takes the crawl lock); no -wal or -shm.
    assert sorted(p.name for p in db.parent.iterdir()) == ["warehouse", "xyro.db",
                                                           "xyro.db.lock"]


def test_a_demo_store_read_as_immutable_is_warned_about_once(template: Path,
                                                            world: Path) -> None:
    """``--demo`` looks up the demo's refresh unit in its store before the command reads
    it: one warning for the command, none for the look-up, and in the log's own form."""
    db, warehouse = read_only_copy(template, world)
    demo = folder(world / "var" / "demo")
    shutil.copy(db, demo / "xyro.db")
    (demo / "xyro.db").chmod(0o644)
    result = nobody(world, *storage(db, warehouse), "--demo", "status")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "immutable" in line]
    assert len(warnings) == 1 and " WARNING metadata.store: " in warnings[0], result.stderr


def test_read_only_commands_while_the_daemon_writes(template: Path, world: Path) -> None:
    """-wal and -shm exist (0644, root's): read with mode=ro, the WAL's new rows included."""
    db, warehouse = read_only_copy(template, world)
    proc = _hold_open(db)
    try:
        assert (world / "var" / "xyro.db-shm").exists()
        stderr = _check_read_only_commands(world, db, warehouse, urls=3)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    assert "immutable" not in stderr


def test_read_only_commands_after_a_crash(template: Path, world: Path) -> None:
    db, warehouse = read_only_copy(template, world)
    _crash_after_write(db)
    assert (world / "var" / "xyro.db-wal").stat().st_size > 0
    stderr = _check_read_only_commands(world, db, warehouse, urls=3)
    assert "immutable" not in stderr


def test_writing_commands_on_a_read_only_store(template: Path, world: Path) -> None:
    db, warehouse = read_only_copy(template, world)
    for args in (["seed", "http://b.example/"], ["plan", "--run"], ["init"]):
        result = nobody(world, *storage(db, warehouse), *args)
        one_line(result, 2, f"cannot write folder {db.parent}", "as user nobody",
                 "storage.database")


def test_read_only_database_file_in_a_writable_folder(template: Path, world: Path) -> None:
    """Root's 0644 file in nobody's folder: status reads it, seed names the file."""
    db, warehouse = read_only_copy(template, world)
    os.chown(db.parent, pwd.getpwnam("nobody").pw_uid, -1)
    status = nobody(world, *storage(db, warehouse), "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["urls"] == 2, status.stderr
    seed = nobody(world, *storage(db, warehouse), "seed", "http://b.example/")
    line = one_line(seed, 2, f"cannot write {db} (owner root, group root, mode 0644)")
    assert "run as root, or give nobody write access" in line


def test_unreadable_database(template: Path, world: Path) -> None:
    db, warehouse = read_only_copy(template, world)
    db.chmod(0o600)
    for command in ("status", "documents"):
        result = nobody(world, *storage(db, warehouse), command)
        line = one_line(result, 2, f"cannot read {db}", "mode 0600")
        assert "restore" not in line


def test_older_schema_is_not_upgraded_read_only(world: Path) -> None:
    var = folder(world / "var")
    db = var / "xyro.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    MIGRATIONS[1][1](conn)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    db.chmod(0o644)
    result = nobody(world, *storage(db, var / "warehouse"), "documents")
    one_line(result, 2, db, "version 1", "`xyro init` as a user who can write it")


def test_corrupt_database_keeps_the_restore_advice(world: Path) -> None:
    var = folder(world / "var")
    db = var / "xyro.db"
    db.write_bytes(os.urandom(16384))
    db.chmod(0o644)
    for command in ("status", "documents"):
        result = nobody(world, *storage(db, var / "warehouse"), command)
        line = one_line(result, 2, db, "not a usable metadata database")
        assert "restore it from a backup" in line


# -- rank: numba's cache ----------------------------------------------------------------

def test_rank_without_a_writable_numba_cache(world: Path) -> None:
    """HOME does not exist and the package folder is root's: the kernel is compiled into a
    private temporary folder for this run, which one log line tells, and removed after."""
    package = REPO / "ranking"
    st = package.stat()
    assert st.st_uid == 0 and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    edges = world / "small.npz"
    np.savez(edges, n=4, src=np.array([0, 1, 2, 3, 0]), dst=np.array([1, 2, 3, 0, 2]))
    edges.chmod(0o644)
    result = nobody(world, "rank", "--edges", str(edges), "--json", module=True)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)["pages"] == 4
    notes = [line for line in result.stderr.splitlines() if "NUMBA_CACHE_DIR" in line]
    assert len(notes) == 1 and "temporary folder" in notes[0]
    assert "/nonexistent/.cache/xyro/numba" in notes[0]
    temporary = notes[0].split("temporary folder ")[1].split()[0]
    assert not os.path.exists(temporary)


def test_rank_with_an_unwritable_numba_cache_dir(world: Path) -> None:
    """The operator's NUMBA_CACHE_DIR is kept; if numba cannot use it: one line, exit 2."""
    edges = world / "small.npz"
    np.savez(edges, n=2, src=np.array([0]), dst=np.array([1]))
    edges.chmod(0o644)
    result = nobody(world, "rank", "--edges", str(edges), NUMBA_CACHE_DIR=str(world))
    one_line(result, 2, "cannot cache function", "set NUMBA_CACHE_DIR", f"it is {world}")


def test_numba_cache_folder_choice(tmp_path: Path) -> None:
    """The operator's value is kept; else $XDG_CACHE_HOME/xyro/numba, else ~/.cache/..."""
    kept = {"NUMBA_CACHE_DIR": "/srv/numba"}
    assert numba_cache.configure(kept) is None and kept["NUMBA_CACHE_DIR"] == "/srv/numba"
    xdg = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert numba_cache.configure(xdg) == tmp_path / "xdg" / "xyro" / "numba"
    assert xdg["NUMBA_CACHE_DIR"] == str(tmp_path / "xdg" / "xyro" / "numba")
    home = {"XDG_CACHE_HOME": "relative/ignored", "HOME": str(tmp_path / "home")}
    assert numba_cache.configure(home) == tmp_path / "home" / ".cache" / "xyro" / "numba"
    assert (tmp_path / "home" / ".cache" / "xyro" / "numba").is_dir()


def test_read_only_commands_on_a_read_only_file_system(template: Path, world: Path) -> None:
    """A cleanly stopped store on a read-only mount: SQLite cannot make the -shm file (it
    says SQLITE_CANTOPEN there), so the store is read immutable, with a warning saying why."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -m (a private mount namespace) is not permitted here")
    db, warehouse = read_only_copy(template, world)
    mount = world / "ro"
    mount.mkdir()
    ro_db, ro_warehouse = mount / "xyro.db", mount / "warehouse"
    opts = " ".join(storage(ro_db, ro_warehouse))
    script = (f"mount --bind {db.parent} {mount} && mount -o remount,bind,ro {mount} || "
              f"exit 77\n{XYRO} {opts} status --json > {world}/status.json || exit $?\n"
              f"{XYRO} {opts} documents --json > {world}/documents.json")
    run = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=world, env=_env(str(world)),
                         capture_output=True, text=True, timeout=180)
    if run.returncode == 77:
        pytest.skip(f"cannot make a read-only bind mount here: {run.stderr.strip()}")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert json.loads((world / "status.json").read_text())["urls"] == 2
    documents = json.loads((world / "documents.json").read_text())["documents"]
    assert [d["url"] for d in documents] == [DOC]
    warnings = [line for line in run.stderr.splitlines() if "immutable" in line]
    assert len(warnings) == 2 and all("read-only file system" in w for w in warnings)
