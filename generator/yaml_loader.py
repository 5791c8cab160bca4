"""A strict YAML loader that keeps the location of every key and value.

The spec is read with PyYAML's composer (``SafeLoader``) into plain Python data (dict,
list, str, int, float, bool, None) plus a location table: for every path into the
document, the 1-based (line, column) of the mapping key and of the value node.

Deliberately stricter than YAML: duplicate keys, non-string keys, non-standard tags,
anchors and aliases, files over 1 MiB, nesting deeper than 32, lists and mappings of more
than 4,096 items, strings Python cannot encode (lone surrogates), non-UTF-8 bytes and
files that are not regular files are errors (the caps: `limits`). Every problem becomes a located `SpecError`; all problems that can be found
are collected and raised together as `SpecErrors`.
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import SpecError, SpecErrors
from .limits import MAX_BYTES, MAX_DEPTH, MAX_ITEMS

Loc = tuple[int, int]
PathT = tuple[Any, ...]   # str keys and int indices, like jsonschema's absolute_path

_T = "tag:yaml.org,2002:"
STANDARD_TAGS = frozenset(_T + t for t in ("null", "bool", "int", "float", "str", "seq", "map"))
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_path(path: Sequence[Any]) -> str:
    """('driver', 'hooks', 'malloc') -> 'driver.hooks.malloc'; ('ops', 'add.Tensor', 'kernel')
    -> 'ops."add.Tensor".kernel'; ('driver', 'libraries', 0) -> 'driver.libraries[0]'."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
            continue
        part = p if _IDENT_RE.fullmatch(p) else '"' + p.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out += ("." if out else "") + part
    return out


@dataclass
class YamlDocument:
    """Plain data of one YAML document plus where each piece of it was written."""

    file: str                                       # display name used in errors
    data: Any
    keys: dict[PathT, Loc] = field(default_factory=dict)    # path -> location of its key (or list item)
    values: dict[PathT, Loc] = field(default_factory=dict)  # path -> location of its value node
    scalars: dict[PathT, str] = field(default_factory=dict) # path -> scalar text as written

    def _nearest(self, table: dict[PathT, Loc], path: PathT) -> Loc:
        path = tuple(path)
        while path:
            if path in table:
                return table[path]
            if path in self.values:
                return self.values[path]
            path = path[:-1]
        return self.values.get((), (1, 1))

    def key_loc(self, path: Sequence[Any]) -> Loc:
        """Where the key naming ``path[-1]`` was written (nearest known ancestor otherwise)."""
        return self._nearest(self.keys, tuple(path))

    def value_loc(self, path: Sequence[Any]) -> Loc:
        """Where the value at ``path`` starts (nearest known ancestor otherwise)."""
        return self._nearest(self.values, tuple(path))

    def error(self, path: Sequence[Any], message: str, *, hint: str | None = None,
              at: str = "value", shown_path: Sequence[Any] | None = None) -> SpecError:
        """A SpecError at the key or value of ``path``; ``shown_path`` is the path printed."""
        line, col = self.key_loc(path) if at == "key" else self.value_loc(path)
        return SpecError(self.file, line, col,
                         format_path(path if shown_path is None else shown_path), message, hint)


def _loc(mark) -> Loc:
    return (mark.line + 1, mark.column + 1)


class _Abort(Exception):
    """Stop composing: the document cannot be read further."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose composer rejects aliases, anchors, odd tags and deep nesting."""

    def __init__(self, stream, file: str, errors: list[SpecError]):
        super().__init__(stream)
        self._file = file
        self._errors = errors
        self._depth = 0
        self._path: list = []   # where the composer is, for the errors that stop it

    def _err(self, mark, message: str, hint: str | None = None, path: str = "") -> None:
        line, col = _loc(mark)
        self._errors.append(SpecError(self._file, line, col, path, message, hint))

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            self.get_event()
            self._err(event.start_mark, f"YAML alias '*{event.anchor}' is not allowed in a spec",
                      "write the value out in full; specs do not use anchors or aliases")
            return ScalarNode(_T + "null", "", event.start_mark, event.end_mark)
        if isinstance(event, (ScalarEvent, CollectionStartEvent)):
            if event.anchor is not None:
                self._err(event.start_mark, f"YAML anchor '&{event.anchor}' is not allowed in a spec",
                          "remove the anchor; specs do not use anchors or aliases")
                event.anchor = None
            tag = event.tag
            if tag is not None and tag != "!" and tag not in STANDARD_TAGS:
                shown = "!!" + tag[len(_T):] if tag.startswith(_T) else tag
                self._err(event.start_mark, f"YAML tag '{shown}' is not allowed in a spec",
                          "remove the tag; only plain YAML values (and standard !! tags of "
                          "str, int, float, bool, null, seq, map) are accepted")
                event.tag = None
        # Bounded cost: stop at the first item past the cap, before composing the rest.
        if isinstance(parent, SequenceNode) and isinstance(index, int) and index >= MAX_ITEMS:
            self._err(event.start_mark, f"list has more than {MAX_ITEMS} items, the most a spec's list "
                      "may hold (limits.MAX_ITEMS)", path=format_path(self._path))
            raise _Abort()
        if isinstance(parent, MappingNode) and index is None and len(parent.value) >= MAX_ITEMS:
            self._err(event.start_mark, f"mapping has more than {MAX_ITEMS} keys, the most a spec's mapping "
                      "may hold (limits.MAX_ITEMS)", path=format_path(self._path))
            raise _Abort()
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            self._err(event.start_mark, f"nesting deeper than {MAX_DEPTH} levels (limits.MAX_DEPTH)",
                      path=format_path(self._path))
            raise _Abort()
        segment = index if isinstance(index, int) else \
            index.value if isinstance(index, ScalarNode) and isinstance(index.value, str) else None
        if parent is not None:
            self._path.append(segment if segment is not None else "?")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if parent is not None:
                self._path.pop()


def _describe_key(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"bool {str(value).lower()}"
    return f"{type(value).__name__} {value!r}"


class _Builder:
    def __init__(self, doc: YamlDocument, errors: list[SpecError], loader: _StrictLoader):
        self.doc = doc
        self.errors = errors
        self.ctor = yaml.constructor.SafeConstructor()
        self.loader = loader

    def _err(self, loc: Loc, path: PathT, message: str, hint: str | None = None) -> None:
        self.errors.append(SpecError(self.doc.file, loc[0], loc[1], format_path(path), message, hint))

    def scalar(self, node: ScalarNode, path: PathT) -> Any:
        tag = node.tag
        try:
            if tag == _T + "null":
                return None
            if tag == _T + "bool":
                return self.ctor.construct_yaml_bool(node)
            if tag == _T + "int":
                return self.ctor.construct_yaml_int(node)
            if tag == _T + "float":
                return self.ctor.construct_yaml_float(node)
        except Exception:
            self._err(_loc(node.start_mark), path,
                      f"'{node.value}' is not a valid {tag[len(_T):]}")
            return None
        # str, implicit timestamps and anything else: the text as written
        return self.encodable(node, path)

    def encodable(self, node: ScalarNode, path: PathT) -> str:
        """The scalar's text, if it can be written as UTF-8 (a YAML escape such as "\\uD800"
        makes a lone surrogate, which passed validation and crashed generation)."""
        text = node.value
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            line, col = _loc(node.start_mark)
            self._err((line, col), path, f"string holds U+{ord(text[e.start]):04X}, a lone surrogate, at "
                      f"character {e.start + 1}: not a character, it cannot be written as UTF-8",
                      "write the character itself, or a \\U escape of a real code point")
            return text.encode("utf-8", "replace").decode("utf-8")
        return text

    def build(self, node: Node, path: PathT) -> Any:
        self.doc.values[path] = _loc(node.start_mark)
        if isinstance(node, ScalarNode):
            self.doc.scalars[path] = node.value
            return self.scalar(node, path)
        if isinstance(node, SequenceNode):
            out = []
            for i, item in enumerate(node.value):
                self.doc.keys[path + (i,)] = _loc(item.start_mark)
                out.append(self.build(item, path + (i,)))
            return out
        if isinstance(node, MappingNode):
            out: dict[str, Any] = {}
            first_line: dict[str, int] = {}
            for knode, vnode in node.value:
                kloc = _loc(knode.start_mark)
                if isinstance(knode, ScalarNode):
                    key = self.scalar(knode, path)
                    if knode.tag == _T + "merge":
                        key = knode.value   # '<<' is just an (unknown) key here
                else:
                    key = knode
                if not isinstance(key, str):
                    what = "a collection" if isinstance(key, Node) else _describe_key(key)
                    self._err(kloc, path, f"mapping key must be a string, not {what}",
                              "quote the key" if not isinstance(key, Node) else None)
                    continue
                if key in out:
                    self._err(kloc, path, f"duplicate key '{key}' (first defined at line {first_line[key]})",
                              "remove one of the two entries")
                    continue
                first_line[key] = kloc[0]
                self.doc.keys[path + (key,)] = kloc
                out[key] = self.build(vnode, path + (key,))
            return out
        raise AssertionError(f"unexpected YAML node {node!r}")  # pragma: no cover


def _decode(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        start = e.start
        line = raw.count(b"\n", 0, start) + 1
        bol = raw.rfind(b"\n", 0, start) + 1
        col = len(raw[bol:start].decode("utf-8", errors="replace")) + 1
        bad = raw[start:start + 1].hex()
        raise SpecErrors([SpecError(file, line, col, "", f"file is not valid UTF-8 (byte 0x{bad})",
                                    "save the spec as UTF-8")]) from None


def _yaml_error(e: Exception, text: str, file: str) -> SpecError:
    if isinstance(e, yaml.reader.ReaderError):
        pos = e.position
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        code = e.character if isinstance(e.character, int) else ord(e.character)
        return SpecError(file, line, col, "", f"YAML syntax error: unacceptable character U+{code:04X} "
                         f"({e.reason})")
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        line, col = _loc(mark) if mark is not None else (1, 1)
        problem = e.problem or "invalid YAML"
        msg = f"YAML syntax error: {problem}"
        if e.context:
            ctx = e.context
            if e.context_mark is not None and e.context_mark is not mark:
                ctx += f" at line {e.context_mark.line + 1}, column {e.context_mark.column + 1}"
            msg += f" ({ctx})"
        return SpecError(file, line, col, "", msg)
    return SpecError(file, 1, 1, "", f"cannot read YAML: {e}")


def load_yaml_text(text: str, file: str) -> YamlDocument:
    """Parse one YAML document from text; raises SpecErrors listing every problem found."""
    errors: list[SpecError] = []
    doc = YamlDocument(file=file, data=None)
    try:
        loader = _StrictLoader(text, file, errors)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except _Abort:
        raise SpecErrors(errors) from None
    except yaml.YAMLError as e:
        raise SpecErrors(errors + [_yaml_error(e, text, file)]) from None
    if node is None:
        doc.values[()] = (1, 1)
    else:
        doc.data = _Builder(doc, errors, loader).build(node, ())
        # Composer errors (anchors, aliases, tags) know only their location: name the path.
        at_loc: dict[Loc, PathT] = {}
        for path, loc in doc.values.items():
            at_loc.setdefault(loc, path)
        errors = [SpecError(e.file, e.line, e.column, format_path(at_loc[(e.line, e.column)]), e.message, e.hint)
                  if not e.path and at_loc.get((e.line, e.column)) else e for e in errors]
    if errors:
        raise SpecErrors(errors)
    return doc


def load_yaml_bytes(raw: bytes, file: str) -> YamlDocument:
    """Size check, UTF-8 decode, then `load_yaml_text`."""
    if len(raw) > MAX_BYTES:
        raise SpecErrors([SpecError(file, 1, 1, "", f"file is larger than 1 MiB ({MAX_BYTES} bytes), "
                                    "the most a spec may be (limits.MAX_BYTES)")])
    return load_yaml_text(_decode(raw, file), file)


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def read_file(path: str | Path, file: str, what: str = "file") -> bytes:
    """The first MAX_BYTES + 1 bytes of the regular file at ``path``; a located error for a
    file that cannot be read or is no regular file (a FIFO, a directory, /dev/zero): those are
    refused at once, never opened for a read that would wait or never end."""
    def refuse(message: str) -> SpecErrors:
        return SpecErrors([SpecError(file, 1, 1, "", message, f"give the path of the {what}, a regular file")])

    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise refuse(f"cannot read {what}: it is {_kind(mode)}, not a regular file")
        # O_NONBLOCK: a FIFO put in the file's place after the stat still does not block the open.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise refuse(f"cannot read {what}: it is {_kind(mode)}, not a regular file")
            return fh.read(MAX_BYTES + 1)
    except OSError as e:
        raise SpecErrors([SpecError(file, 1, 1, "", f"cannot read {what}: {e.strerror or e}")]) from None
    except ValueError as e:   # a NUL in the path
        raise SpecErrors([SpecError(file, 1, 1, "", f"cannot read {what}: {e}")]) from None


def load_yaml_file(path: str | Path, display: str | None = None) -> YamlDocument:
    file = display if display is not None else str(path)
    return load_yaml_bytes(read_file(path, file), file)
