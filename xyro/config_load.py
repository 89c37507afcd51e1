"""Loading Xyro's configuration: defaults < file < XYRO_* < --set, into one
:class:`~xyro.config.XyroConfig`, and the one error a user sees.

Environment variables and ``--set`` values are parsed as YAML too, with two conveniences for
text that has no quotes around it on a shell line: a text key takes the raw text when YAML
would read it as something else (``--set crawler.user_agent=no``), and a list key takes a
single item without brackets (``--set seeds=https://example.org/``). A section written with
nothing under it (``crawler:`` with every line commented out) keeps its defaults. Each key
remembers where it was last set (its origin: file and line, environment variable, command
line). Any problem becomes one :class:`ConfigError` naming the key, where it was set and why;
pydantic's own wording never reaches the user.
"""

from __future__ import annotations

import difflib
import json
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from xyro.config import XyroConfig
from xyro.config_yaml import KeyPath, YamlProblem, describe, format_number, key_near, \
    load_document, looks_non_finite, looks_numeric, parse_setting, read_text
from xyro.errors import XyroError

DEFAULT_PATH = Path("config") / "xyro.yaml"
CONFIG_ENV = "XYRO_CONFIG"
ENV_PREFIX = "XYRO_"
MAX_FILE_BYTES = 1 << 20


class ConfigError(XyroError):
    """A bad configuration value, file or setting: one line naming the key; exit code 2."""

    exit_code = 2

    def __init__(self, reason: str, *, key: str | None = None, line: int | None = None,
                 source: str | None = None) -> None:
        self.reason, self.key, self.line, self.source = reason, key, line, source
        where = (source or "") + (f" line {line}" if line is not None else "")
        head = "config error" + (f": {key}" if key else "")
        super().__init__(f"{head} ({where}): {reason}" if where else f"{head}: {reason}")


# --- loading -----------------------------------------------------------------------------

def load_config(path: Path | None = None, env: Mapping[str, str] = os.environ,
                overrides: Sequence[str] = ()) -> XyroConfig:
    """Build the configuration: defaults < YAML file < ``XYRO_*`` environment < overrides.

    ``path=None`` means ``$XYRO_CONFIG`` if set, else ``./config/xyro.yaml`` if it exists,
    else defaults only. Overrides are ``"crawler.workers=8"`` strings. Environment names
    nest with a double underscore (``XYRO_CRAWLER__WORKERS=8``); every ``XYRO_*`` name
    other than ``XYRO_CONFIG`` must be a key. Raises :class:`ConfigError`.
    """
    layers = _Layers()
    path = Path(path) if path is not None else None
    if path is None and env.get(CONFIG_ENV):
        path, layers.file_named_by = Path(env[CONFIG_ENV]), f"named by {CONFIG_ENV}"
    if path is not None:
        layers.add_file(path)
    elif DEFAULT_PATH.is_file():
        layers.add_file(DEFAULT_PATH)
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name != CONFIG_ENV:
            layers.add_env(name, env[name])
    for item in overrides:
        layers.add_override(item)
    return layers.validate()


@dataclass(frozen=True)
class _Origin:
    source: str
    line: int | None = None
    rank: int = 0                 # 1 file, 2 environment, 3 command line
    plain_text: str | None = None  # unquoted YAML text that was not read as text


class _Layers:
    """The merged raw settings and, for each key path, where it was last set."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.origins: dict[KeyPath, _Origin] = {}
        self.fallback_source = "defaults"
        self.file_named_by = ""

    def add_file(self, path: Path) -> None:
        source = str(path)
        how = f" ({self.file_named_by})" if self.file_named_by else ""
        try:
            text = read_text(path, MAX_FILE_BYTES)
        except FileNotFoundError:
            raise ConfigError(f"no such file{how}; give an existing file, or copy the "
                              f"documented defaults from config/xyro.yaml", source=source) from None
        except YamlProblem as exc:
            raise ConfigError(exc.reason + how, line=exc.line, source=source) from None
        try:
            doc = load_document(text, require_mapping=True)
        except YamlProblem as exc:
            near = exc.path or (key_near(text, exc.line) if exc.line else ())
            raise ConfigError(exc.reason, key=_dotted(near) or None, line=exc.line,
                              source=source) from None
        self.data, self.fallback_source = doc.data, source
        self.origins = {p: _Origin(source, line, 1, doc.plain_text.get(p))
                        for p, line in doc.lines.items()}
        for p, text_ in doc.plain_text.items():
            self.origins.setdefault(p, _Origin(source, None, 1, text_))

    def add_env(self, name: str, text: str) -> None:
        source = f"environment {name}"
        parts = tuple(name[len(ENV_PREFIX):].lower().split("__"))
        if not all(parts):
            raise ConfigError("empty key segment; nest keys with exactly two underscores, "
                              "e.g. XYRO_CRAWLER__WORKERS=8", key=None, source=source)
        target = _schema_target(parts, source, env_name=name)
        self._set(parts, _setting(text, target, parts, source),
                  _Origin(source, rank=2, plain_text=text.strip()))

    def add_override(self, item: str) -> None:
        source = "command line"
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"expected KEY=VALUE such as crawler.workers=8, got {item!r}",
                              source=source)
        parts = tuple(key.split("."))
        if not all(parts):
            raise ConfigError(f"bad key {key!r}; keys are dotted names like crawler.workers",
                              key=key, source=source)
        target = _schema_target(parts, source)
        self._set(parts, _setting(text, target, parts, source),
                  _Origin(source, rank=3, plain_text=text.strip()))

    def _set(self, parts: tuple[str, ...], value: Any, origin: _Origin) -> None:
        if isinstance(value, dict) and _section_at(parts) is not None:
            # A section given whole merges key by key; each key keeps its own origin.
            for name, item in value.items():
                self._set(parts + (name,), item, origin)
            return
        self.origins = {p: o for p, o in self.origins.items() if p[:len(parts)] != parts}
        self.origins[parts] = origin
        node = self.data
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                return  # the lower layer wrote a non-section here; validation reports it
            node = child
        node[parts[-1]] = value

    def validate(self) -> XyroConfig:
        _fill_empty_sections(self.data, XyroConfig)
        try:
            return XyroConfig.model_validate(self.data)
        except ValidationError as exc:
            raise _Translator(self).first(exc) from None


def _setting(text: str, target: Any, parts: tuple[str, ...], source: str) -> Any:
    try:
        return parse_setting(text, _kind(target))
    except YamlProblem as exc:
        raise ConfigError(exc.reason, key=_dotted(parts), source=source) from None


def _fill_empty_sections(data: dict[str, Any], model: type[BaseModel]) -> None:
    """``section:`` with nothing under it (YAML null) keeps the section's defaults."""
    for name, info in model.model_fields.items():
        if _is_section(info.annotation) and name in data:
            if data[name] is None:
                data[name] = {}
            if isinstance(data[name], dict):
                _fill_empty_sections(data[name], info.annotation)


# --- the schema, as data -----------------------------------------------------------------

def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _kind(target: Any) -> str:
    """'section', 'text' (str or a choice of strings), 'list' or 'value'."""
    if _is_section(target):
        return "section"
    annotation = target.annotation
    # Optional text too (metrics.listen): "[::1]:9464" on a shell line is text, not YAML.
    if annotation in (str, str | None) or typing.get_origin(annotation) is Literal:
        return "text"
    return "list" if typing.get_origin(annotation) is tuple else "value"


def _schema_target(parts: Sequence[str], source: str, env_name: str | None = None) -> Any:
    """The section class or the FieldInfo that ``parts`` names; ConfigError if none."""
    target: Any = XyroConfig
    for depth, part in enumerate(parts):
        if not _is_section(target):
            raise ConfigError(f"{_dotted(parts[:depth])} is a single value, not a section",
                              key=_dotted(parts), source=source)
        if part not in target.model_fields:
            raise ConfigError(_unknown_key_reason(tuple(parts[:depth + 1]), env_name),
                              key=_dotted(parts), source=source)
        info = target.model_fields[part]
        target = info.annotation if _is_section(info.annotation) else info
    return target


def all_key_paths(model: type[BaseModel] = XyroConfig, prefix: KeyPath = ()) -> list[KeyPath]:
    """Every leaf key of the configuration as a path, in declaration order."""
    paths: list[KeyPath] = []
    for name, info in model.model_fields.items():
        if _is_section(info.annotation):
            paths += all_key_paths(info.annotation, prefix + (name,))
        else:
            paths.append(prefix + (name,))
    return paths


def _section_at(path: KeyPath) -> type[BaseModel] | None:
    target: Any = XyroConfig
    for part in path:
        info = target.model_fields.get(part) if _is_section(target) else None
        if info is None or not _is_section(info.annotation):
            return None
        target = info.annotation
    return target


def _unknown_key_reason(path: KeyPath, env_name: str | None = None) -> str:
    parent, name = path[:-1], str(path[-1])
    section = _section_at(parent)
    known = list(section.model_fields) if section else []
    if env_name is not None:
        flat = "_".join(str(p) for p in path)
        for leaf in all_key_paths():
            if "_".join(map(str, leaf)) == flat:
                proper = ENV_PREFIX + "__".join(map(str, leaf)).upper()
                return f"unknown key; nest keys with a double underscore: {proper}"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {_dotted(parent + (close[0],))}?"
    elsewhere = [p for p in all_key_paths() if p[-1] == name]
    if elsewhere:
        return f"unknown key here; {name} belongs under {_dotted(elsewhere[0][:-1])}"
    return f"unknown key; the keys here are: {', '.join(known)}"


def _dotted(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# --- pydantic errors in plain words --------------------------------------------------------

_WANTS = {
    "string_type": "must be text", "int_type": "must be a whole number",
    "int_parsing": "must be a whole number", "int_from_float": "must be a whole number",
    "float_type": "must be a number", "float_parsing": "must be a number",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "tuple_type": "must be a list, like [a, b]", "list_type": "must be a list, like [a, b]",
    "model_type": "must be a section of keys", "model_attributes_type":
    "must be a section of keys", "dict_type": "must be a section of keys",
    "finite_number": "must be a finite number",
}
_BOUNDS = {"greater_than_equal": ("ge", "≥"), "greater_than": ("gt", ">"),
           "less_than_equal": ("le", "≤"), "less_than": ("lt", "<")}


class _Translator:
    """Turns pydantic's error list into the one ConfigError a user should fix first."""

    def __init__(self, layers: _Layers) -> None:
        self.origins, self.fallback = layers.origins, layers.fallback_source

    def first(self, exc: ValidationError) -> ConfigError:
        errors = [self.one(e) for e in exc.errors(include_url=False)]
        errors.sort(key=lambda e: (e.line is None, e.line or 0))
        head = errors[0]
        if len(errors) > 1:
            more = len(errors) - 1
            return ConfigError(f"{head.reason} (and {more} more error{'s' * (more > 1)})",
                               key=head.key, line=head.line, source=head.source)
        return head

    def origin(self, path: KeyPath) -> _Origin:
        for end in range(len(path), -1, -1):
            if path[:end] in self.origins:
                return self.origins[path[:end]]
        return _Origin(self.fallback)

    def one(self, error: Mapping[str, Any]) -> ConfigError:
        path: KeyPath = tuple(error["loc"])
        if error["type"] == "xyro_order":
            path, reason = self.order(path, error["ctx"])
        elif error["type"] == "xyro_key":  # a section's rule about one of its keys
            path, reason = path + (error["ctx"]["key"],), str(error["msg"])
        else:
            reason = self.reason(error, path)
        origin = self.origin(path)
        return ConfigError(reason, key=_dotted(path) or None, line=origin.line,
                           source=origin.source)

    def order(self, base: KeyPath, ctx: Mapping[str, Any]) -> tuple[KeyPath, str]:
        low = base + tuple(ctx["low"].split("."))
        high = base + tuple(ctx["high"].split("."))
        low_v, high_v = format_number(ctx["low_value"]), format_number(ctx["high_value"])
        # Name the key that was set with the most weight (file < environment < command
        # line); defaults rank 0. That is the one the user just changed.
        low_rank, high_rank = (self.origins.get(p, _Origin("")).rank for p in (low, high))
        if low_rank > high_rank:
            return low, f"must be ≤ {_dotted(high)} ({high_v}), got {low_v}"
        return high, f"must be ≥ {_dotted(low)} ({low_v}), got {high_v}"

    def reason(self, error: Mapping[str, Any], path: KeyPath) -> str:
        kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
        plain = self.origins[path].plain_text if path in self.origins else None
        if kind == "extra_forbidden":
            return _unknown_key_reason(path)
        if kind == "xyro_value":
            return str(error["msg"])
        if kind in _BOUNDS:
            name, sign = _BOUNDS[kind]
            return f"must be {sign} {format_number(ctx[name])}, got {describe(value, plain)}"
        if kind == "literal_error":
            choices = ", ".join(map(str, typing.get_args(_field_annotation(path))))
            return f"must be one of {choices}; got {describe(value, plain)}"
        if kind in ("too_short", "string_too_short"):
            return "must not be empty"
        if kind in ("too_long", "string_too_long"):
            return f"is too long (at most {ctx.get('max_length')})"
        wants = _WANTS.get(kind, "has an unusable value")
        hint = ""
        if kind == "string_type" and plain is not None:
            # JSON's escapes are YAML's double-quoted ones, and keep the message on one line.
            hint = f"; write it in quotes ({json.dumps(plain, ensure_ascii=False)}) if you " \
                   "meant the text"
        elif kind.startswith(("int_", "float_")) and isinstance(value, str):
            hint = ("; write it without quotes" if looks_numeric(value) else
                    "; it must be a finite number" if looks_non_finite(value) else "")
        return f"{wants}, got {describe(value, plain)}{hint}"


def _field_annotation(path: KeyPath) -> Any:
    section = _section_at(path[:-1])
    info = section.model_fields.get(str(path[-1])) if section else None
    return info.annotation if info else None
