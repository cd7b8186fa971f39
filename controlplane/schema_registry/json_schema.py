"""JSON Schema: checked with ``jsonschema`` (the document must be valid against its
draft's metaschema, draft-07 when ``$schema`` does not say, and every ``$ref`` must resolve:
inside the document, or to a referenced schema by its reference name or its ``$id``), and
compared as Confluent's registry compares them (its ``json/diff`` package, STRICT policy).

The comparison walks the previous schema (``original``) and the new one (``update``) side by
side and records each difference with its JSON path (``#/properties/age``); differences that
are not in :data:`COMPATIBLE` make the new schema unable to read what the old one allowed.
The common cases:

- a type changed (string to integer) is TYPE_CHANGED; integer to number is TYPE_EXTENDED
  (compatible), number to integer TYPE_NARROWED;
- properties: the *content model* decides. An object is open when it allows any other
  property (``additionalProperties`` absent or true, no ``patternProperties``). Removing a
  property is compatible when the new schema is open (the old data still validates);
  adding one is compatible when the old schema was closed (``additionalProperties: false``:
  old data never had it), or when it is optional with an empty schema; a property added to
  an open model may clash with what old data had (incompatible under STRICT);
- ``required`` gained is incompatible (unless the property has a default), lost is fine;
- bounds (maxLength, minimum, maxItems ...) may widen, not narrow; enums may grow, not
  shrink; ``anyOf``/``oneOf`` may gain branches; ``additionalProperties`` may be allowed
  where it was not.

Messages are Confluent's (``Difference.java``), READER / WRITER standing for new / old.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft7Validator, SchemaError
from jsonschema.validators import validator_for

from controlplane.schema_registry import errors
from controlplane.schema_registry.json_words import COMPATIBLE, describe

OBJECT_KEYS = frozenset(
    {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
     "maxProperties", "dependencies", "propertyNames"}
)  # fmt: skip
ARRAY_KEYS = frozenset({"items", "additionalItems", "minItems", "maxItems", "uniqueItems"})
STRING_KEYS = frozenset({"minLength", "maxLength", "pattern", "format"})
NUMBER_KEYS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
COMBINERS = ("allOf", "anyOf", "oneOf")


@dataclass
class JsonSchema:
    raw: Any
    references: dict[str, Any] = field(default_factory=dict)
    """Referenced documents by reference name and by ``$id``."""

    @property
    def canonical(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), ensure_ascii=False)

    @property
    def normalized(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _invalid(detail: str) -> errors.RegistryError:
    return errors.invalid_schema(f"Invalid schema of type JSON, details: {detail}")


def parse(text: str, references: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    """``text`` checked against its metaschema with its ``$ref``s resolved; 42201 if not."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise _invalid(f"not JSON: {exc}") from None
    if not isinstance(raw, (dict, bool)):
        raise _invalid("a JSON Schema is an object or a boolean")
    try:
        validator_for(raw, default=Draft7Validator).check_schema(raw)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise _invalid(f"{exc.message} at {where}") from None
    docs: dict[str, Any] = {}
    for name, reference in (references or {}).items():
        docs[name] = reference.raw
        for key, doc in reference.references.items():
            docs.setdefault(key, doc)
        if isinstance(reference.raw, dict) and isinstance(reference.raw.get("$id"), str):
            docs.setdefault(reference.raw["$id"], reference.raw)
    schema = JsonSchema(raw, docs)
    for document, ref in _refs(raw, raw):
        if _resolve_ref(schema, document, ref) is None:
            raise _invalid(f"$ref {ref!r} does not resolve: give the schema it names in references")
    return schema


def _refs(document: Any, node: Any) -> Iterator[tuple[Any, str]]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield document, ref
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                yield from _refs(document, value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(document, value)


def _pointer(node: Any, pointer: str) -> Any:
    for raw in pointer.lstrip("/").split("/") if pointer.strip("/") else ():
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _resolve_ref(schema: JsonSchema, document: Any, ref: str) -> tuple[Any, Any] | None:
    """(document, node) that ``ref`` names from inside ``document``; None if nothing."""
    base, _, fragment = ref.partition("#")
    if base:
        target = schema.references.get(base)
        if target is None:
            return None
        document = target
    node = _pointer(document, fragment)
    return None if node is None else (document, node)


# ------------------------------------------------------------------ the comparison

_Located = tuple[Any, Any]
"""(document, node): a node and the document its local ``$ref``s are relative to."""


@dataclass(frozen=True)
class _View:
    kind: str
    """object, array, string, number, boolean, null, enum, const, not, combined, empty,
    false."""
    node: Any
    document: Any
    criterion: str = ""
    """allOf / anyOf / oneOf for combined views."""
    parts: tuple[_Located, ...] = ()
    """The subschemas of a combined view."""


def _typed(node: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return {**node, "type": kind}


def _base_kind(node: Mapping[str, Any]) -> str | None:
    kind = node.get("type")
    if isinstance(kind, str):
        return "number" if kind == "integer" else kind
    keys = set(node)
    for name, group in (
        ("object", OBJECT_KEYS),
        ("array", ARRAY_KEYS),
        ("string", STRING_KEYS),
        ("number", NUMBER_KEYS),
    ):
        if keys & group:
            return name
    return None


class _Differ:
    def __init__(self, original: JsonSchema, update: JsonSchema) -> None:
        self.schemas = {"o": original, "u": update}
        self.memo: dict[tuple[int, int], list[tuple[str, str]]] = {}
        self.keep: list[tuple[Any, Any]] = []
        """Every node pair memoized, kept alive so that no id is reused during the walk."""

    # ---- views

    def _deref(self, side: str, located: _Located) -> _Located:
        """The node a ``$ref`` chain ends at (an unresolvable one: the empty schema)."""
        document, node = located
        for _ in range(64):  # $ref chains: bounded
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                break
            target = _resolve_ref(self.schemas[side], document, node["$ref"])
            if target is None:
                return document, {}
            document, node = target
        return document, node

    def view(self, side: str, located: _Located) -> _View:
        document, node = self._deref(side, located)
        if node is True or node == {}:
            return _View("empty", node, document)
        if node is False or not isinstance(node, dict):
            return _View("false", node, document)
        kinds = node.get("type")
        if isinstance(kinds, list) and len(kinds) == 1:
            node = _typed(node, str(kinds[0]))
        if isinstance(kinds, list) and len(kinds) != 1:
            criterion, parts = "anyOf", tuple((document, _typed(node, str(k))) for k in kinds)
        else:
            pieces = _pieces(node)
            if not pieces:
                return _View("empty", node, document)
            if len(pieces) > 1:
                criterion = "allOf"
                parts = tuple((document, _only(node, kind)) for kind in pieces)
            elif pieces[0] in COMBINERS:
                criterion = pieces[0]
                parts = tuple((document, n) for n in node[criterion])
            else:
                return _View(pieces[0], node, document)
        return _View("combined", node, document, criterion, parts)

    # ---- the walk

    def compare(self, original: _Located | None, update: _Located | None) -> list[tuple[str, str]]:
        """Differences (type, path relative to here: "" is this node)."""
        if original is None and update is None:
            return []
        if original is None:
            return [("SCHEMA_ADDED", "")]
        if update is None:
            return [("SCHEMA_REMOVED", "")]
        o = self.view("o", original)
        u = self.view("u", update)
        key = (id(o.node), id(u.node))
        if key in self.memo:
            return self.memo[key]
        self.keep.append((o.node, u.node))
        self.memo[key] = []
        found = self._types(o, u)
        self.memo[key] = found
        return found

    def _one_side_combined(self, o: _View, u: _View) -> list[tuple[str, str]] | None:
        """A schema that became (or stopped being) one branch of a union or a product: the
        branch that matches, if any (Confluent's special cases)."""
        pairs: list[tuple[_Located, _Located]]
        if (
            o.kind != "combined"
            and u.kind == "combined"
            and (len(u.parts) == 1 or u.criterion in ("anyOf", "oneOf"))
        ):
            pairs = [((o.document, o.node), part) for part in u.parts]
            extra, single = "SUM_TYPE_EXTENDED", len(u.parts) == 1
        elif (
            o.kind == "combined"
            and u.kind != "combined"
            and (len(o.parts) == 1 or o.criterion == "allOf")
        ):
            pairs = [(part, (u.document, u.node)) for part in o.parts]
            extra, single = "PRODUCT_TYPE_NARROWED", len(o.parts) == 1
        else:
            return None
        for before, after in pairs:
            sub = self.compare(before, after)
            if _compatible(sub):
                return sub + ([] if single else [(extra, "")])
        return None

    def _types(self, o: _View, u: _View) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        matched = self._one_side_combined(o, u)
        if matched is not None:
            return matched
        if o.kind != u.kind:
            if o.kind == "false" or u.kind == "empty":
                return []
            return [("TYPE_CHANGED", "")]
        if o.kind in ("empty", "false", "boolean", "null"):
            return out
        for key, kind in (
            ("$id", "ID_CHANGED"),
            ("title", "TITLE_CHANGED"),
            ("description", "DESCRIPTION_CHANGED"),
            ("default", "DEFAULT_CHANGED"),
        ):
            if o.node.get(key) != u.node.get(key):
                out.append((kind, ""))
        compare = {
            "string": self._string,
            "number": self._number,
            "enum": self._enum,
            "const": self._const,
            "combined": self._combined,
            "not": self._not,
            "object": self._object,
            "array": self._array,
        }[o.kind]
        return out + compare(o, u)

    @staticmethod
    def _bounds(
        o: Mapping[str, Any], u: Mapping[str, Any], key: str, label: str
    ) -> list[tuple[str, str]]:
        a, b = o.get(key), u.get(key)
        if not _number(a):
            a = None
        if not _number(b):
            b = None
        if a == b:
            return []
        if a is None:
            change = "ADDED"
        elif b is None:
            change = "REMOVED"
        else:
            change = "INCREASED" if a < b else "DECREASED"
        return [(f"{label}_{change}", key)]

    def _string(self, o: _View, u: _View) -> list[tuple[str, str]]:
        out = self._bounds(o.node, u.node, "maxLength", "MAX_LENGTH")
        out += self._bounds(o.node, u.node, "minLength", "MIN_LENGTH")
        a, b = o.node.get("pattern"), u.node.get("pattern")
        if a is None and b is not None:
            out.append(("PATTERN_ADDED", "pattern"))
        elif a is not None and b is None:
            out.append(("PATTERN_REMOVED", "pattern"))
        elif a != b:
            out.append(("PATTERN_CHANGED", "pattern"))
        return out

    def _number(self, o: _View, u: _View) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for key, label in (
            ("maximum", "MAXIMUM"),
            ("minimum", "MINIMUM"),
            ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
            ("exclusiveMinimum", "EXCLUSIVE_MINIMUM"),
        ):
            out += self._bounds(o.node, u.node, key, label)
        a, b = o.node.get("multipleOf"), u.node.get("multipleOf")
        if _number(a) or _number(b):
            if not _number(b):
                out.append(("MULTIPLE_OF_REMOVED", "multipleOf"))
            elif not _number(a):
                out.append(("MULTIPLE_OF_ADDED", "multipleOf"))
            elif a != b:
                if a and b % a == 0:
                    out.append(("MULTIPLE_OF_EXPANDED", "multipleOf"))
                elif b and a % b == 0:
                    out.append(("MULTIPLE_OF_REDUCED", "multipleOf"))
                else:
                    out.append(("MULTIPLE_OF_CHANGED", "multipleOf"))
        o_int = _declared(o.node) == "integer"
        u_int = _declared(u.node) == "integer"
        if o_int != u_int:
            out.append(("TYPE_EXTENDED" if o_int else "TYPE_NARROWED", ""))
        return out

    @staticmethod
    def _enum(o: _View, u: _View) -> list[tuple[str, str]]:
        a = {_key(v) for v in o.node.get("enum") or ()}
        b = {_key(v) for v in u.node.get("enum") or ()}
        if a == b:
            return []
        if b >= a:
            return [("ENUM_ARRAY_EXTENDED", "enum")]
        if a >= b:
            return [("ENUM_ARRAY_NARROWED", "enum")]
        return [("ENUM_ARRAY_CHANGED", "enum")]

    @staticmethod
    def _const(o: _View, u: _View) -> list[tuple[str, str]]:
        if _key(o.node.get("const")) != _key(u.node.get("const")):
            return [("ENUM_ARRAY_CHANGED", "const")]
        return []

    def _not(self, o: _View, u: _View) -> list[tuple[str, str]]:
        sub = self.compare((u.document, u.node.get("not")), (o.document, o.node.get("not")))
        return [("NOT_TYPE_NARROWED" if _compatible(sub) else "NOT_TYPE_EXTENDED", "not")]

    def _combined(self, o: _View, u: _View) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if o.criterion != u.criterion:
            single_o, single_u = len(o.parts) == 1, len(u.parts) == 1
            if (
                u.criterion == "anyOf"
                or (single_o and single_u)
                or (single_o and u.criterion == "oneOf")
                or (single_u and o.criterion == "allOf")
            ):
                out.append(("COMBINED_TYPE_EXTENDED", ""))
            else:
                return [("COMBINED_TYPE_CHANGED", "")]
        if len(o.parts) < len(u.parts):
            out.append(
                ("PRODUCT_TYPE_EXTENDED" if u.criterion == "allOf" else "SUM_TYPE_EXTENDED", "")
            )
        elif len(o.parts) > len(u.parts):
            out.append(
                (
                    "SUM_TYPE_NARROWED"
                    if o.criterion in ("anyOf", "oneOf")
                    else "PRODUCT_TYPE_NARROWED",
                    "",
                )
            )
        edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
        for i, a in enumerate(o.parts):
            for j, b in enumerate(u.parts):
                sub = self.compare(a, b)
                if _compatible(sub):
                    prefix = f"{o.criterion}/{i}"
                    edges.setdefault(i, {})[j] = [(t, _join(prefix, p)) for t, p in sub]
        matching = _match(edges, len(o.parts))
        for i, j in sorted(matching.items()):
            out += edges[i][j]
        if len(matching) < min(len(o.parts), len(u.parts)):
            out.append(("COMBINED_TYPE_SUBSCHEMAS_CHANGED", ""))
        return out

    def _object(self, o: _View, u: _View) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        op, up = _props(o.node), _props(u.node)
        o_req, u_req = set(o.node.get("required") or ()), set(u.node.get("required") or ())
        for name in op:
            if name in up:
                if name in o_req and name not in u_req:
                    out.append(("REQUIRED_ATTRIBUTE_REMOVED", f"required/{name}"))
                elif name not in o_req and name in u_req:
                    kind = "WITH_DEFAULT_" if _has_default(up[name]) else ""
                    out.append((f"REQUIRED_ATTRIBUTE_{kind}ADDED", f"required/{name}"))
        for name in sorted(set(op) | set(up)):
            before, after = op.get(name), up.get(name)
            if after is None:
                out += self._removed(o, u, name, before)
            elif before is None:
                out += self._added(o, u, name, after, required=name in u_req)
            else:
                found = self.compare((o.document, before), (u.document, after))
                out += _under(f"properties/{name}", found)
        out += self._additional(o, u)
        out += self._bounds(o.node, u.node, "maxProperties", "MAX_PROPERTIES")
        out += self._bounds(o.node, u.node, "minProperties", "MIN_PROPERTIES")
        return out

    def _removed(self, o: _View, u: _View, name: str, before: Any) -> list[tuple[str, str]]:
        here = f"properties/{name}"
        if _open(u.node):
            return [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", here)]
        partial = _partial(u.node, name)
        if partial is not None:
            sub = self.compare((o.document, before), (u.document, partial))
            tail = "IS" if _compatible(sub) else "NOT"
            kind = f"PROPERTY_REMOVED_{tail}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            return [*_under(here, sub), (kind, here)]
        if before is False:
            return [("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", here)]
        return [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", here)]

    def _added(
        self, o: _View, u: _View, name: str, after: Any, *, required: bool
    ) -> list[tuple[str, str]]:
        here = f"properties/{name}"
        with_default = "_WITH_DEFAULT" if _has_default(after) else ""
        if _open(o.node):
            if after is True or after == {}:
                return [("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", here)]
            if required:
                return [(f"REQUIRED_PROPERTY{with_default}_ADDED_TO_OPEN_CONTENT_MODEL", here)]
            return [("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", here)]
        out: list[tuple[str, str]] = []
        partial = _partial(o.node, name)
        if partial is not None:
            sub = self.compare((o.document, partial), (u.document, after))
            tail = "IS" if _compatible(sub) else "NOT"
            kind = f"PROPERTY_ADDED_{tail}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            out += [*_under(here, sub), (kind, here)]
        if required:
            out.append((f"REQUIRED_PROPERTY{with_default}_ADDED_TO_UNOPEN_CONTENT_MODEL", here))
        else:
            out.append(("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", here))
        return out

    def _additional(self, o: _View, u: _View) -> list[tuple[str, str]]:
        here = "additionalProperties"
        a, b = o.node.get(here, True), u.node.get(here, True)
        if (a is not False) != (b is not False):
            return [
                (
                    "ADDITIONAL_PROPERTIES_ADDED"
                    if b is not False
                    else "ADDITIONAL_PROPERTIES_REMOVED",
                    here,
                )
            ]
        a_schema, b_schema = isinstance(a, dict), isinstance(b, dict)
        if not a_schema and b_schema:
            return [("ADDITIONAL_PROPERTIES_NARROWED", here)]
        if a_schema and not b_schema:
            return [("ADDITIONAL_PROPERTIES_EXTENDED", here)]
        if a_schema and b_schema:
            return _under(here, self.compare((o.document, a), (u.document, b)))
        return []

    def _array(self, o: _View, u: _View) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        a, b = o.node.get("items"), u.node.get("items")
        if not isinstance(a, list) and not isinstance(b, list):
            out += _under("items", self.compare(_item(o, a), _item(u, b)))
        else:
            out += self._tuple(
                o, u, a if isinstance(a, list) else [], b if isinstance(b, list) else []
            )
        a, b = o.node.get("additionalItems", True), u.node.get("additionalItems", True)
        here = "additionalItems"
        if (a is not False) != (b is not False):
            out.append(
                ("ADDITIONAL_ITEMS_REMOVED" if a is not False else "ADDITIONAL_ITEMS_ADDED", here)
            )
        elif not isinstance(a, dict) and isinstance(b, dict):
            out.append(("ADDITIONAL_ITEMS_NARROWED", here))
        elif isinstance(a, dict) and not isinstance(b, dict):
            out.append(("ADDITIONAL_ITEMS_EXTENDED", here))
        elif isinstance(a, dict) and isinstance(b, dict):
            out += _under(here, self.compare((o.document, a), (u.document, b)))
        out += self._bounds(o.node, u.node, "maxItems", "MAX_ITEMS")
        out += self._bounds(o.node, u.node, "minItems", "MIN_ITEMS")
        if bool(o.node.get("uniqueItems")) != bool(u.node.get("uniqueItems")):
            out.append(
                (
                    "UNIQUE_ITEMS_REMOVED" if o.node.get("uniqueItems") else "UNIQUE_ITEMS_ADDED",
                    "uniqueItems",
                )
            )
        return out

    def _tuple(self, o: _View, u: _View, a: list[Any], b: list[Any]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for index in range(max(len(a), len(b))):
            here = f"items/{index}"
            if index < len(a) and index < len(b):
                out += _under(here, self.compare((o.document, a[index]), (u.document, b[index])))
            elif index < len(a):
                extra = u.node.get("additionalItems", True)
                if extra is True or extra == {}:
                    out.append(("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", here))
                elif isinstance(extra, dict):
                    sub = self.compare((o.document, a[index]), (u.document, extra))
                    tail = "IS" if _compatible(sub) else "NOT"
                    out.append(
                        (f"ITEM_REMOVED_{tail}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", here)
                    )
                elif a[index] is False:
                    out.append(("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", here))
                else:
                    out.append(("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", here))
            else:
                extra = o.node.get("additionalItems", True)
                if extra is True or extra == {}:
                    empty = b[index] is True or b[index] == {}
                    out.append(
                        (
                            "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                            if empty
                            else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
                            here,
                        )
                    )
                elif isinstance(extra, dict):
                    sub = self.compare((o.document, extra), (u.document, b[index]))
                    tail = "IS" if _compatible(sub) else "NOT"
                    out.append((f"ITEM_ADDED_{tail}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", here))
                else:
                    out.append(("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", here))
        return out


def _pieces(node: Mapping[str, Any]) -> list[str]:
    """The kinds of keywords a node has: its type's, enum, const, not, each combiner."""
    pieces: list[str] = []
    base = _base_kind(node)
    if base is not None:
        pieces.append(base)
    pieces += [key for key in ("enum", "const", "not") if key in node]
    pieces += [key for key in COMBINERS if isinstance(node.get(key), list)]
    return pieces


def _only(node: Mapping[str, Any], kind: str) -> Any:
    """The part of a node with several kinds of keywords that is ``kind``'s."""
    if kind in COMBINERS:
        return {kind: node[kind]}
    if kind in ("enum", "const", "not"):
        return {kind: node[kind]}
    return {
        k: v for k, v in node.items() if k not in COMBINERS and k not in ("enum", "const", "not")
    }


def _declared(node: Mapping[str, Any]) -> str | None:
    kind = node.get("type")
    return kind if isinstance(kind, str) else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _props(node: Mapping[str, Any]) -> dict[str, Any]:
    props = node.get("properties")
    return dict(props) if isinstance(props, dict) else {}


def _has_default(node: Any) -> bool:
    return isinstance(node, dict) and "default" in node


def _open(node: Mapping[str, Any]) -> bool:
    """Any other property is allowed: additionalProperties absent or true, no
    patternProperties, unevaluatedProperties absent or true."""
    extra = node.get("additionalProperties", True)
    if extra is not True or node.get("patternProperties"):
        return False
    return node.get("unevaluatedProperties", True) in (True, {})


def _partial(node: Mapping[str, Any], name: str) -> Any:
    """The schema a property not listed gets in a partially open model, or None."""
    for pattern, schema in (node.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return schema
        except re.error:
            continue
    extra = node.get("additionalProperties", True)
    if isinstance(extra, dict):
        return extra
    unevaluated = node.get("unevaluatedProperties")
    if extra is True and isinstance(unevaluated, dict) and unevaluated:
        return unevaluated
    return None


def _item(view: _View, items: Any) -> _Located | None:
    return None if items is None else (view.document, items)


def _compatible(found: Iterable[tuple[str, str]]) -> bool:
    return all(kind in COMPATIBLE for kind, _ in found)


def _join(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if path else prefix


def _under(prefix: str, found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(kind, _join(prefix, path)) for kind, path in found]


def _match(edges: Mapping[int, Mapping[int, object]], left: int) -> dict[int, int]:
    """A maximum matching of the bipartite graph ``edges`` (augmenting paths)."""
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(left):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def can_read(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """What keeps data valid under ``writer`` from being valid under ``reader``, as Confluent
    reports it (``{errorType:"...", description:"...'}``, its quotes included)."""
    found = _Differ(writer, reader).compare((writer.raw, writer.raw), (reader.raw, reader.raw))
    return [
        f'{{errorType:"{kind}", description:"{describe(kind, "#/" + path)}\'}}'
        for kind, path in found
        if kind not in COMPATIBLE
    ]
