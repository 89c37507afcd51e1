"""A YAML loader for configuration: ``yaml.safe_load`` semantics, plus what safe_load hides.

PyYAML's safe_load keeps the last of two duplicate keys, forgets where each key was written,
and reads YAML 1.1 (``no`` is False, ``1e8`` is a string). This loader composes the node tree
first, walks it once to reject duplicate and non-text keys and to record the line of every
key and list item, then constructs the data exactly as safe_load would. It also reads
``1e8``/``1e-8`` as floats (YAML 1.2), which is what anyone writing a tolerance expects.

It also reads the file (size-capped, UTF-8), parses the one-value YAML strings of
environment variables and ``--set``, and describes a value back as the user wrote it
(``no, which YAML reads as false``). It knows nothing about Xyro's keys: problems come out
as :class:`YamlProblem` (reason, line, path) and the config module turns them into its own
errors.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

KeyPath = tuple[str | int, ...]

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAX_DEPTH = 64
_KEY_LINE = re.compile(r"^([ \t]*)([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]|$)")


class YamlProblem(Exception):
    """The text is not a usable YAML configuration document."""

    def __init__(self, reason: str, line: int | None = None, path: KeyPath = ()) -> None:
        super().__init__(reason)
        self.reason, self.line, self.path = reason, line, path


@dataclass(frozen=True)
class YamlDocument:
    """Constructed data plus, per path, the line it was written on and its plain text."""

    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)
    #: Source text of plain (unquoted) scalars that YAML did not read as text, e.g. ``no``.
    plain_text: dict[KeyPath, str] = field(default_factory=dict)


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 exponent floats (``1e8``, ``1e-8``)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def load_document(text: str, *, require_mapping: bool) -> YamlDocument:
    """Parse one YAML document; an empty document is ``{}`` when a mapping is required."""
    try:
        loader = _Loader(text)  # its reader refuses control characters (NUL, ESC...) here,
        # for the whole text at once
    except yaml.reader.ReaderError as exc:
        raise _reader_problem(exc, text) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument({} if require_mapping else None)
        if require_mapping and not isinstance(node, MappingNode):
            kind = "a list" if isinstance(node, SequenceNode) else f"the value {node.value!r}"
            raise YamlProblem(f"the top level must be a mapping of keys (like `crawler:`), "
                              f"got {kind}", node.start_mark.line + 1)
        doc = YamlDocument(None)
        _Walk(doc.lines, doc.plain_text).node(node, (), 0)
        return YamlDocument(loader.construct_document(node), doc.lines, doc.plain_text)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_problem(exc) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(f"bad YAML: {exc}".replace("\n", " ")) from None
    except RecursionError:
        raise YamlProblem("bad YAML: nested too deeply") from None
    finally:
        loader.dispose()


def key_near(text: str, line: int) -> tuple[str, ...]:
    """Dotted path of the block key written on ``line`` (1-based) or the closest one above.

    A best-effort hint for syntax errors, where there is no parsed tree to ask: it follows
    indentation of ``name:`` lines and ignores flow syntax and list items.
    """
    stack: list[tuple[int, str]] = []
    for source_line in text.splitlines()[:line]:
        match = _KEY_LINE.match(source_line)
        if match is None:
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(2)))
    return tuple(name for _, name in stack)


def _reader_problem(exc: yaml.reader.ReaderError, text: str) -> YamlProblem:
    """A character YAML does not allow anywhere (a control character such as NUL, form feed,
    ESC or DEL), with its line and column; a file of NULs is what a crash can leave."""
    column = exc.position - text.rfind("\n", 0, exc.position)
    # NUL cannot come from a command line or the environment: only from a damaged file.
    hint = "; a crash can leave a file zero-filled: restore it from a copy" \
        if exc.character == 0 else ""
    return YamlProblem(f"bad YAML at column {column}: character U+{exc.character:04X}, "
                       f"which YAML does not allow; remove it{hint}",
                       text.count("\n", 0, exc.position) + 1)


def _syntax_problem(exc: yaml.MarkedYAMLError) -> YamlProblem:
    mark = exc.problem_mark or exc.context_mark
    what = exc.problem or exc.context or "unreadable"
    if "\\t" in what or "\t" in what:
        what += " (indent with spaces; YAML does not allow tabs there)"
    where = f" at column {mark.column + 1}" if mark is not None else ""
    return YamlProblem(f"bad YAML{where}: {what}", mark.line + 1 if mark is not None else None)


class _Walk:
    """One pass over the node tree: duplicate/non-text keys, lines, plain scalar text."""

    def __init__(self, lines: dict[KeyPath, int], plain_text: dict[KeyPath, str]) -> None:
        self.lines, self.plain_text = lines, plain_text
        # Aliased nodes are walked once: keeps "billion laughs" documents linear.
        self.seen: set[int] = set()

    def node(self, node: Node, path: KeyPath, depth: int) -> None:
        if id(node) in self.seen:
            return
        self.seen.add(id(node))
        if depth > _MAX_DEPTH:
            raise YamlProblem("bad YAML: nested too deeply", node.start_mark.line + 1, path)
        if isinstance(node, MappingNode):
            self.mapping(node, path, depth)
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                self.lines[path + (index,)] = item.start_mark.line + 1
                self.node(item, path + (index,), depth + 1)
        elif isinstance(node, ScalarNode) and node.style is None and node.tag != _STR_TAG:
            self.plain_text[path] = node.value

    def mapping(self, node: MappingNode, path: KeyPath, depth: int) -> None:
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE_TAG:  # `<<: *anchor`; explicit keys override merged
                self.node(value_node, path, depth + 1)
                continue
            if not isinstance(key_node, ScalarNode):
                raise YamlProblem("a key must be a plain name, not a list or mapping",
                                  line, path)
            name = key_node.value
            if key_node.tag != _STR_TAG:
                raise YamlProblem(f"key {name!r} is not read as text by YAML; keys are "
                                  f"names like `workers` (quote it if you must)",
                                  line, path + (name,))
            if name in first_line:
                raise YamlProblem(f"duplicate key (first written on line {first_line[name]}); "
                                  f"YAML would silently keep only the last one",
                                  line, path + (name,))
            first_line[name] = line
            self.lines[path + (name,)] = line
            self.node(value_node, path + (name,), depth + 1)


def read_text(path: Path, max_bytes: int) -> str:
    """The file as text: at most ``max_bytes``, UTF-8 (a BOM is allowed).

    A missing file raises FileNotFoundError (the caller knows how the name was chosen).
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except IsADirectoryError:
        raise YamlProblem("is a directory, not a YAML file") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise YamlProblem(f"cannot read the file: {exc.strerror}") from None
    if len(raw) > max_bytes:
        raise YamlProblem(f"file larger than {max_bytes} bytes; is it really the "
                          f"configuration?")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YamlProblem("not UTF-8 text", raw[:exc.start].count(b"\n") + 1) from None


def parse_setting(text: str, kind: str) -> Any:
    """The value of an environment variable or ``--set`` string for a key of ``kind``.

    ``kind`` is 'text' (a string or a choice of strings), 'list', 'section' or 'value'.
    Values are YAML, but shell lines rarely carry quotes: a text key takes the raw text when
    YAML reads it as something else, and a list key takes one bare item without brackets.
    """
    if kind == "list" and not text.strip().startswith("["):
        return [text.strip()] if text.strip() else []
    try:
        value = load_document(text, require_mapping=False).data
    except YamlProblem as exc:
        if kind == "text":
            return text
        raise YamlProblem(f"{text!r} is not a valid YAML value ({exc.reason})") from None
    return text if kind == "text" and not isinstance(value, str) else value


def looks_numeric(text: str) -> bool:
    """True for text that is a finite number once unquoted ('inf' and 'nan' are not)."""
    number = _as_float(text)
    return number is not None and math.isfinite(number)


def looks_non_finite(text: str) -> bool:
    """'inf', 'nan', 'Infinity'...: text Python reads as a number that no setting takes."""
    number = _as_float(text)
    return number is not None and not math.isfinite(number)


def _as_float(text: str) -> float | None:
    try:
        return float(text.replace("_", ""))
    except ValueError:
        return None


def format_number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))   # a bound of 315360000 s, not 3.1536e+08
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe(value: Any, plain: str | None) -> str:
    """A value as the user wrote it, with what YAML made of it when that differs."""
    if isinstance(value, bool):
        word = "true" if value else "false"
        return f"{plain}, which YAML reads as {word}" if plain and plain != word else word
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, (int, float)):
        # As written where known: "8.0" is no whole number, though it prints as 8.
        return plain if plain and plain.strip() else format_number(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 80 else repr(value[:77] + "...")
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a section of keys"
    return f"{plain or value} (a {type(value).__name__})"
