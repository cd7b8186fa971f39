"""Kafka's properties format (``server.properties``; Java's ``Properties.load``), as
``aws_msk_configuration.server_properties`` takes it, to and from the map of settings the
Configurations API takes.

Parsing follows ``java.util.Properties.load``: a line that is blank or starts with ``#`` or
``!`` (after leading blanks) is skipped; a line ending in an odd number of backslashes goes
on in the next one (whose leading blanks are dropped); the key ends at the first ``=``,
``:`` or blank not escaped, and one ``=`` or ``:`` with blanks around it separates it from
the value; ``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX`` are escapes and a backslash before
any other character is that character. Unlike Java, a key given twice is an error (the
second would silently win).

Rendering writes one ``key = value`` line per setting, sorted by key: the form AWS's
documentation uses in its ``<<PROPERTIES`` heredocs, so that such a block reads back equal.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

BLANKS = " \t\f"
SEPARATORS = "=:"
ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
UNESCAPES = {v: k for k, v in ESCAPES.items()}


class PropertiesError(ValueError):
    """Text that is not in the properties format; ``line`` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of its first line, text) of every logical line that is not a comment."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(BLANKS)
            i += 1
        if _continues(line):
            line = line[:-1]
        yield start + 1, line


def _continues(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _unescape(raw: str, number: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        i += 1
        if char != "\\" or i >= len(raw):
            out.append(char)
            continue
        char = raw[i]
        i += 1
        if char == "u":
            digits = raw[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(number, f"malformed \\u escape {raw[i - 2 : i + 4]!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(ESCAPES.get(char, char))
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """The raw key and raw value of a logical line."""
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in SEPARATORS or char in BLANKS:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(BLANKS)
    if rest[:1] and rest[0] in SEPARATORS:
        rest = rest[1:].lstrip(BLANKS)
    return key, rest


def parse(text: str) -> dict[str, str]:
    """The settings of ``text``; :class:`PropertiesError` names the line of a mistake."""
    settings: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        key = _unescape(raw_key, number)
        if not key:
            raise PropertiesError(number, f"no key before the value in {line!r}")
        if key in settings:
            raise PropertiesError(number, f"{key!r} is given twice; keep one line for it")
        settings[key] = _unescape(raw_value, number)
    return settings


def _escape(text: str, *, key: bool) -> str:
    special = SEPARATORS + BLANKS if key else ""
    leading = "#!" + BLANKS if key else BLANKS
    out = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in UNESCAPES:
            out.append("\\" + UNESCAPES[char])
        elif char in special or (i == 0 and char in leading):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def render(settings: Mapping[str, str]) -> str:
    """``key = value`` lines, sorted by key, each ending in a newline (``""`` for none)."""
    return "".join(
        f"{_escape(k, key=True)} = {_escape(v, key=False)}\n" for k, v in sorted(settings.items())
    )
