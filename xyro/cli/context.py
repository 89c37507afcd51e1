"""The CLI's shared context (DESIGN.md §1): the App, built lazily from the configuration on
first use (so ``xyro CMD --help`` works with a broken config), and the formatter of command
summaries.

Every command module (xyro/cli/*.py) imports this module, never the group module
``xyro.cli`` and never another command module: no import cycle, one context.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import click

from xyro.app import App
from xyro.clock import Clock
from xyro.config import XyroConfig
from xyro.config_load import load_config
from xyro.errors import UsageError
from xyro.net.urls import canonicalize
from xyro.service.logs import setup_logging


class FiniteFloat(click.FloatRange):
    """``click.FloatRange`` that also refuses nan and ±inf: every comparison with nan is
    false, so a range alone lets ``--seconds nan`` through (a run with no time limit)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number

    def _describe_range(self) -> str:
        # click describes a range with no bounds as "x<=None" in --help.
        if self.min is None and self.max is None:
            return ""
        return str(super()._describe_range())


class LazyApp:
    """The App of one invocation, built on first use from the config options."""

    def __init__(self, path: Path | None, overrides: tuple[str, ...], demo: bool = False) -> None:
        self.path, self.overrides, self.demo, self.app = path, overrides, demo, None
        self.configured: XyroConfig | None = None  # before --demo moved the storage

    def get(self, clock: Clock | None = None) -> App:
        """The App (built on the first call, with ``clock`` if given, else the wall clock)."""
        if self.app is None:
            config = self.configured = load_config(self.path, os.environ, self.overrides)
            setup_logging(config.log.level, config.log.format)   # before any store is read
            if self.demo:
                from xyro.service.demo import demo_view
                config = demo_view(config)
            self.app = App(config) if clock is None else App(config, clock)
            if self.demo:
                self.app.missing_hint = ("run `xyro demo` first: --demo reads the demo's own "
                                         "database")
        return self.app


def app_of(ctx: click.Context) -> App:
    """The App of the current invocation (built on first use)."""
    return ctx.find_object(LazyApp).get()


def checked_output(app: App, output: Path | None) -> Path | None:
    """``output`` (``-o FILE``), unless writing it would destroy what Xyro keeps: the metadata
    database, its -wal, -shm or -journal file, or a file of the warehouse (then a usage
    error, exit 2, before anything is opened)."""
    if output is None:
        return None
    target = output.resolve()
    database = app.database_path.resolve()
    kept = [database, *(database.with_name(database.name + s)
                        for s in ("-wal", "-shm", "-journal"))]
    same = any(target == k or (target.exists() and k.exists() and os.path.samefile(target, k))
               for k in kept)
    if same or target.is_relative_to(Path(app.config.storage.warehouse_dir).resolve()):
        what = "the metadata database" if same else "a file of the warehouse"
        raise UsageError(f"-o {output} is {what} ({database if same else target}); writing "
                         "it would destroy stored data: choose another path")
    return output


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
