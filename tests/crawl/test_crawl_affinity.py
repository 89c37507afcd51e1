"""crawler.cpus pins every thread of the crawl process, running or started later."""

from __future__ import annotations

import os
import threading

import pytest

from xyro.affinity import pin_process
from xyro.config_load import ConfigError


@pytest.fixture
def restore_affinity():
    saved = {}
    for tid in (int(t) for t in os.listdir(f"/proc/{os.getpid()}/task")):
        try:
            saved[tid] = os.sched_getaffinity(tid)
        except ProcessLookupError:  # a thread of an earlier test ended after the listing
            pass
    yield
    for tid, cpus in saved.items():
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            pass
    os.sched_setaffinity(0, saved[threading.get_native_id()])


def test_pins_running_and_later_threads(restore_affinity) -> None:
    cpu = min(os.sched_getaffinity(0))
    release = threading.Event()
    before = threading.Thread(target=release.wait, daemon=True)
    before.start()
    pin_process([cpu])
    seen: list[set[int]] = []
    after = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
    after.start()
    after.join()
    assert os.sched_getaffinity(before.native_id) == {cpu}
    assert os.sched_getaffinity(0) == {cpu}
    assert seen == [{cpu}]
    release.set()


def test_a_cpu_the_process_may_not_use_is_a_clear_error(restore_affinity) -> None:
    missing = max(os.sched_getaffinity(0)) + 1000
    with pytest.raises(ConfigError, match=r"crawler.cpus: \[\d+\] names CPUs") as info:
        pin_process([missing])
    assert info.value.exit_code == 2   # systemd must not restart into it


SECCOMP = "libseccomp.so.2"
_DENIED_PIN = f"""
import ctypes, errno, os, sys
lib = ctypes.CDLL({SECCOMP!r})
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_init.argtypes = [ctypes.c_uint32]
lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
lib.seccomp_load.argtypes = [ctypes.c_void_p]
ctx = lib.seccomp_init(0x7fff0000)  # allow the rest
nr = lib.seccomp_syscall_resolve_name(b"sched_setaffinity")
assert lib.seccomp_rule_add(ctx, 0x00050000 | errno.EPERM, nr, 0) == 0
assert lib.seccomp_load(ctx) == 0
from xyro.affinity import pin_process
from xyro.errors import XyroError
try:
    pin_process([min(os.sched_getaffinity(0))])
except XyroError as exc:
    print(exc)
"""


def test_a_seccomp_filter_that_refuses_pinning_is_named() -> None:
    # systemd's SystemCallFilter=~@resources (with SystemCallErrorNumber=EPERM) refuses
    # sched_setaffinity; the crawl said "Operation not permitted ... fix the permissions".
    import ctypes
    import subprocess
    import sys

    try:
        ctypes.CDLL(SECCOMP)
    except OSError:
        pytest.skip(f"{SECCOMP} not found (Debian package libseccomp2)")
    out = subprocess.run([sys.executable, "-c", _DENIED_PIN], capture_output=True, text=True,
                         timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "refused to pin" in out.stdout and "allow sched_setaffinity" in out.stdout
