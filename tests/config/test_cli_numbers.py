"""Number options refuse nan and ±inf with a usage error (exit 2), before anything runs:
every comparison with nan is false, so a range check alone let ``--seconds nan`` through."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from xyro.cli import cli


@pytest.mark.parametrize("args", [
    ("crawl", "--seconds", "nan"), ("crawl", "--seconds", "inf"),
    ("demo", "--speed", "nan"), ("demo", "--seconds", "nan"), ("demo", "--seconds", "inf"),
    ("run", "--speed", "inf"), ("run", "--epoch", "nan"),
    ("run", "--sim-start", "-inf"),
    ("rank", "--global-estimate", "--extra", "inf"), ("rank", "--global-estimate", "--extra",
                                                      "nan"),
], ids=lambda a: " ".join(a))
def test_non_finite_numbers_are_usage_errors(args: tuple[str, ...], tmp_path) -> None:
    result = CliRunner().invoke(cli, ["--set", f"storage.database={tmp_path / 'x.db'}", *args])
    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output or "is not in the range" in result.output
    assert not (tmp_path / "x.db").exists()


def test_extra_pages_have_the_config_keys_bound(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["--set", f"storage.database={tmp_path / 'x.db'}", "rank",
                                      "--global-estimate", "--extra", "101"])
    assert result.exit_code == 2 and "101" in result.output


def test_seeds_may_not_take_the_loaders_level(tmp_path) -> None:
    """Level 0 holds the loader's DTDs and entities, which pass outside the scope and the
    bandwidth G; a seed there was restored as one of them at the next start."""
    result = CliRunner().invoke(cli, ["--set", f"storage.database={tmp_path / 'x.db'}", "seed",
                                      "--priority", "0", "http://example.org/secret/a"])
    assert result.exit_code == 2 and "0 is not in the range 1<=x<=4" in result.output
    assert not (tmp_path / "x.db").exists()
