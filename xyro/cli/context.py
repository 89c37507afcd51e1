"""The CLI's shared context (DESIGN.md §1): the App, built lazily from the configuration on
first use (so ``xyro CMD --help`` works with a broken config), and the formatter of command
summaries.

Every command module (xyro/cli/*.py) imports this module, never the group module
``xyro.cli`` and never another command module: no import cycle, one context.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from xyro.app import App
from xyro.clock import Clock
from xyro.config_load import load_config
from xyro.errors import UsageError
from xyro.net.urls import canonicalize
from xyro.service.logs import setup_logging


class LazyApp:
    """The App of one invocation, built on first use from the config options."""

    def __init__(self, path: Path | None, overrides: tuple[str, ...], demo: bool = False) -> None:
        self.path, self.overrides, self.demo, self.app = path, overrides, demo, None

    def get(self, clock: Clock | None = None) -> App:
        """The App (built on the first call, with ``clock`` if given, else the wall clock)."""
        if self.app is None:
            config = load_config(self.path, os.environ, self.overrides)
            if self.demo:
                from xyro.service.demo import demo_storage
                config = demo_storage(config)
            setup_logging(config.log.level, config.log.format)
            self.app = App(config) if clock is None else App(config, clock)
        return self.app


def app_of(ctx: click.Context) -> App:
    """The App of the current invocation (built on first use)."""
    return ctx.find_object(LazyApp).get()


def format_status(report: dict[str, Any]) -> str:
    """Render a command's summary dictionary as aligned sections (``crawl``, ``demo``,
    ``rank``, ``plan``); ``xyro status`` has its own text (:mod:`xyro.cli.status`)."""
    from xyro.cli.status_text import format_report

    return format_report(report)


def canonical_url(url: str, what: str) -> str:
    """``url`` canonicalized, or a usage error (exit 2) naming ``what`` it was given as."""
    canonical = canonicalize(url)
    if canonical is None:
        raise UsageError(f"{what} {url!r} is not an http(s) URL Xyro can fetch: give an "
                         "absolute http:// or https:// URL")
    return canonical
