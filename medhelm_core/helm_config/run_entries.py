"""HELM run-entry `.conf` files, and the small HOCON reader behind them.

HELM (`benchmark/presentation/run_entry.py` `read_run_entries`) parses each file with pyhocon
(`common/general.py` `parse_hocon`) and turns the tree into `RunEntries(entries: List[RunEntry])`
with `dacite.from_dict` (non-strict: unknown keys are ignored, types are checked). Entries of
several files are concatenated in the order the files are given.

We do not depend on pyhocon: `parse_hocon` below reads the part of HOCON that HELM's files
(run entries, `credentials.conf`) use, and refuses the rest with a clear error:

* root object with or without braces (a root array is accepted too);
* `#` and `//` comments; fields separated by `,` or newlines, a trailing comma allowed,
  a doubled comma refused; the same for array elements;
* keys quoted or unquoted, `key: v`, `key = v` or `key { ... }`; unquoted dotted keys are paths
  (`a.b: 1` is `{a: {b: 1}}`); a repeated key merges objects and otherwise replaces the value;
* values: JSON strings (with escapes), `\"\"\"triple-quoted\"\"\"` strings, unquoted strings,
  numbers (int, then float), `true`/`false`/`null` (any case, as pyhocon), arrays, objects;
  simple values on one line are concatenated into one string with the whitespace between them,
  objects on one line are merged (`{a: 1} {b: 2}`), arrays on one line are joined;
* not supported (error): substitutions `${...}`, `include`, `+=`.

Every error is a `MedhelmError` "file:line: message". With `redact=True` (credentials) messages
never quote any value text.
"""
from __future__ import annotations

import bisect
import logging
import re
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from medhelm_core.errors import MedhelmError, validation_message

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# HOCON
# --------------------------------------------------------------------------------------------


class HoconObject(dict):
    """A parsed HOCON object; `line` is where it starts, `key_lines` where each key was set."""

    line: int = 1

    def __init__(self, line: int = 1):
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}


class HoconList(list):
    """A parsed HOCON array; `line` is where it starts, `item_lines[i]` where item i starts."""

    line: int = 1

    def __init__(self, line: int = 1):
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


# Characters that may not appear in an unquoted string (HOCON spec), besides whitespace.
_FORBIDDEN_UNQUOTED = set('$"{}[]:=,+#`^?!@*&\\')
_INLINE_WS = " \t\f\v\ufeff\u00a0"
_NUMBER = re.compile(r"[+-]?(\d*\.\d+|\d+(\.\d+)?)([eE][+-]?\d+)?")
_INT = re.compile(r"[+-]?\d+")
_EOF = ""


class _Unquoted(str):
    """Marks a value piece that came from unquoted text (it may become a number/bool/null)."""


class _HoconParser:
    def __init__(self, text: str, source: str, redact: bool):
        self.text = text[1:] if text.startswith("\ufeff") else text
        self.source = source
        self.redact = redact
        self.pos = 0
        self._newlines = [i for i, c in enumerate(self.text) if c == "\n"]

    # ---- helpers ----
    def line_at(self, pos: int) -> int:
        return bisect.bisect_left(self._newlines, pos) + 1

    def error(self, message: str, pos: Optional[int] = None) -> MedhelmError:
        line = self.line_at(self.pos if pos is None else pos)
        return MedhelmError(f"{self.source}:{line}: {message}")

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else _EOF

    def describe(self, c: str) -> str:
        if c == _EOF:
            return "end of file"
        if c == "\n":
            return "end of line"
        return repr(c)

    def at_comment(self) -> bool:
        return self.peek() == "#" or (self.peek() == "/" and self.peek(1) == "/")

    def skip_comment(self) -> None:
        while self.peek() not in ("\n", _EOF):
            self.pos += 1

    def skip_inline(self) -> str:
        """Skip spaces/tabs on the current line; return what was skipped."""
        start = self.pos
        while self.peek() != _EOF and self.peek() in _INLINE_WS:
            self.pos += 1
        return self.text[start:self.pos]

    def skip_ws(self) -> bool:
        """Skip whitespace, newlines and comments; return True if a newline was crossed."""
        crossed = False
        while True:
            c = self.peek()
            if c == "\n" or c == "\r":
                crossed = crossed or c == "\n"
                self.pos += 1
            elif c != _EOF and (c in _INLINE_WS or c.isspace()):
                self.pos += 1
            elif self.at_comment():
                self.skip_comment()
            else:
                return crossed

    # ---- grammar ----
    def parse_root(self) -> Any:
        self.skip_ws()
        c = self.peek()
        if c == "{":
            value = self.parse_object()
        elif c == "[":
            value = self.parse_array()
        else:
            value = self.parse_object_body(closing=None, line=self.line_at(self.pos))
        self.skip_ws()
        if self.peek() != _EOF:
            raise self.error(f"unexpected {self.describe(self.peek())} after the end of the document")
        return value

    def parse_object(self) -> HoconObject:
        start = self.pos
        self.pos += 1  # "{"
        obj = self.parse_object_body(closing="}", line=self.line_at(start), open_pos=start)
        self.pos += 1  # "}"
        return obj

    def parse_object_body(self, closing: Optional[str], line: int, open_pos: int = 0) -> HoconObject:
        obj = HoconObject(line)
        need_sep = False
        while True:
            crossed = self.skip_ws()
            c = self.peek()
            if c == ",":
                if not need_sep:
                    raise self.error("unexpected ',' (a field is missing, or a comma is doubled)")
                self.pos += 1
                need_sep = False
                continue
            if closing is not None and c == closing:
                return obj
            if c == _EOF:
                if closing is None:
                    return obj
                raise self.error(f"missing '}}' for the object opened at line {self.line_at(open_pos)}")
            if c in ("]", "}"):
                raise self.error(f"unexpected {c!r}")
            if need_sep and not crossed:
                raise self.error("expected ',' or a newline between fields")
            self.parse_field(obj)
            need_sep = True

    def parse_key(self) -> list[str]:
        start = self.pos
        segments: list[str] = []
        current = ""
        quoted_any = False
        while True:
            c = self.peek()
            if c == '"':
                if self.text.startswith('"""', self.pos):
                    raise self.error("triple-quoted strings cannot be keys")
                current += self.parse_quoted()
                quoted_any = True
            elif c == ".":
                if not current:
                    raise self.error("empty key segment")
                segments.append(current)
                current = ""
                self.pos += 1
            elif c != _EOF and not c.isspace() and c not in _FORBIDDEN_UNQUOTED and not self.at_comment():
                current += c
                self.pos += 1
            else:
                break
        if current or quoted_any:
            segments.append(current)
        if not segments:
            raise self.error(f"expected a key, found {self.describe(self.peek())}", start)
        return segments

    def parse_field(self, obj: HoconObject) -> None:
        key_pos = self.pos
        if self.text.startswith("include", self.pos) and (
            self.peek(7) in _INLINE_WS or self.peek(7) == '"'
        ):
            rest = self.text[self.pos + 7:].lstrip(_INLINE_WS)
            if rest.startswith(('"', "file(", "url(", "classpath(", "required(")):
                raise self.error("HOCON 'include' is not supported")
        path = self.parse_key()
        key_line = self.line_at(key_pos)
        shown = ".".join(path)
        self.skip_inline()
        c = self.peek()
        if c in (":", "="):
            self.pos += 1
            self.skip_ws()
        elif c == "{":
            pass
        elif c == "+" and self.peek(1) == "=":
            raise self.error(f"HOCON '+=' (key {shown!r}) is not supported")
        else:
            raise self.error(f"expected ':' or '=' after key {shown!r}, found {self.describe(c)}")
        if self.peek() in (_EOF, ",", "}", "]"):
            raise self.error(f"missing value for key {shown!r}")
        value = self.parse_value()
        self.insert(obj, path, value, key_line)

    @staticmethod
    def insert(obj: HoconObject, path: list[str], value: Any, line: int) -> None:
        target = obj
        for segment in path[:-1]:
            existing = target.get(segment)
            if not isinstance(existing, HoconObject):
                existing = HoconObject(line)
                target[segment] = existing
                target.key_lines[segment] = line
            target = existing
        last = path[-1]
        existing = target.get(last)
        if isinstance(existing, HoconObject) and isinstance(value, HoconObject):
            _merge(existing, value)
        else:
            target[last] = value
            target.key_lines[last] = line

    def parse_array(self) -> HoconList:
        start = self.pos
        arr = HoconList(self.line_at(start))
        self.pos += 1  # "["
        need_sep = False
        while True:
            crossed = self.skip_ws()
            c = self.peek()
            if c == ",":
                if not need_sep:
                    raise self.error("unexpected ',' (an element is missing, or a comma is doubled)")
                self.pos += 1
                need_sep = False
                continue
            if c == "]":
                self.pos += 1
                return arr
            if c == _EOF:
                raise self.error(f"missing ']' for the array opened at line {arr.line}")
            if c == "}":
                raise self.error("unexpected '}' inside an array")
            if need_sep and not crossed:
                raise self.error("expected ',' or a newline between array elements")
            arr.item_lines.append(self.line_at(self.pos))
            arr.append(self.parse_value())
            need_sep = True

    def parse_value(self) -> Any:
        pieces: list[Any] = []
        gaps: list[str] = []
        start = self.pos
        while True:
            c = self.peek()
            if c == "{":
                pieces.append(self.parse_object())
            elif c == "[":
                pieces.append(self.parse_array())
            elif c == '"':
                if self.text.startswith('"""', self.pos):
                    pieces.append(self.parse_triple_quoted())
                else:
                    pieces.append(self.parse_quoted())
            elif c == "$":
                raise self.error("HOCON substitutions (${...}) are not supported")
            elif c != _EOF and not c.isspace() and c not in _FORBIDDEN_UNQUOTED and not self.at_comment():
                pieces.append(self.parse_unquoted())
            else:
                if not pieces:
                    raise self.error(f"expected a value, found {self.describe(c)}")
                break
            gap = self.skip_inline()
            nxt = self.peek()
            if nxt in (_EOF, ",", "}", "]", "\n", "\r") or self.at_comment():
                break
            if nxt in (":", "="):
                raise self.error(f"expected ',' or a newline between fields, found {nxt!r} after a value"
                                 " (quote values that contain ':' or '=')")
            if nxt in _FORBIDDEN_UNQUOTED and nxt not in ('"', "{", "[", "$"):
                raise self.error(f"unexpected {self.describe(nxt)} in a value")
            gaps.append(gap)
        if len(pieces) == 1:
            return _convert(pieces[0])
        if all(isinstance(p, HoconObject) for p in pieces):
            # HOCON object concatenation: `{a: 1} {b: 2}` is one merged object (as in pyhocon).
            log.warning("%s:%s: objects on one line without a comma are merged into one (HOCON)",
                        self.source, self.line_at(start))
            merged = pieces[0]
            for p in pieces[1:]:
                _merge(merged, p)
            return merged
        if all(isinstance(p, HoconList) for p in pieces):
            joined = pieces[0]
            for p in pieces[1:]:
                joined.extend(p)
                joined.item_lines.extend(p.item_lines)
            return joined
        if any(isinstance(p, (HoconObject, HoconList)) for p in pieces):
            raise self.error("cannot concatenate a string with an array or object", start)
        out = str(pieces[0])
        for gap, piece in zip(gaps, pieces[1:]):
            out += gap + str(piece)
        return out

    def parse_unquoted(self) -> _Unquoted:
        start = self.pos
        while True:
            c = self.peek()
            if c == _EOF or c.isspace() or c in _FORBIDDEN_UNQUOTED or self.at_comment():
                break
            self.pos += 1
        return _Unquoted(self.text[start:self.pos])

    def parse_quoted(self) -> str:
        start = self.pos
        self.pos += 1  # opening quote
        out: list[str] = []
        while True:
            c = self.peek()
            if c == _EOF or c == "\n":
                raise self.error("unterminated quoted string", start)
            self.pos += 1
            if c == '"':
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            e = self.peek()
            self.pos += 1
            simple = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
            if e in simple:
                out.append(simple[e])
            elif e == "u":
                digits = self.text[self.pos:self.pos + 4]
                if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                    raise self.error("invalid \\u escape in a quoted string")
                out.append(chr(int(digits, 16)))
                self.pos += 4
            else:
                shown = "" if self.redact else f" \\{e}"
                raise self.error(f"invalid escape{shown} in a quoted string")

    def parse_triple_quoted(self) -> str:
        start = self.pos
        self.pos += 3
        end = self.text.find('"""', self.pos)
        if end < 0:
            raise self.error('unterminated """ string', start)
        while end + 3 < len(self.text) and self.text[end + 3] == '"':
            end += 1
        value = self.text[self.pos:end]
        self.pos = end + 3
        return value


def _convert(piece: Any) -> Any:
    if not isinstance(piece, _Unquoted):
        return piece
    text = str(piece)
    low = text.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    if low == "null":
        return None
    if _NUMBER.fullmatch(text):
        return int(text) if _INT.fullmatch(text) else float(text)
    return text


def _merge(into: HoconObject, new: HoconObject) -> None:
    for key, value in new.items():
        existing = into.get(key)
        if isinstance(existing, HoconObject) and isinstance(value, HoconObject):
            _merge(existing, value)
        else:
            into[key] = value
            into.key_lines[key] = new.key_lines.get(key, new.line)


def parse_hocon(text: str, source: str = "<string>", redact: bool = False) -> Any:
    """Parse HOCON `text`; `source` names it in errors ("source:line: message")."""
    return _HoconParser(text, source, redact).parse_root()


def plain(value: Any) -> Any:
    """A parsed HOCON tree as plain dicts and lists."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# Run entries
# --------------------------------------------------------------------------------------------


class RunEntry(BaseModel):
    """HELM's `RunEntry` (description, priority, groups) plus where it was read from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: StrictStr
    # 1 is the highest priority; `helm-run --priority N` keeps entries with priority <= N.
    priority: Optional[StrictInt] = None
    # Extra groups: appended to RunSpec.groups and to the name (",groups=a-b").
    groups: Optional[list[StrictStr]] = None
    # Not HELM fields: the conf file and line the entry was read from (for error messages).
    source: Optional[str] = Field(default=None, repr=False, exclude=True)
    line: Optional[int] = Field(default=None, repr=False, exclude=True)

    @property
    def location(self) -> str:
        if self.source is None:
            return f"run entry {self.description!r}"
        return f"{self.source}:{self.line}" if self.line is not None else f"{self.source}: {self.description!r}"


_ENTRY_FIELDS = ("description", "priority", "groups")


def run_entries_from_hocon(tree: Any, source: str) -> list[RunEntry]:
    """`dacite.from_dict(RunEntries, tree)` with file:line errors."""
    if not isinstance(tree, dict):
        raise MedhelmError(f"{source}:1: expected an object with an 'entries' list")
    if "entries" not in tree:
        raise MedhelmError(f"{source}:1: missing 'entries' (expected `entries: [ {{description: ...}}, ... ]`)")
    entries = tree["entries"]
    entries_line = tree.key_lines.get("entries", 1) if isinstance(tree, HoconObject) else 1
    if not isinstance(entries, list):
        raise MedhelmError(f"{source}:{entries_line}: 'entries' must be a list")
    out: list[RunEntry] = []
    for i, raw in enumerate(entries):
        line = entries.item_lines[i] if isinstance(entries, HoconList) else entries_line
        if not isinstance(raw, dict):
            raise MedhelmError(f"{source}:{line}: run entry must be an object like {{description: \"...\", priority: 1}}")
        unknown = [k for k in raw if k not in _ENTRY_FIELDS]
        if unknown:
            # dacite (non-strict, as HELM calls it) ignores unknown keys; so do we, loudly.
            log.warning("%s:%s: ignoring unknown run-entry keys %s", source, line, unknown)
        fields = {k: plain(raw[k]) for k in _ENTRY_FIELDS if k in raw}
        try:
            out.append(RunEntry(**fields, source=source, line=line))
        except ValidationError as exc:
            raise MedhelmError(f"{source}:{line}: invalid run entry: {validation_message(exc)}") from None
    return out
