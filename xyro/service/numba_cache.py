"""Where numba keeps the compiled ranking kernel: a folder this user can write.

``ranking.gauss_seidel`` compiles its Gauss-Seidel sweep with ``@njit(cache=True)``. numba
caches beside the module (``ranking/__pycache__``), else in ``~/.cache``; when it can write
neither (a package installed by root, run by a user without a home) importing the module
fails ("cannot cache function '_sweep': no locator available"). ``ranking`` stays pure
(DESIGN.md §1: no environment, no I/O), so the composition root decides instead: every entry
point calls :func:`configure` before anything imports ``ranking``. The systemd unit sets
``NUMBA_CACHE_DIR`` itself, and an operator's value is always kept.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

ENV = "NUMBA_CACHE_DIR"

log = logging.getLogger("xyro.service.numba_cache")


def user_cache_dir(environ: MutableMapping[str, str]) -> Path | None:
    """``$XDG_CACHE_HOME/xyro/numba``, else ``~/.cache/xyro/numba`` (None without a home)."""
    xdg = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec ignores relative values
        return Path(xdg) / "xyro" / "numba"
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".cache" / "xyro" / "numba" if os.path.isabs(home) else None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def configure(environ: MutableMapping[str, str] = os.environ) -> Path | None:
    """Point ``NUMBA_CACHE_DIR`` at a folder this user owns, unless it is set; return it.

    The user's cache folder when it can be created and written; else a private temporary
    folder (the kernel is then compiled for this run only, a few seconds, and the folder is
    removed at exit, saying so if it was used). None when even that fails: numba's own
    error is then reported by the CLI as one line.
    """
    if environ.get(ENV):
        return None
    folder = user_cache_dir(environ)
    if folder is not None and _writable(folder):
        environ[ENV] = str(folder)
        return folder
    try:
        temporary = Path(tempfile.mkdtemp(prefix="xyro-numba-"))
    except OSError:
        return None
    environ[ENV] = str(temporary)
    atexit.register(_drop_temporary, temporary, folder)
    return temporary


def _drop_temporary(temporary: Path, wanted: Path | None) -> None:
    """Remove the run's temporary cache; if numba compiled into it, say how to keep it."""
    if any(p.is_file() for p in temporary.rglob("*")):
        log.info("compiled the ranking kernel into the temporary folder %s for this run "
                 "only: %s; set %s to a folder this user can write to keep it between runs",
                 temporary, f"cannot write {wanted}" if wanted else "no home folder", ENV)
    shutil.rmtree(temporary, ignore_errors=True)


def is_cache_failure(exc: BaseException) -> bool:
    """numba's refusal to import a ``cache=True`` function it has nowhere to cache."""
    return isinstance(exc, RuntimeError) and "cannot cache function" in str(exc)


def cache_failure_message(exc: BaseException) -> str:
    """One line for :func:`is_cache_failure`: what happened and what to do."""
    where = os.environ.get(ENV)
    tried = f" (it is {where}, which numba could not use)" if where else ""
    return (f"{exc}: numba has no folder it can write to cache the compiled ranking kernel; "
            f"set {ENV} to a folder this user can write{tried}")
