"""The systemd unit rates well offline, and every CLI command is documented in the README."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import click.testing
import pytest

from xyro.cli import cli

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "systemd" / "xyro.service"


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    names = []
    for name, cmd in sorted(group.commands.items()):
        names.append(f"{prefix}{name}")
        if isinstance(cmd, click.Group):
            names.extend(_commands(cmd, f"{prefix}{name} "))
    return names


def test_every_command_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [c for c in _commands(cli) if f"xyro {c}" not in readme]
    assert not missing, f"commands missing from README.md: {missing}"


def test_every_command_has_help() -> None:
    runner = click.testing.CliRunner()
    for command in _commands(cli):
        result = runner.invoke(cli, [*command.split(), "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output, command


def test_unit_runs_the_daemon_command_as_notify_service() -> None:
    text = UNIT.read_text()
    assert re.search(r"^Type=notify$", text, re.M)
    assert re.search(r"^ExecStart=\S*xyro .* run$", text, re.M)
    assert not re.search(r"^DynamicUser=yes", text, re.M), "operators must read the state dir"
    assert "run" in _commands(cli)


def test_the_unit_does_not_restart_on_a_configuration_error(tmp_path: Path) -> None:
    # A bad key exits 2 (as does a second crawler on the database): restarting every 10 s
    # cannot fix it, so the unit must fail instead.

    assert re.search(r"^Restart=on-failure$", UNIT.read_text(), re.M)
    assert re.search(r"^RestartPreventExitStatus=2$", UNIT.read_text(), re.M)
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {tmp_path / 'x.db'}\n  warehuose_dir: w\n")
    done = subprocess.run([sys.executable, "-m", "xyro", "-c", str(config), "run"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "warehuose_dir" in done.stderr, done.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed")
def test_unit_security_exposure_is_low() -> None:
    out = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(UNIT)],
                         capture_output=True, text=True, timeout=60).stdout
    score = float(re.search(r"Overall exposure level for \S+: ([\d.]+)", out).group(1))
    assert score <= 2.0, out[-2000:]


def test_unit_lets_the_ranking_kernel_compile_and_cache() -> None:
    """numba maps the compiled Gauss-Seidel kernel executable at run time (forbidden by
    MemoryDenyWriteExecute=yes) and caches it where the service may write."""
    text = UNIT.read_text()
    assert not re.search(r"^MemoryDenyWriteExecute=yes", text, re.M)
    cache = re.search(r"^Environment=NUMBA_CACHE_DIR=(\S+)$", text, re.M)
    assert cache and cache.group(1).startswith("/var/lib/xyro/")
    assert re.search(r"^StateDirectory=xyro$", text, re.M)


def test_unit_and_operator_read_one_database(tmp_path: Path) -> None:
    """The storage paths live in the installed YAML alone (the install step's sed), under
    the unit's StateDirectory, so `xyro -c /etc/xyro/xyro.yaml status` finds the daemon's
    database; an environment override in the unit would hide it from the operator."""
    from xyro.config_load import load_config

    text = UNIT.read_text()
    assert "XYRO_STORAGE" not in text
    sed = re.search(r"^#\s+sed -i '(.+)' /etc/xyro/xyro.yaml$", text, re.M)
    assert sed, "the install steps set the storage paths"
    installed = (ROOT / "config" / "xyro.yaml").read_text()
    for rule in sed.group(1).split("; "):
        _, pattern, replacement, _ = rule.split("|")
        installed, count = re.subn(pattern.replace("^", "(?m)^", 1), replacement, installed)
        assert count == 1, rule
    state = "/var/lib/" + re.search(r"^StateDirectory=(\S+)$", text, re.M).group(1) + "/"
    (tmp_path / "xyro.yaml").write_text(installed)
    config = load_config(tmp_path / "xyro.yaml", env={})
    assert str(config.storage.database).startswith(state)
    assert str(config.storage.warehouse_dir).startswith(state)
    assert re.search(r"^SystemCallFilter=sched_setaffinity$", text, re.M)



def test_the_console_script_is_the_guarded_entry_point() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^xyro = "xyro\.__main__:main"$', text, re.MULTILINE)


def test_a_ctrl_c_during_the_imports_ends_in_one_line_not_a_traceback() -> None:
    """A KeyboardInterrupt raised while Python imports the command line (numpy, scipy, lxml
    take about a second) ends as one during a command: ``interrupted``, exit 130."""
    code = (
        "import sys\n"
        "class Interrupting:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'xyro.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupting())\n"
        "from xyro.__main__ import main\n"
        "main(['--version'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted\n"
