"""Avro schemas: parsed and checked by fastavro (names, types, defaults, references as named
types), and Avro's schema resolution rules as the compatibility check (Apache Avro's
``SchemaCompatibility``, which Confluent's registry uses).

Compatibility of a reader schema with data written with a writer schema:

- same primitive type: compatible; promotions: int to long, float, double; long to float,
  double; float to double; string to bytes and bytes to string;
- arrays and maps: their items / values; fixed: name and size; enums: name, and every writer
  symbol known to the reader unless the reader has a default symbol;
- records: names (a reader alias may name the writer); every reader field found in the
  writer (by name, or one of its aliases) with a compatible type, or else having a default;
- unions: every writer branch readable by the reader; a reader union reads a non-union
  writer when one of its branches does; a writer union needs every branch readable.

Each incompatibility is reported as Confluent words it (``errorType``, ``description`` with
the path, ``additionalInfo``); ``READER`` and ``WRITER`` stand for "new" / "old" until the
caller knows which side is which.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastavro.schema import parse_schema

from controlplane.schema_registry import errors

READER = "\x00reader\x00"
WRITER = "\x00writer\x00"
PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
PROMOTIONS = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}
NAMED = frozenset({"record", "error", "enum", "fixed"})
PRIMITIVE_BODIES = {name: {"type": name} for name in PRIMITIVES}
"""One body per primitive: the checker's memo keys on the bodies' identity."""


@dataclass
class AvroSchema:
    raw: Any
    """The schema as JSON (what was sent)."""
    parsed: Any
    """fastavro's form: full names, named types referred to by name after their definition."""
    named: dict[str, Any] = field(default_factory=dict)
    """Every named type it can use (its own and its references'), by full name."""

    @property
    def canonical(self) -> str:
        """The schema as sent, without insignificant whitespace (what is stored); a primitive
        written as ``{"type": "string"}`` is ``"string"``, as Avro prints it."""
        raw = self.raw
        if isinstance(raw, dict) and set(raw) == {"type"} and raw["type"] in PRIMITIVES:
            raw = raw["type"]
        return json.dumps(raw, separators=(",", ":"), ensure_ascii=False)

    @property
    def normalized(self) -> str:
        """``normalize=true``: full names, keys sorted, no whitespace: equal for schemas that
        differ only in how they are written."""
        return json.dumps(self.parsed, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def parse(text: str, references: Iterable[AvroSchema] = ()) -> AvroSchema:
    """Parse ``text`` with the named types of ``references`` (their own references first);
    42201 naming the problem when it is not a valid Avro schema."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise _invalid(f"not JSON: {exc}") from None
    named: dict[str, Any] = {}
    for reference in references:
        for name, schema in reference.named.items():
            named.setdefault(name, schema)
    known = dict(named)
    try:
        parsed = parse_schema(raw, named_schemas=known, _write_hint=False)
    except Exception as exc:  # fastavro raises several types (SchemaParseException, ...)
        raise _invalid(str(exc) or type(exc).__name__) from None
    return AvroSchema(raw=raw, parsed=parsed, named=known)


def _invalid(detail: str) -> errors.RegistryError:
    return errors.invalid_schema(f"Invalid schema of type AVRO, details: {detail}")


# ------------------------------------------------------------------ compatibility


@dataclass(frozen=True)
class _Node:
    kind: str
    """A primitive's name, or record, enum, fixed, array, map, union."""
    body: Any


def _resolve(node: Any, named: Mapping[str, Any]) -> _Node:
    if isinstance(node, list):
        return _Node("union", node)
    if isinstance(node, str):
        if node in PRIMITIVES:
            return _Node(node, PRIMITIVE_BODIES[node])
        target = named.get(node)
        if target is None:  # parse() checked every name: a reference lost since
            raise _invalid(f"unknown type {node!r}")
        return _resolve(target, named)
    if isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, (dict, list)) or (
            isinstance(kind, str) and kind not in PRIMITIVES | NAMED | {"array", "map"}
        ):
            return _resolve(kind, named)
        if kind == "error":
            kind = "record"
        return _Node(str(kind), node)
    raise _invalid(f"not a schema: {node!r}")


def _simple(name: str) -> str:
    return name.rpartition(".")[2]


def _qualified_aliases(body: Mapping[str, Any]) -> set[str]:
    name = str(body.get("name", ""))
    namespace = name.rpartition(".")[0]
    out = set()
    for alias in body.get("aliases") or ():
        text = str(alias)
        out.add(text if "." in text or not namespace else f"{namespace}.{text}")
    return out


@dataclass(frozen=True)
class Incompatibility:
    kind: str
    location: tuple[str, ...]
    info: str

    def message(self) -> str:
        """Confluent's text (its ``avro/Difference.java``), with READER/WRITER to fill in."""
        path = "/" + "/".join(self.location)
        descriptions = {
            "FIXED_SIZE_MISMATCH": f"The size of FIXED type field at path '{path}' in the "
            f"{READER} schema does not match with the {WRITER} schema",
            "TYPE_MISMATCH": f"The type (path '{path}') of a field in the {READER} schema does "
            f"not match with the {WRITER} schema",
            "NAME_MISMATCH": f"The name of the schema has changed (path '{path}')",
            "MISSING_ENUM_SYMBOLS": f"The {READER} schema is missing enum symbols "
            f"'{self.info}' at path '{path}' in the {WRITER} schema",
            "MISSING_UNION_BRANCH": f"The {READER} schema is missing a type inside a union "
            f"field at path '{path}' in the {WRITER} schema",
            "READER_FIELD_MISSING_DEFAULT_VALUE": f"The field '{self.info}' at path '{path}' "
            f"in the {READER} schema has no default value and is missing in the {WRITER} schema",
        }
        return (
            f"{{errorType:'{self.kind}', description:'{descriptions.get(self.kind, '')}', "
            f"additionalInfo:'{self.info}'}}"
        )


class _Checker:
    def __init__(self, reader: AvroSchema, writer: AvroSchema) -> None:
        self.reader_named = reader.named
        self.writer_named = writer.named
        self.memo: dict[tuple[int, int], list[Incompatibility]] = {}

    def check(self, reader: Any, writer: Any, location: tuple[str, ...]) -> list[Incompatibility]:
        r = _resolve(reader, self.reader_named)
        w = _resolve(writer, self.writer_named)
        key = (id(r.body), id(w.body))
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = []  # in progress: a recursive type is assumed compatible with itself
        found = self._check(r, w, location)
        self.memo[key] = found
        return found

    def _check(self, r: _Node, w: _Node, location: tuple[str, ...]) -> list[Incompatibility]:
        if r.kind == w.kind:
            return self._same_kind(r, w, location)
        if w.kind == "union":
            out: list[Incompatibility] = []
            for index, branch in enumerate(w.body):
                out += self.check(r.body, branch, (*location, str(index)))
            return out
        if w.kind in PROMOTIONS.get(r.kind, ()):
            return []
        if r.kind == "union":
            for branch in r.body:
                if not self.check(branch, w.body, location):
                    return []
            return [
                Incompatibility(
                    "MISSING_UNION_BRANCH",
                    location,
                    f"reader union lacking writer type: {w.kind.upper()}",
                )
            ]
        return [
            Incompatibility(
                "TYPE_MISMATCH",
                location,
                f"reader type: {r.kind.upper()} not compatible with writer type: {w.kind.upper()}",
            )
        ]

    def _same_kind(self, r: _Node, w: _Node, location: tuple[str, ...]) -> list[Incompatibility]:
        kind = r.kind
        if kind in PRIMITIVES:
            return []
        if kind == "array":
            return self.check(r.body["items"], w.body["items"], (*location, "items"))
        if kind == "map":
            return self.check(r.body["values"], w.body["values"], (*location, "values"))
        if kind == "union":
            out: list[Incompatibility] = []
            for index, branch in enumerate(w.body):
                if self.check(r.body, branch, (*location, str(index))):
                    branch_kind = _resolve(branch, self.writer_named).kind
                    out.append(
                        Incompatibility(
                            "MISSING_UNION_BRANCH",
                            (*location, str(index)),
                            f"reader union lacking writer type: {branch_kind.upper()}",
                        )
                    )
            return out
        out = self._names(r.body, w.body, location)
        if kind == "fixed" and r.body.get("size") != w.body.get("size"):
            out.append(
                Incompatibility(
                    "FIXED_SIZE_MISMATCH",
                    (*location, "size"),
                    f"expected: {w.body.get('size')}, found: {r.body.get('size')}",
                )
            )
        elif kind == "enum":
            out += self._symbols(r.body, w.body, location)
        elif kind == "record":
            out += self._fields(r.body, w.body, location)
        return out

    @staticmethod
    def _names(
        reader: Mapping[str, Any], writer: Mapping[str, Any], location: tuple[str, ...]
    ) -> list[Incompatibility]:
        writer_name = str(writer.get("name", ""))
        if _simple(str(reader.get("name", ""))) == _simple(writer_name):
            return []
        if writer_name in _qualified_aliases(reader):
            return []
        return [Incompatibility("NAME_MISMATCH", (*location, "name"), f"expected: {writer_name}")]

    @staticmethod
    def _symbols(
        reader: Mapping[str, Any], writer: Mapping[str, Any], location: tuple[str, ...]
    ) -> list[Incompatibility]:
        missing = sorted(set(writer.get("symbols", ())) - set(reader.get("symbols", ())))
        if not missing or reader.get("default") in reader.get("symbols", ()):
            return []
        return [
            Incompatibility(
                "MISSING_ENUM_SYMBOLS", (*location, "symbols"), "[" + ", ".join(missing) + "]"
            )
        ]

    def _fields(
        self, reader: Mapping[str, Any], writer: Mapping[str, Any], location: tuple[str, ...]
    ) -> list[Incompatibility]:
        writer_fields = {str(f["name"]): f for f in writer.get("fields", ())}
        out: list[Incompatibility] = []
        for index, reader_field in enumerate(reader.get("fields", ())):
            where = (*location, "fields", str(index))
            writer_field = writer_fields.get(str(reader_field["name"]))
            for alias in reader_field.get("aliases") or ():
                if writer_field is not None:
                    break
                writer_field = writer_fields.get(str(alias))
            if writer_field is None:
                if "default" not in reader_field:
                    out.append(
                        Incompatibility(
                            "READER_FIELD_MISSING_DEFAULT_VALUE", where, str(reader_field["name"])
                        )
                    )
                continue
            out += self.check(reader_field["type"], writer_field["type"], (*where, "type"))
        return out


def can_read(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """What keeps ``reader`` from reading data written with ``writer`` (empty: it can),
    in Confluent's words with READER / WRITER placeholders."""
    found = _Checker(reader, writer).check(reader.parsed, writer.parsed, ())
    return [issue.message() for issue in found]
