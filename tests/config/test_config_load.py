"""Loading: precedence, where the file comes from, the shipped file, immutability, dump."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pydantic
import pytest

from xyro.config import XyroConfig
from xyro.config_load import ConfigError, all_key_paths, load_config
from xyro.config_yaml import load_document

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "xyro.yaml"

FILE = "crawler:\n  workers: 2\n  politeness:\n    delay_s: 1.5\nlog:\n  level: debug\n"


def test_defaults_only_without_a_file() -> None:
    assert load_config(None, env={}) == XyroConfig()


def test_precedence_defaults_file_env_command_line(load: Callable[..., XyroConfig]) -> None:
    assert load(FILE).crawler.workers == 2                       # file beats default 64
    assert load(FILE).crawler.politeness.delay_s == 1.5
    env = {"XYRO_CRAWLER__WORKERS": "8"}
    assert load(FILE, env).crawler.workers == 8                  # environment beats file
    assert load(FILE, env).crawler.politeness.delay_s == 1.5    # siblings kept
    cfg = load(FILE, env, ["crawler.workers=16"])
    assert cfg.crawler.workers == 16                             # command line beats env
    assert cfg.log.level == "debug"                              # untouched file key kept
    assert cfg.crawler.user_agent == "Xyro/0.1"                  # untouched default kept


def test_later_override_wins_and_sections_merge(load: Callable[..., XyroConfig]) -> None:
    cfg = load(FILE, {"XYRO_CRAWLER__POLITENESS": "{max_crawl_delay_s: 9}"},
               ["crawler.workers=3", "crawler.workers=4"])
    assert cfg.crawler.workers == 4
    assert cfg.crawler.politeness.max_crawl_delay_s == 9.0
    assert cfg.crawler.politeness.delay_s == 1.5                 # merged, not replaced


def test_env_values_are_yaml_scalars(load: Callable[..., XyroConfig]) -> None:
    cfg = load(env={"XYRO_STORAGE__DATABASE": "/x.db", "XYRO_SCOPE__ALLOW_PRIVATE_ADDRESSES":
                    "true", "XYRO_RANKING__TOLERANCE": "1e-6",
                    "XYRO_SEEDS": "[\"https://a.example/\", \"https://b.example/?q=1\"]",
                    "XYRO_CONFIG": ""})
    assert cfg.storage.database == "/x.db"
    assert cfg.scope.allow_private_addresses is True
    assert cfg.ranking.tolerance == 1e-6
    assert cfg.seeds == ("https://a.example/", "https://b.example/?q=1")


def test_shell_friendly_text_and_single_list_items(load: Callable[..., XyroConfig]) -> None:
    cfg = load(overrides=["crawler.user_agent=no", "seeds=https://a.example/?x=1",
                          "log.level=warning", "scope.deny_patterns=[]",
                          "crawler.contact_url=https://ops.example/bot"])
    assert cfg.crawler.user_agent == "no"      # a text key takes the text as typed
    assert cfg.seeds == ("https://a.example/?x=1",)
    assert cfg.log.level == "warning"
    assert cfg.scope.deny_patterns == ()
    assert cfg.crawler.contact_url == "https://ops.example/bot"
    assert load(overrides=["crawler.user_agent=\"quoted\""]).crawler.user_agent == "quoted"


def test_xyro_config_names_the_file(write: Callable[[str], Path]) -> None:
    path = write(FILE, "elsewhere.yaml")
    assert load_config(None, env={"XYRO_CONFIG": str(path)}).crawler.workers == 2


def test_explicit_path_beats_xyro_config(write: Callable[[str], Path], tmp_path: Path) -> None:
    path = write(FILE)
    cfg = load_config(path, env={"XYRO_CONFIG": str(tmp_path / "absent.yaml")})
    assert cfg.crawler.workers == 2


def test_default_path_in_working_directory(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "xyro.yaml").write_text(FILE)
    assert load_config(None, env={}).crawler.workers == 2       # cwd is tmp_path (conftest)


def test_empty_file_and_empty_sections_keep_defaults(load: Callable[..., XyroConfig]) -> None:
    assert load("") == XyroConfig()
    assert load("# nothing but comments\n") == XyroConfig()
    assert load("crawler:\n  # workers: 8\n  limits:\nlog:\n") == XyroConfig()


def test_yaml_conveniences(load: Callable[..., XyroConfig]) -> None:
    cfg = load("crawler:\n  expected_urls: 10_000_000\nranking:\n  tolerance: 1e-9\n"
               "refresh:\n  time_unit_s: 3600\n")
    assert cfg.crawler.expected_urls == 10_000_000
    assert cfg.ranking.tolerance == 1e-9                          # YAML 1.1 would say "1e-9"
    assert cfg.refresh.time_unit_s == 3600.0 and isinstance(cfg.refresh.time_unit_s, float)


def test_anchors_and_merge_keys_work(load: Callable[..., XyroConfig]) -> None:
    cfg = load("seeds: &u [\"https://a.example/\"]\nsitemaps: *u\n"
               "log:\n  <<: {level: error, format: json}\n  format: text\n")
    assert cfg.sitemaps == cfg.seeds == ("https://a.example/",)
    assert (cfg.log.level, cfg.log.format) == ("error", "text")   # explicit beats merged


def test_normalization(load: Callable[..., XyroConfig]) -> None:
    cfg = load("scope:\n  allowed_domains: [Example.ORG.]\ncrawler:\n  skip_suffixes: [.JPG]\n"
               "  accept_content_types: [Text/HTML]\n")
    assert cfg.scope.allowed_domains == ("example.org",)
    assert cfg.crawler.skip_suffixes == (".jpg",)
    assert cfg.crawler.accept_content_types == ("text/html",)


def test_billion_laughs_ends_quickly_in_an_error(fails: Callable[..., ConfigError]) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    start = time.process_time()
    err = fails("\n".join(lines) + "\n")
    assert time.process_time() - start < 5
    assert err.key == "a0" and "unknown key" in err.reason


def test_deep_nesting_is_an_error(fails: Callable[..., ConfigError]) -> None:
    err = fails("seeds: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deeply" in err.reason


# --- the object ------------------------------------------------------------------------------

def test_config_is_immutable_and_hashable(load: Callable[..., XyroConfig]) -> None:
    cfg = load(FILE)
    with pytest.raises(pydantic.ValidationError):
        cfg.crawler.workers = 3  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        cfg.log = cfg.log  # type: ignore[misc]
    assert isinstance(cfg.seeds, tuple)
    assert hash(cfg) == hash(load(FILE)) and cfg == load(FILE)
    assert {cfg: 1}[load(FILE)] == 1


def test_dump_yaml_round_trips(load: Callable[..., XyroConfig], write: Callable[[str], Path]
                               ) -> None:
    cfg = load(FILE, overrides=["seeds=https://a.example/", "crawler.user_agent=no",
                                "ranking.tolerance=1e-12"])
    dumped = cfg.dump_yaml()
    assert load_config(write(dumped, "dumped.yaml"), env={}) == cfg
    assert load_document(dumped, require_mapping=True).data["crawler"]["user_agent"] == "no"


# --- the shipped, documented file --------------------------------------------------------------

def test_shipped_file_is_exactly_the_defaults() -> None:
    assert load_config(SHIPPED, env={}) == XyroConfig()


def test_shipped_file_is_the_default_path(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    shutil.copy(SHIPPED, tmp_path / "config" / "xyro.yaml")
    assert load_config(None, env={}) == XyroConfig()


def test_every_key_is_written_and_commented_in_the_shipped_file() -> None:
    text = SHIPPED.read_text(encoding="utf-8")
    doc = load_document(text, require_mapping=True)
    lines = text.splitlines()
    for path in all_key_paths():
        assert path in doc.lines, f"{'.'.join(path)} is missing from config/xyro.yaml"
        line = doc.lines[path]
        # The comment above the key (or its section's inline list) documents it.
        above = lines[line - 2].strip() if line >= 2 else ""
        assert above.startswith("#"), f"{'.'.join(path)} (line {line}) has no comment above"


def test_coverage_check_sees_a_missing_key(write: Callable[[str], Path]) -> None:
    text = re.sub(r"\n  workers: 64\n", "\n", SHIPPED.read_text(encoding="utf-8"))
    doc = load_document(text, require_mapping=True)
    assert ("crawler", "workers") not in doc.lines
    assert ("crawler", "user_agent") in doc.lines


def test_whole_section_from_env_merges_and_keeps_origins(load: Callable[..., XyroConfig],
                                                         fails: Callable[..., ConfigError]
                                                         ) -> None:
    assert load(FILE, {"XYRO_CRAWLER": "{}"}).crawler.workers == 2
    assert load(FILE, overrides=["crawler.politeness={}"]).crawler.politeness.delay_s == 1.5
    # A bad file key next to an env-set section is still blamed on the file line.
    err = fails("crawler:\n  workers: 0\n", env={"XYRO_CRAWLER": "{user_agent: B/2}"})
    assert (err.key, err.line) == ("crawler.workers", 2)
    err = fails(FILE, env={"XYRO_CRAWLER": "{workers: -3}"})
    assert (err.key, err.source) == ("crawler.workers", "environment XYRO_CRAWLER")
