"""Every kind of bad configuration ends in one ConfigError naming the key, line and reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from xyro.config_load import ConfigError, load_config

PYDANTIC_WORDS = ("Input should", "validation error", "pydantic", "type=", "For further")


def check_one_line(err: ConfigError) -> str:
    text = str(err)
    assert "\n" not in text
    assert text.startswith("config error")
    for word in PYDANTIC_WORDS:
        assert word not in text, text
    assert err.exit_code == 2
    return text


FILE_CASES = [
    # (yaml text, key, line, words the reason must contain)
    ("crawler:\n  workers: 0\n", "crawler.workers", 2, "must be ≥ 1, got 0"),
    ("crawler:\n  workers: 5000\n", "crawler.workers", 2, "must be ≤ 4096, got 5000"),
    # durations past ten years overflowed the scheduler's and the clock's arithmetic
    ("ranking:\n  schedule_s: 1e15\n", "ranking.schedule_s", 2, "≤ 315360000"),
    ("log:\n  summary_interval_s: 1e15\n", "log.summary_interval_s", 2, "≤ 315360000"),
    ("publication:\n  refresh_s: 1e12\n", "publication.refresh_s", 2, "≤ 315360000"),
    ("refresh:\n  discovery_share: 1.5\n", "refresh.discovery_share", 2, "≤ 1, got 1.5"),
    ("ranking:\n  damping: 1\n", "ranking.damping", 2, "must be < 1, got 1"),
    ("ranking:\n  tolerance: 0\n", "ranking.tolerance", 2, "must be > 0, got 0"),
    ("ranking:\n  global_estimate:\n    extra_pages_per_local_page: 0\n",
     "ranking.global_estimate.extra_pages_per_local_page", 3, "must be > 0, got 0"),
    ("ranking:\n  global_estimate:\n    rounds: 0\n", "ranking.global_estimate.rounds", 3,
     "must be ≥ 1, got 0"),
    ("ranking:\n  global_estimate:\n    selector: best\n",
     "ranking.global_estimate.selector", 3, "one of sc, sc_learned, pf, outlinks, random"),
    ("ranking:\n  global_estimate:\n    out_degree: some\n",
     "ranking.global_estimate.out_degree", 3, "one of within, all"),
    ("ranking:\n  global_estimate:\n    budget: 3\n", "ranking.global_estimate.budget", 3,
     "unknown key"),
    ("ranking:\n  importance: opic\n  global_estimate:\n    importance: global\n",
     "ranking.global_estimate", 3, "but ranking.importance is opic, whose checkpoints write "
     "importance too; set ranking.importance: pagerank, or global_estimate.importance: local"),
    ("crawler:\n  politeness:\n    robots_ttl_s: 90000\n",
     "crawler.politeness.robots_ttl_s", 3, "≤ 86400"),
    ("crawler:\n  politeness:\n    delay_s: .inf\n",
     "crawler.politeness.delay_s", 3, "finite number"),
    ("refresh:\n  time_unit_s: inf\n", "refresh.time_unit_s", 2,
     "must be a number, got 'inf'; it must be a finite number"),
    ("ranking:\n  damping: nan\n", "ranking.damping", 2, "it must be a finite number"),
    ("refresh:\n  time_unit_s: 1e-12\n", "refresh.time_unit_s", 2, "must be ≥ 1, got 1e-12"),
    ("refresh:\n  bandwidth_pages_per_unit: 100000000000000000000\n",
     "refresh.bandwidth_pages_per_unit", 2, "must be ≤ 1000000000000"),
    # wrong types
    ("crawler:\n  workers: \"8\"\n", "crawler.workers", 2, "whole number, got '8'; write it "
                                                         "without quotes"),
    ("crawler:\n  workers: 8.5\n", "crawler.workers", 2, "whole number, got 8.5"),
    # as written: 8.0 is no whole number to YAML, though it prints as 8
    ("crawler:\n  workers: 8.0\n", "crawler.workers", 2, "whole number, got 8.0"),
    ("crawler:\n  expected_urls: 1e7\n", "crawler.expected_urls", 2, "whole number, got 1e7"),
    ("crawler:\n  workers: yes\n", "crawler.workers", 2, "yes, which YAML reads as true"),
    ("crawler:\n  workers:\n", "crawler.workers", 2, "got nothing"),
    ("crawler:\n  user_agent: no\n", "crawler.user_agent", 2,
     'must be text, got no, which YAML reads as false; write it in quotes ("no")'),
    ("crawler:\n  user_agent: 12\n", "crawler.user_agent", 2, 'quotes ("12")'),
    ("crawler:\n  follow_nofollow: \"yes\"\n", "crawler.follow_nofollow", 2,
     "true or false, got 'yes'"),
    ("log:\n  level: off\n", "log.level", 2,
     "one of debug, info, warning, error; got off, which YAML reads as false"),
    ("log:\n  level: verbose\n", "log.level", 2, "one of debug, info, warning, error"),
    ("seeds: https://example.org/\n", "seeds", 1, "must be a list"),
    ("seeds:\n  - https://a.example/\n  - [x]\n", "seeds[1]", 3, "must be text, got a list"),
    ("crawler: 5\n", "crawler", 1, "must be a section of keys, got 5"),
    ("crawler:\n  limits: [1, 2]\n", "crawler.limits", 2, "section of keys, got a list"),
    # checked values
    ("seeds:\n  - https://a.example/\n  - ftp://b.example/\n", "seeds[1]", 3,
     "http:// or https:// URL"),
    ("sitemaps: [\"http://\"]\n", "sitemaps[0]", 1, "URL with a host"),
    ("crawler:\n  contact_url: mailto:me@example.org\n", "crawler.contact_url", 2,
     "http:// or https://"),
    ("scope:\n  allow_patterns:\n    - ok\n    - \"a(\"\n", "scope.allow_patterns[1]", 4,
     "not a valid regular expression"),
    ("scope:\n  allowed_domains: [\"https://example.org/\"]\n",
     "scope.allowed_domains[0]", 2, "host name like example.org"),
    ("scope:\n  denied_domains: [\"*.example.org\"]\n", "scope.denied_domains[0]", 2,
     "no scheme, port, path or wildcard"),
    ("crawler:\n  skip_suffixes: [jpg]\n", "crawler.skip_suffixes[0]", 2, "starts with a dot"),
    ("crawler:\n  accept_content_types: []\n", "crawler.accept_content_types", 2,
     "must not be empty"),
    ("crawler:\n  accept_content_types: [\"text/html; charset=utf-8\"]\n",
     "crawler.accept_content_types[0]", 2, "media type"),
    ("crawler:\n  user_agent: \"Xyro\\r\\nX-Evil: 1\"\n", "crawler.user_agent", 2,
     "HTTP header"),
    ("storage:\n  database: \"\"\n", "storage.database", 2, "file-system path"),
    ("crawler:\n  cpus: []\n", "crawler.cpus", 2, "must not be empty"),
    ("crawler:\n  cpus: [-1]\n", "crawler.cpus[0]", 2, "must be ≥ 0, got -1"),
    ("ranking:\n  cluster: sched.example:8786\n", "ranking.cluster", 2,
     "Dask scheduler address like tcp://host:8786"),
    ("ranking:\n  cluster_timeout_s: 0\n", "ranking.cluster_timeout_s", 2, "must be > 0"),
]


@pytest.mark.parametrize(("text", "key", "line", "words"), FILE_CASES,
                         ids=[c[1] + ":" + c[3][:24] for c in FILE_CASES])
def test_file_value_errors_name_key_and_line(fails: Callable[..., ConfigError], text: str,
                                             key: str, line: int, words: str) -> None:
    err = fails(text)
    assert (err.key, err.line) == (key, line), str(err)
    assert err.source is not None and err.source.endswith("xyro.yaml")
    assert words in err.reason, str(err)
    assert check_one_line(err) == f"config error: {key} ({err.source} line {line}): {err.reason}"


def test_message_format_matches_the_documented_shape(fails: Callable[..., ConfigError],
                                                     write: Callable[[str], Path]) -> None:
    path = write("crawler:\n  workers: 0\n")
    err = fails("crawler:\n  workers: 0\n")
    assert str(err) == f"config error: crawler.workers ({path} line 2): must be ≥ 1, got 0"


@pytest.mark.parametrize(("text", "key", "line", "words"), [
    ("frobnicate: 1\n", "frobnicate", 1, "unknown key; the keys here are: seeds, sitemaps"),
    ("crawler:\n  wrkers: 3\n", "crawler.wrkers", 2, "did you mean crawler.workers?"),
    ("crawler:\n  limits:\n    max_redirect: 3\n", "crawler.limits.max_redirect", 3,
     "did you mean crawler.limits.max_redirects?"),
    ("workers: 3\n", "workers", 1, "workers belongs under crawler"),
    ("crawler:\n  delay_s: 1\n", "crawler.delay_s", 2, "belongs under crawler.politeness"),
])
def test_unknown_keys_are_errors_with_a_suggestion(fails: Callable[..., ConfigError],
                                                   text: str, key: str, line: int,
                                                   words: str) -> None:
    err = fails(text)
    assert (err.key, err.line) == (key, line)
    assert words in err.reason
    check_one_line(err)


@pytest.mark.parametrize(("text", "key", "line", "words"), [
    ("crawler:\n  workers: 8: 9\n", "crawler.workers", 2, "mapping values are not allowed"),
    ("crawler:\n\tworkers: 8\n", "crawler.workers", 2, "tabs"),
    ("seeds: [\"https://a.example/\"\nlog:\n  level: info\n", None, None, "bad YAML"),
    ("crawler:\n  user_agent: \"unclosed\n", "crawler.user_agent", None, "bad YAML"),
])
def test_bad_yaml_syntax_names_line_and_nearest_key(fails: Callable[..., ConfigError],
                                                    text: str, key: str | None,
                                                    line: int | None, words: str) -> None:
    err = fails(text)
    assert words in err.reason
    assert err.line is not None
    if line is not None:
        assert err.line == line
    if key is not None:
        assert err.key == key
    check_one_line(err)


def test_duplicate_key_names_both_lines(fails: Callable[..., ConfigError]) -> None:
    err = fails("crawler:\n  workers: 8\n  user_agent: \"A/1\"\n  workers: 9\n")
    assert (err.key, err.line) == ("crawler.workers", 4)
    assert "duplicate key (first written on line 2)" in err.reason
    check_one_line(err)


def test_duplicate_section_is_an_error(fails: Callable[..., ConfigError]) -> None:
    err = fails("log:\n  level: info\nlog:\n  format: json\n")
    assert (err.key, err.line) == ("log", 3)


@pytest.mark.parametrize(("text", "words"), [
    ("- a\n- b\n", "got a list"),
    ("just text\n", "got the value 'just text'"),
    ("42\n", "got the value '42'"),
])
def test_top_level_must_be_a_mapping(fails: Callable[..., ConfigError], text: str,
                                     words: str) -> None:
    err = fails(text)
    assert err.line == 1 and "top level must be a mapping" in err.reason and words in err.reason
    check_one_line(err)


def test_non_text_key_is_an_error(fails: Callable[..., ConfigError]) -> None:
    err = fails("log:\n  no: 3\n")
    assert (err.key, err.line) == ("log.no", 2)
    assert "not read as text" in err.reason


def test_several_errors_report_the_first_line_and_count_the_rest(
        fails: Callable[..., ConfigError]) -> None:
    err = fails("log:\n  level: loud\ncrawler:\n  workers: 0\n  wrkers: 1\n")
    assert (err.key, err.line) == ("log.level", 2)
    assert err.reason.endswith("(and 2 more errors)")


@pytest.mark.parametrize(("text", "key", "line", "words"), [
    # The key the user set is named, even when the other side of the rule is a default.
    ("refresh:\n  min_interval_units: 100\n", "refresh.min_interval_units", 2,
     "must be ≤ refresh.max_interval_units (90), got 100"),
    ("refresh:\n  max_interval_units: 0\n", "refresh.max_interval_units", 2, "≥ 1, got 0"),
    ("crawler:\n  limits:\n    read_timeout_s: 120\n", "crawler.limits.read_timeout_s", 3,
     "must be ≤ crawler.limits.deadline_s (60), got 120"),
    ("crawler:\n  limits:\n    deadline_s: 20\n", "crawler.limits.deadline_s", 3,
     "must be ≥ crawler.limits.read_timeout_s (30), got 20"),
    ("crawler:\n  limits:\n    max_decoded_bytes: 1000\n",
     "crawler.limits.max_decoded_bytes", 3, "≥ crawler.limits.max_body_bytes (10485760)"),
    ("loader:\n  max_document_bytes: 99999999\n", "loader.max_document_bytes", 2,
     "≤ crawler.limits.max_decoded_bytes (52428800), got 99999999"),
    ("loader:\n  max_cache_bytes: 1000\n", "loader.max_cache_bytes", 2,
     "must be ≥ loader.max_document_bytes (8388608), got 1000"),
])
def test_cross_field_rules_name_the_key_that_was_set(fails: Callable[..., ConfigError],
                                                     text: str, key: str, line: int,
                                                     words: str) -> None:
    err = fails(text)
    assert (err.key, err.line) == (key, line), str(err)
    assert words in err.reason
    check_one_line(err)


def test_cross_field_rule_between_two_written_keys(fails: Callable[..., ConfigError]) -> None:
    err = fails("refresh:\n  min_interval_units: 10\n  max_interval_units: 5\n")
    assert err.key == "refresh.max_interval_units" and err.line == 3
    assert "must be ≥ refresh.min_interval_units (10), got 5" in err.reason


def test_command_line_side_of_a_cross_field_rule_is_named(
        fails: Callable[..., ConfigError]) -> None:
    err = fails("refresh:\n  max_interval_units: 30\n",
                overrides=["refresh.min_interval_units=40"])
    assert (err.key, err.source, err.line) == ("refresh.min_interval_units", "command line",
                                               None)


# --- environment --------------------------------------------------------------------------

@pytest.mark.parametrize(("env", "key", "words"), [
    ({"XYRO_FROBNICATE": "1"}, "frobnicate", "unknown key"),
    ({"XYRO_CRAWLER__WRKERS": "1"}, "crawler.wrkers", "did you mean crawler.workers?"),
    ({"XYRO_CRAWLER_WORKERS": "8"}, "crawler_workers", "double underscore: "
                                                       "XYRO_CRAWLER__WORKERS"),
    ({"XYRO_CRAWLER__WORKERS": "many"}, "crawler.workers", "whole number, got 'many'"),
    ({"XYRO_CRAWLER__WORKERS": "0"}, "crawler.workers", "must be ≥ 1, got 0"),
    ({"XYRO_CRAWLER__WORKERS": ""}, "crawler.workers", "got nothing"),
    ({"XYRO_CRAWLER__WORKERS": "yes"}, "crawler.workers", "yes, which YAML reads as true"),
    ({"XYRO_CRAWLER__WORKERS": "{}"}, "crawler.workers", "whole number, got a section"),
    ({"XYRO_LOG__LEVEL": "loud"}, "log.level", "one of debug, info, warning, error"),
    ({"XYRO_SEEDS": "[\"https://a.example/\", ftp://b/]"}, "seeds[1]", "http:// or https://"),
    ({"XYRO_SEEDS": "[unclosed"}, "seeds", "not a valid YAML value"),
    ({"XYRO_CRAWLER__WORKERS__X": "1"}, "crawler.workers.x", "single value, not a section"),
])
def test_bad_environment_variables(fails: Callable[..., ConfigError], env: dict[str, str],
                                   key: str, words: str) -> None:
    err = fails(env=env)
    name = next(iter(env))
    assert err.key == key and err.source == f"environment {name}" and err.line is None
    assert words in err.reason, str(err)
    check_one_line(err)


def test_empty_env_segment_is_an_error(fails: Callable[..., ConfigError]) -> None:
    err = fails(env={"XYRO_CRAWLER____WORKERS": "8"})
    assert "double" in err.reason or "two underscores" in err.reason
    assert err.source == "environment XYRO_CRAWLER____WORKERS"


def test_environment_error_beats_the_file_line(fails: Callable[..., ConfigError]) -> None:
    err = fails("crawler:\n  workers: 8\n", env={"XYRO_CRAWLER__WORKERS": "-1"})
    assert (err.source, err.line) == ("environment XYRO_CRAWLER__WORKERS", None)


# --- command line ----------------------------------------------------------------------------

@pytest.mark.parametrize(("item", "key", "words"), [
    ("crawler.workers", None, "expected KEY=VALUE such as crawler.workers=8"),
    ("=8", None, "expected KEY=VALUE"),
    ("crawler..workers=8", "crawler..workers", "dotted names"),
    ("crawler.wrkers=8", "crawler.wrkers", "did you mean crawler.workers?"),
    ("nope=1", "nope", "unknown key"),
    ("crawler.workers=0", "crawler.workers", "must be ≥ 1, got 0"),
    ("crawler.workers=[1", "crawler.workers", "not a valid YAML value"),
    ("crawler=5", "crawler", "must be a section of keys, got 5"),
    ("crawler.limits.max_redirects=21", "crawler.limits.max_redirects", "≤ 20"),
])
def test_bad_overrides(fails: Callable[..., ConfigError], item: str, key: str | None,
                       words: str) -> None:
    err = fails(overrides=[item])
    assert err.key == key and err.source == "command line" and err.line is None
    assert words in err.reason, str(err)
    check_one_line(err)


# --- files --------------------------------------------------------------------------------------

def test_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml", env={})
    assert info.value.source == str(tmp_path / "nope.yaml")
    assert "no such file" in info.value.reason
    check_one_line(info.value)


def test_missing_file_named_by_xyro_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, env={"XYRO_CONFIG": str(tmp_path / "gone.yaml")})
    assert "no such file (named by XYRO_CONFIG)" in info.value.reason


def test_directory_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path, env={})
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"log:\n  level: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        load_config(binary, env={})
    assert (info.value.reason, info.value.line) == ("not UTF-8 text", 2)


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_config(big, env={})


@pytest.mark.parametrize("address", [
    "sched.example:8786", "http://sched.example:8786", "tcp://sched.example",
    "tcp://sched.example:0", "tcp://sched.example:65536", "tcp://:8786",
    "tcp://sched example:8786", "tcp://[::1:8786", "tcp://[not-ip]:8786",
    "tcp://sched.example:8786/path", "tcp://-bad.example:8786"])
def test_malformed_cluster_address_is_a_clear_error(fails: Callable[..., ConfigError],
                                                    address: str) -> None:
    err = fails(f"ranking:\n  cluster: \"{address}\"\n")
    assert (err.key, err.line) == ("ranking.cluster", 2), str(err)
    assert "Dask scheduler address like tcp://host:8786" in err.reason
    assert repr(address) in err.reason
    check_one_line(err)


@pytest.mark.parametrize("address", [
    "tcp://sched.example:8786", "tls://10.0.0.5:8786", "tcp://[::1]:8786",
    "tcp://127.0.0.1:1", "tcp://h:65535"])
def test_cluster_address_accepted(address: str) -> None:
    assert load_config(None, {}, [f"ranking.cluster={address}"]).ranking.cluster == address


def test_cluster_unset_or_empty_is_one_host() -> None:
    assert load_config(None, {}, []).ranking.cluster is None
    assert load_config(None, {}, ["ranking.cluster="]).ranking.cluster is None


def _int_keys(model: type, prefix: str = "") -> list[str]:
    """Dotted names of every integer key of the configuration model."""
    from pydantic import BaseModel

    keys = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys += _int_keys(kind, f"{prefix}{name}.")
        elif kind is int or str(kind) in ("int | None", "typing.Optional[int]"):
            keys.append(f"{prefix}{name}")
    return keys


def test_every_integer_key_has_an_upper_bound() -> None:
    # An unbounded key passed validation, then overflowed a C integer far from the config
    # (a deque's maxlen, an SQLite parameter): a traceback at start, exit 1, systemd's
    # restart loop. Every integer key refuses 2**63 as a config error instead.
    from xyro.config import XyroConfig

    keys = _int_keys(XyroConfig)
    assert len(keys) >= 27 and "publication.trust_window" in keys
    for key in keys:
        with pytest.raises(ConfigError) as info:
            load_config(None, {}, [f"{key}={2**63}"])
        assert info.value.key == key and "must be ≤" in info.value.reason, key
