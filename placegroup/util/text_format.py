"""Protocol-buffer text format for plain-Python messages, without protobuf.

Fluid 1.8 keeps a dataset's data-feed settings (``DataFeedDesc``) and a trainer's settings
(``TrainerDesc``) in protobuf messages and prints them in protobuf's text format. placegroup
keeps the same fields in plain Python objects, ``Message`` subclasses declared by a one-line
spec per message (``message``), and reads and writes the same text:

* ``to_text(msg)`` prints as protobuf 3.20's ``text_format.MessageToString`` does: fields in
  declared order, a scalar only when it was set, a repeated field once per element, a
  sub-message as ``name {`` ... ``}`` indented by two, strings C-escaped (non-ASCII bytes of
  their UTF-8 as ``\\ooo``), float fields in their shortest float32 form.
* ``parse(text, cls)`` reads that text format: ``#`` comments, ``name: value``, ``name {``
  ... ``}`` or ``name < ... >`` (the ``:`` optional), ``[a, b]`` lists for repeated fields,
  adjacent strings joined, ``'`` or ``"`` quotes with C escapes, hex and octal integers,
  ``true``/``false``/``t``/``f``/``1``/``0`` for bools, enum values by name or number, and
  optional ``,``/``;`` separators. An unknown field, a repeated non-repeated field, a bad value
  or an out-of-range integer raise ``TextFormatError`` at ``line:column``, worded as protobuf's
  ``ParseError``. Required fields are not checked (protobuf's ``Parse`` does not either).

Example::

    Slot = message("paddle.framework.Slot", "name:string type:string is_dense:bool is_used:bool *shape:int32")
    s = parse('name: "words" type: "uint64" shape: [-1, 1]', Slot)
    s.is_used = True
    to_text(s)  # 'name: "words"\\ntype: "uint64"\\nis_used: true\\nshape: -1\\nshape: 1\\n'

Thread-safety: a message is a plain object; share one between threads only to read it.
"""
from __future__ import annotations

import numbers
import re
from typing import Any, ClassVar

import numpy as np

__all__ = ["Message", "TextFormatError", "message", "parse", "to_text"]

_RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
           "uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1)}
_SCALARS = {"string", "bool", "float", "double", *_RANGES}
_ZERO = {"string": "", "bool": False, "float": 0.0, "double": 0.0}


class TextFormatError(ValueError):
    """Text that is not a valid message of its type (protobuf's ``ParseError``): the message
    starts with ``line:column : ``."""


class Field:
    """One field of a message: its name, kind (a scalar kind's name, an enum as a dict
    name -> number, or a Message subclass), whether it repeats, and its default."""

    __slots__ = ("name", "kind", "repeated", "default")

    def __init__(self, name: str, kind: Any, repeated: bool, default: Any) -> None:
        self.name, self.kind, self.repeated, self.default = name, kind, repeated, default

    @property
    def is_message(self) -> bool:
        return isinstance(self.kind, type) and issubclass(self.kind, Message)

    def coerce(self, value: Any, type_name: str) -> Any:
        """``value`` as this field holds it, checked as protobuf checks an assignment."""
        kind = self.kind
        if self.is_message:
            if not isinstance(value, kind):
                raise TypeError(f"field {type_name}.{self.name} holds a {kind.TYPE_NAME}, got "
                                f"{type(value).__name__}")
            return value
        if isinstance(kind, dict):  # an enum: its number (by name or number)
            if isinstance(value, str) and value in kind:
                return kind[value]
            if isinstance(value, numbers.Integral) and int(value) in kind.values():
                return int(value)
            raise ValueError(f"Unknown enum value {value!r} for field {type_name}.{self.name}; expected one of "
                             f"{sorted(kind)}")
        if kind == "string":
            if isinstance(value, bytes):
                value = value.decode("utf-8")
            if not isinstance(value, str):
                raise TypeError(f"{value!r} has type {type(value).__name__}, but expected one of: bytes, str")
            return value
        if kind == "bool":
            if not isinstance(value, numbers.Integral):
                raise TypeError(f"{value!r} has type {type(value).__name__}, but expected one of: bool, int")
            return bool(value)
        if kind in ("float", "double"):
            if not isinstance(value, numbers.Real):
                raise TypeError(f"{value!r} has type {type(value).__name__}, but expected one of: int, float")
            return float(np.float32(value)) if kind == "float" else float(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{value!r} has type {type(value).__name__}, but expected one of: int")
        low, high = _RANGES[kind]
        if not low <= int(value) <= high:
            raise ValueError(f"Value out of range: {int(value)}")
        return int(value)


class Repeated(list):
    """A repeated field's elements; ``add()`` appends a new element of a message field, and
    ``append``/``extend`` check scalar elements."""

    def __init__(self, field: Field, type_name: str, values=()) -> None:
        super().__init__()
        self._field, self._type_name = field, type_name
        self.extend(values)

    def add(self, **values) -> "Message":
        if not self._field.is_message:
            raise TypeError(f"{self._type_name}.{self._field.name} holds scalars: use append()")
        item = self._field.kind(**values)
        item._present = True
        super().append(item)
        return item

    def append(self, value: Any) -> None:
        super().append(self._field.coerce(value, self._type_name))

    def extend(self, values) -> None:
        for v in values:
            self.append(v)


class Message:
    """A plain-Python protobuf message: attributes are its fields (``message`` makes the
    subclasses). An unset scalar reads as its default; a repeated field is a ``Repeated``
    list; a sub-message is made when first read and printed once it holds anything."""

    TYPE_NAME: ClassVar[str] = "Message"
    FIELDS: ClassVar[tuple] = ()
    _BY_NAME: ClassVar[dict] = {}

    def __init__(self, **values) -> None:
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_present", False)
        for name, value in values.items():
            setattr(self, name, value)

    def _field(self, name: str) -> Field:
        f = self._BY_NAME.get(name)
        if f is None:
            raise AttributeError(f'Message type "{self.TYPE_NAME}" has no field named "{name}"')
        return f

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        f, values = self._field(name), self._values
        if name not in values:
            if f.repeated:
                values[name] = Repeated(f, self.TYPE_NAME)
            elif f.is_message:
                values[name] = f.kind()
            else:
                return f.default
        return values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        f = self._field(name)
        if f.repeated:
            self._values[name] = Repeated(f, self.TYPE_NAME, value)
        else:
            self._values[name] = f.coerce(value, self.TYPE_NAME)
            if f.is_message:
                value._present = True

    def HasField(self, name: str) -> bool:  # noqa: N802 - protobuf's name
        """Whether the (non-repeated) field was set, as protobuf's ``HasField``."""
        f = self._field(name)
        if f.repeated:
            raise ValueError(f'Protocol message has no singular "{name}" field.')
        got = self._values.get(name)
        return got is not None and (not f.is_message or got._shows())

    def ClearField(self, name: str) -> None:  # noqa: N802 - protobuf's name
        self._field(name)
        self._values.pop(name, None)

    def _shows(self) -> bool:
        """Whether this sub-message prints: it was set, parsed or holds something."""
        return self._present or any(
            (v._shows() if isinstance(v, Message) else (len(v) > 0 if isinstance(v, Repeated) else True))
            for v in self._values.values())

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and to_text(self) == to_text(other)

    __hash__ = None  # mutable

    def __str__(self) -> str:
        return to_text(self)

    def __repr__(self) -> str:
        body = to_text(self).strip().replace("\n", "; ")
        return f"{type(self).__name__}({body})"


def message(type_name: str, spec: str, **kinds) -> type:
    """A new Message subclass named by ``type_name`` (protobuf's full name, for messages).

    Args:
        type_name: ``"paddle.framework.DataFeedDesc"``.
        spec: its fields in field-number order (the order protobuf prints them),
            ``name:kind[=default]`` each, space separated; ``*kind`` repeats. A kind is a
            scalar (string int32 int64 uint32 uint64 bool float double) or a name given in
            ``kinds``.
        kinds: the Message subclasses and enums (dicts name -> number) the spec names.

    Returns:
        The class.

    Raises:
        ValueError: a kind that is neither a scalar nor given.
    """
    fields = []
    for entry in spec.split():
        name, _, kind = entry.partition(":")
        kind, _, default = kind.partition("=")
        repeated = kind.startswith("*")
        kind = kind.lstrip("*")
        k = kinds.get(kind, kind)
        if not isinstance(k, dict) and k not in _SCALARS and not (isinstance(k, type) and issubclass(k, Message)):
            raise ValueError(f"message {type_name}: field {name} has unknown kind {kind!r}")
        f = Field(name, k, repeated, None)
        if isinstance(k, dict):
            f.default = k[default] if default else min(k.values())
        elif k in _SCALARS:
            f.default = _scalar(f, _Tokens(default), type_name) if default else _ZERO.get(k, 0)
        fields.append(f)
    short = type_name.rpartition(".")[2]
    return type(short, (Message,), {"TYPE_NAME": type_name, "FIELDS": tuple(fields),
                                    "_BY_NAME": {f.name: f for f in fields}, "__module__": __name__})


# -- printing ------------------------------------------------------------------------------------
def _escape(text: str) -> str:
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        if c in "\n\r\t":
            out.append({"\n": r"\n", "\r": r"\r", "\t": r"\t"}[c])
        elif c in "\"'\\":
            out.append("\\" + c)
        elif b < 32 or b >= 127:
            out.append(f"\\{b:03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _show(f: Field, value: Any) -> str:
    kind = f.kind
    if isinstance(kind, dict):
        return next((n for n, v in kind.items() if v == value), str(value))
    if kind == "string":
        return _escape(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("float", "double"):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return str(np.float32(value)) if kind == "float" else repr(float(value))
    return str(value)


def to_text(msg: Message, indent: int = 0) -> str:
    """``msg`` in protobuf's text format (as ``text_format.MessageToString``)."""
    pad, lines = " " * indent, []
    for f in msg.FIELDS:
        if f.name not in msg._values:
            continue
        got = msg._values[f.name]
        for value in (got if f.repeated else [got]):
            if f.is_message:
                if f.repeated or value._shows():
                    lines.append(f"{pad}{f.name} {{\n{to_text(value, indent + 2)}{pad}}}\n")
            else:
                lines.append(f"{pad}{f.name}: {_show(f, value)}\n")
    return "".join(lines)


# -- parsing -------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""(?P<skip>\s+|\#[^\n]*)
    |(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<num>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?))
    |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<punct>[{}<>\[\]:,;-])""", re.VERBOSE)
_ESCAPES = {"n": 10, "r": 13, "t": 9, "a": 7, "b": 8, "f": 12, "v": 11, "\\": 92, "'": 39, '"': 34, "?": 63}


class _Tokens:
    """The tokens of a text, each with its 1-based line and column."""

    def __init__(self, text: str) -> None:
        self.items: list = []
        pos, line, line_start = 0, 1, 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise TextFormatError(f"{line}:{pos - line_start + 1} : Unexpected character {text[pos]!r}.")
            if m.lastgroup != "skip":
                self.items.append((m.lastgroup, m.group(), line, pos - line_start + 1))
            for i in [i for i in range(pos, m.end()) if text[i] == "\n"]:
                line, line_start = line + 1, i + 1
            pos = m.end()
        self.i = 0
        self.end = (line, pos - line_start + 1)

    def peek(self):
        return self.items[self.i] if self.i < len(self.items) else (None, "", *self.end)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def error(self, what: str, tok=None) -> TextFormatError:
        _, _, line, col = tok or self.peek()
        return TextFormatError(f"{line}:{col} : {what}")

    def accept(self, text: str) -> bool:
        if self.peek()[1] == text and self.peek()[0] == "punct":
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.error(f'Expected "{text}".')


def _unquote(token: str) -> bytes:
    body, out, i = token[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group()
            out.append(int(digits, 8) & 0xFF)
            i += 1 + len(digits)
        elif nxt == "x":
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            if digits is None:
                raise ValueError("Invalid escape sequence \\x with no digits")
            out.append(int(digits.group(), 16))
            i += 2 + len(digits.group())
        elif nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            raise ValueError(f"Invalid escape sequence \\{nxt}")
    return bytes(out)


def _integer(text: str) -> int:
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text)
    if body[:2] in ("0x", "0X"):
        return sign * int(body, 16)
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body, 8)
    return sign * int(body)


def _scalar(f: Field, toks: _Tokens, type_name: str) -> Any:
    """One value of scalar or enum field ``f``."""
    tok = toks.peek()
    kind, text = tok[0], tok[1]
    if f.kind == "string":
        if kind != "str":
            raise toks.error(f"Expected string but found {text!r}.")
        raw = b""
        while toks.peek()[0] == "str":
            try:
                raw += _unquote(toks.take()[1])
            except ValueError as e:
                raise toks.error(f"Couldn't parse string: {e}", tok) from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise toks.error(f"Couldn't parse string: invalid UTF-8 in {text}", tok) from None
    negative = kind == "punct" and text == "-"
    if negative:
        toks.take()
        kind, text = toks.peek()[0], "-" + toks.peek()[1]
    toks.take()
    shown = f"'{f.name}: {text}'"
    if f.kind == "bool":
        value = {"true": True, "True": True, "t": True, "1": True,
                 "false": False, "False": False, "f": False, "0": False}.get(text)
        if value is None:
            raise toks.error(f"{shown}: Expected \"true\" or \"false\", found {text!r}.", tok)
        return value
    if isinstance(f.kind, dict):
        if kind == "id" and text in f.kind:
            return f.kind[text]
        if kind == "num" and re.fullmatch(r"-?\d+", text) and int(text) in f.kind.values():
            return int(text)
        raise toks.error(f"{shown}: Enum type has no value named {text}.", tok)
    if f.kind in ("float", "double"):
        special = {"inf": "inf", "-inf": "-inf", "infinity": "inf", "-infinity": "-inf", "nan": "nan", "-nan": "nan"}
        if kind == "id" or negative and text.lower() in special:
            if text.lower() not in special:
                raise toks.error(f"{shown}: Couldn't parse float: {text}", tok)
            return f.coerce(float(special[text.lower()]), type_name)
        if kind != "num":
            raise toks.error(f"{shown}: Couldn't parse float: {text}", tok)
        try:
            return f.coerce(float(text.rstrip("fF")), type_name)
        except ValueError:
            raise toks.error(f"{shown}: Couldn't parse float: {text}", tok) from None
    if kind != "num" or re.search(r"[.eEfF]", text) and not re.match(r"-?0[xX]", text):
        raise toks.error(f"{shown}: Couldn't parse integer: {text}", tok)
    try:
        return f.coerce(_integer(text), type_name)
    except ValueError as e:
        raise toks.error(f"{shown}: {e}", tok) from None


def _body(msg: Message, toks: _Tokens, close: str | None) -> None:
    seen: set = set()
    while True:
        kind, text = toks.peek()[:2]
        if close is not None and kind == "punct" and text == close:
            toks.take()
            return
        if kind is None:
            if close is not None:
                raise toks.error(f'Expected "{close}".')
            return
        if kind != "id":
            raise toks.error(f"Expected identifier or number, got {text}.")
        f = msg._BY_NAME.get(text)
        if f is None:
            raise toks.error(f'Message type "{msg.TYPE_NAME}" has no field named "{text}".')
        toks.take()
        if f.is_message:
            toks.accept(":")
        else:
            toks.expect(":")
        if not f.repeated and text in seen:  # reported at the value, as protobuf does
            raise toks.error(f'Message type "{msg.TYPE_NAME}" should not have multiple "{text}" fields.')
        seen.add(text)
        if f.is_message:
            for sub in _list(toks, f, lambda: _submessage(f, toks)):
                if f.repeated:
                    getattr(msg, f.name).append(sub)
                else:
                    setattr(msg, f.name, sub)
        else:
            for value in _list(toks, f, lambda: _scalar(f, toks, msg.TYPE_NAME)):
                if f.repeated:
                    getattr(msg, f.name).append(value)
                else:
                    msg._values[f.name] = value
        if not toks.accept(","):
            toks.accept(";")


def _list(toks: _Tokens, f: Field, one) -> list:
    """One value, or a ``[a, b]`` list of them for a repeated field."""
    if f.repeated and toks.accept("["):
        values = []
        if not toks.accept("]"):
            values.append(one())
            while toks.accept(","):
                values.append(one())
            toks.expect("]")
        return values
    return [one()]


def _submessage(f: Field, toks: _Tokens) -> Message:
    if toks.accept("{"):
        close = "}"
    elif toks.accept("<"):
        close = ">"
    else:
        raise toks.error('Expected "{".')
    sub = f.kind()
    sub._present = True
    _body(sub, toks, close)
    return sub


def parse(text: str, cls: type, into: Message | None = None) -> Message:
    """A ``cls`` message read from protobuf text format ``text`` (merged ``into`` one given).

    Raises:
        TextFormatError: ``line:column : what`` (an unknown field, a non-repeated field given
            twice, a value of the wrong kind, an integer out of range).
    """
    msg = into if into is not None else cls()
    _body(msg, _Tokens(text), None)
    return msg
