"""Any text at all, as file, environment or --set, ends in a config or one ConfigError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xyro.config import XyroConfig
from xyro.config_load import ConfigError, all_key_paths, load_config

KEYS = [".".join(map(str, p)) for p in all_key_paths()] + ["crawler", "nope", "crawler.nope"]
# With control characters YAML refuses anywhere (NUL, form feed, ESC, DEL): its reader raised
# them from the loader's constructor, outside the error handling.
YAMLISH = st.text(alphabet=st.sampled_from(list("abc:- \n\t'\"[]{},&*!|>#%@`01.e~\\yesno"
                                                "\0\x0c\x1b\x7f")),
                  max_size=120)
SNIPPETS = st.lists(st.sampled_from([
    "crawler:\n", "  workers: ", "  limits:\n", "    deadline_s: ", "seeds: ", "log:\n",
    "  level: ", "no", "yes", "-1", "0", "1e9", "[", "]", "{", "}", "\"x\"", "\n", "  ",
    "&a ", "*a", "<<: ", "~", ".inf", "ftp://x/", "https://a.example/", "\t", ": ",
]), max_size=25).map("".join)


def _outcome(**kwargs: object) -> None:
    try:
        assert isinstance(load_config(**kwargs), XyroConfig)  # type: ignore[arg-type]
    except ConfigError as exc:
        text = str(exc)
        assert text.startswith("config error") and "\n" not in text
        assert "Input should" not in text and exc.exit_code == 2


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(YAMLISH, SNIPPETS))
def test_any_file_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    _outcome(path=path, env={})


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(KEYS), value=st.one_of(YAMLISH, SNIPPETS), env=st.booleans())
# Found by the fuzz: a text setting given a mapping on the command line put the value's line
# breaks into the one-line error (its "write it in quotes" hint).
@example(key="ranking.cluster_dir", value="crawler:\nnocrawler:\n", env=False)
def test_any_setting(key: str, value: str, env: bool) -> None:
    if env:
        name = "XYRO_" + key.replace(".", "__").upper()
        _outcome(path=None, env={name: value})
    else:
        _outcome(path=None, env={}, overrides=[f"{key}={value}"])
