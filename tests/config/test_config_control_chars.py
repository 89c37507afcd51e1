"""Characters YAML refuses anywhere (control characters) end in one ConfigError, not a crash.

PyYAML's reader checks the whole text when the loader is built, before any parsing: a file of
NULs (what a crash can leave of a file being written), a form feed pasted from a document, an
ESC or DEL typed into a shell line each raised its ReaderError out of the loader.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from xyro.config_load import ConfigError, load_config

CONTROL = ["\x00", "\x0c", "\x1b", "\x7f", "\x01"]


def check_one_line(err: ConfigError) -> str:
    text = str(err)
    assert text.startswith("config error") and "\n" not in text and err.exit_code == 2, text
    return text


@pytest.mark.parametrize("char", CONTROL)
def test_control_character_in_the_file_names_line_and_column(
        fails: Callable[..., ConfigError], char: str) -> None:
    err = fails(f"crawler:\n  workers: 8{char}\n")
    text = check_one_line(err)
    assert (err.key, err.line) == ("crawler.workers", 2), text
    assert f"column 13: character U+{ord(char):04X}, which YAML does not allow" in err.reason


def test_a_zero_filled_file_is_named_as_damaged(tmp_path: Path) -> None:
    zeros = tmp_path / "xyro.yaml"
    zeros.write_bytes(b"\0" * 200)
    with pytest.raises(ConfigError) as info:
        load_config(zeros, env={})
    check_one_line(info.value)
    assert info.value.line == 1 and "restore it from a copy" in info.value.reason


@pytest.mark.parametrize("char", ["\x0c", "\x1b", "\x7f", "\x01"])
@pytest.mark.parametrize("how", ["env", "set"])
def test_control_character_in_a_setting(fails: Callable[..., ConfigError], char: str,
                                        how: str) -> None:
    # A number key: the value must parse as YAML; a text key takes the raw text, which the
    # key's own rule then refuses (user_agent: printable ASCII).
    for key, words in (("crawler.workers", "is not a valid YAML value"),
                       ("crawler.user_agent", "printable ASCII")):
        value = f"8{char}"
        if how == "env":
            err = fails(env={"XYRO_" + key.replace(".", "__").upper(): value})
        else:
            err = fails(overrides=[f"{key}={value}"])
        text = check_one_line(err)
        assert err.key == key and words in text, text


def test_xyro_config_show_on_a_zero_filled_file_is_one_line_exit_2(tmp_path: Path) -> None:
    zeros = tmp_path / "xyro.yaml"
    zeros.write_bytes(b"\0" * 200)
    done = subprocess.run([sys.executable, "-m", "xyro", "-c", str(zeros), "config", "show"],
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error"), done.stderr
    assert "U+0000" in lines[0] and "Traceback" not in done.stderr
