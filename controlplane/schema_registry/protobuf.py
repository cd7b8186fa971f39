"""Protobuf schemas: .proto text compiled by protoc (``grpcio-tools``' ``grpc_tools.protoc``,
run as a process per schema, with a timeout), or a base64 FileDescriptorProto (what
confluent-kafka's Python serializer registers) checked by building it in a DescriptorPool.
Either way the schema is a FileDescriptorProto; its canonical text is ``proto_text.render``.

Imports resolve to the schema's references (by reference name) and to protobuf's well-known
types (``google/protobuf/*.proto``, which clients leave out of references).

The compatibility check is Confluent's (``protobuf/diff``): messages and enums by name, fields
by number. Changing a field's kind (scalar, message, map) or its scalar group (int32, int64,
uint32, uint64 and bool are one group; sint32/sint64; string/bytes; fixed32/sfixed32;
fixed64/sfixed64; float; double), the label of a numeric field, the package, removing a
message or a required field, or moving several fields into one oneof is incompatible; adding
or removing optional fields, enums and their values, renaming fields, adding oneofs is not.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc_tools
from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf import descriptor_pb2 as d
from google.protobuf.message import DecodeError

from controlplane.schema_registry import errors, proto_text
from controlplane.schema_registry.avro import READER, WRITER

F = d.FieldDescriptorProto
WELL_KNOWN = {
    module.DESCRIPTOR.name: module.DESCRIPTOR.serialized_pb
    for module in (
        any_pb2, api_pb2, d, duration_pb2, empty_pb2, field_mask_pb2,
        source_context_pb2, struct_pb2, timestamp_pb2, type_pb2, wrappers_pb2,
    )
}  # fmt: skip
"""google/protobuf/*.proto: resolved without a reference, as Confluent's registry does."""
INCLUDE = Path(grpc_tools.__file__).parent / "_proto"
MAIN = "schema.proto"
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
REFERENCE_NAME = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*")
COMPATIBLE = frozenset(
    {
        "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
        "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED",
        "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    }
)  # fmt: skip
"""Confluent's ``protobuf/diff/SchemaDiff.COMPATIBLE_CHANGES``."""


@dataclass
class ProtoSchema:
    file: d.FileDescriptorProto
    dependencies: dict[str, d.FileDescriptorProto] = field(default_factory=dict)
    """Every file it imports, directly or not, by name."""

    @property
    def canonical(self) -> str:
        return proto_text.render(self.file)

    @property
    def normalized(self) -> str:
        return self.canonical

    def serialized(self) -> str:
        """``format=serialized``: the FileDescriptorProto, base64 (what Python clients read)."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")


def _invalid(detail: str) -> errors.RegistryError:
    return errors.invalid_schema(f"Invalid schema of type PROTOBUF, details: {detail}")


def _descriptor(text: str) -> d.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 text holds (None: the text is .proto source)."""
    if not BASE64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
        fdp = d.FileDescriptorProto()
        fdp.ParseFromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return fdp


async def parse(text: str, references: Mapping[str, ProtoSchema], timeout: float) -> ProtoSchema:
    """The schema ``text`` describes (.proto source or base64), its imports resolved from
    ``references`` (by name) and the well-known types; 42201 if it does not compile."""
    dependencies: dict[str, d.FileDescriptorProto] = {}
    for name, reference in references.items():
        if not REFERENCE_NAME.fullmatch(name) or ".." in name.split("/"):
            raise _invalid(f"reference name {name!r}: use a relative file name such as a.proto")
        for dep_name, dep in reference.dependencies.items():
            dependencies.setdefault(dep_name, dep)
        file = d.FileDescriptorProto()
        file.CopyFrom(reference.file)
        file.name = name
        dependencies[name] = file
    fdp = _descriptor(text)
    if fdp is None:
        fdp = await _compile(text, references, timeout)
    fdp.name = MAIN if MAIN not in dependencies else f"_{MAIN}"
    fdp.ClearField("source_code_info")
    if fdp.syntax not in ("", "proto2", "proto3"):
        raise _invalid(f"syntax {fdp.syntax!r} is not supported: use proto2 or proto3")
    for name in fdp.dependency:
        if name not in dependencies and name in WELL_KNOWN:
            well_known = d.FileDescriptorProto()
            well_known.ParseFromString(WELL_KNOWN[name])
            dependencies[name] = well_known
    _check(fdp, dependencies)
    return ProtoSchema(fdp, dependencies)


def _check(fdp: d.FileDescriptorProto, dependencies: Mapping[str, d.FileDescriptorProto]) -> None:
    """Build ``fdp`` with its imports in a pool: every name must resolve."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: d.FileDescriptorProto) -> None:
        if file.name in added:
            return
        added.add(file.name)
        for name in file.dependency:
            dep = dependencies.get(name)
            if dep is None:
                raise _invalid(f"import {name!r} not found: give it in references")
            add(dep)
        try:
            pool.Add(file)
        except (TypeError, ValueError) as exc:
            raise _invalid(str(exc)) from None

    add(fdp)


async def _compile(
    text: str, references: Mapping[str, ProtoSchema], timeout: float
) -> d.FileDescriptorProto:
    with tempfile.TemporaryDirectory(prefix="sluice-proto-") as tmp:
        root = Path(tmp)
        sources = _sources(references)
        main = MAIN if MAIN not in sources else f"_{MAIN}"
        for name, source in {**sources, main: text}.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
        out = root / "out.pb"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"-I{INCLUDE}",
            f"--descriptor_set_out={out}", str(root / main),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            _, stderr = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise errors.timeout(
                f"protoc did not compile the schema within {timeout:.0f} s "
                "(schema.registry.protoc.timeout.ms)"
            ) from None
        if proc.returncode != 0:
            message = stderr.decode(errors="replace").replace(f"{root}/", "").strip()
            raise _invalid(" ".join(message.split("\n")[:5]) or "protoc refused the schema")
        files = d.FileDescriptorSet()
        files.ParseFromString(out.read_bytes())
        return files.file[-1]


def _sources(references: Mapping[str, ProtoSchema]) -> dict[str, str]:
    """The .proto text of every referenced file (by name), to compile an import against."""
    sources: dict[str, str] = {}
    for name, reference in references.items():
        for dep_name, dep in reference.dependencies.items():
            if dep_name not in WELL_KNOWN:
                sources.setdefault(dep_name, proto_text.render(dep))
        sources[name] = proto_text.render(reference.file)
    return sources


# ------------------------------------------------------------------ compatibility


@dataclass(frozen=True)
class _Type:
    package: str
    full: str
    """Its full name with a leading dot."""
    message: d.DescriptorProto | None = None
    enum: d.EnumDescriptorProto | None = None

    @property
    def local(self) -> str:
        prefix = f".{self.package}." if self.package else "."
        return self.full[len(prefix) :] if self.full.startswith(prefix) else self.full

    @property
    def is_map(self) -> bool:
        return self.message is not None and self.message.options.map_entry


def _index(schema: ProtoSchema) -> dict[str, _Type]:
    types: dict[str, _Type] = {}

    def walk(package: str, scope: str, messages: list[d.DescriptorProto],
             enums: list[d.EnumDescriptorProto]) -> None:  # fmt: skip
        for enum in enums:
            full = f"{scope}.{enum.name}"
            types[full] = _Type(package, full, enum=enum)
        for message in messages:
            full = f"{scope}.{message.name}"
            types[full] = _Type(package, full, message=message)
            walk(package, full, list(message.nested_type), list(message.enum_type))

    for file in (*schema.dependencies.values(), schema.file):
        scope = f".{file.package}" if file.package else ""
        walk(file.package, scope, list(file.message_type), list(file.enum_type))
    return types


SCALAR_GROUPS = {
    F.TYPE_INT32: "GENERAL_NUMBER", F.TYPE_INT64: "GENERAL_NUMBER",
    F.TYPE_UINT32: "GENERAL_NUMBER", F.TYPE_UINT64: "GENERAL_NUMBER",
    F.TYPE_BOOL: "GENERAL_NUMBER", F.TYPE_ENUM: "GENERAL_NUMBER",
    F.TYPE_SINT32: "SIGNED_NUMBER", F.TYPE_SINT64: "SIGNED_NUMBER",
    F.TYPE_STRING: "STRING_OR_BYTES", F.TYPE_BYTES: "STRING_OR_BYTES",
    F.TYPE_FIXED32: "FIXED32", F.TYPE_SFIXED32: "FIXED32",
    F.TYPE_FIXED64: "FIXED64", F.TYPE_SFIXED64: "FIXED64",
    F.TYPE_FLOAT: "FLOAT", F.TYPE_DOUBLE: "DOUBLE",
}  # fmt: skip
NUMERIC = frozenset({"GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"})


class _Differ:
    def __init__(self, original: ProtoSchema, update: ProtoSchema) -> None:
        self.types = {"o": _index(original), "u": _index(update)}
        self.proto3 = {"o": original.file.syntax == "proto3", "u": update.file.syntax == "proto3"}
        self.seen: set[tuple[str, str]] = set()

    def file(
        self, original: d.FileDescriptorProto, update: d.FileDescriptorProto
    ) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if original.package != update.package:
            out.append(("PACKAGE_CHANGED", ""))
        return out + self.types_in(_Scope.of_file(original), _Scope.of_file(update), "")

    def types_in(self, o: _Scope, u: _Scope, path: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        o_by = {m.name: (i, m) for i, m in enumerate(o.messages)}
        u_by = {m.name: (i, m) for i, m in enumerate(u.messages)}
        for name in sorted(set(o_by) | set(u_by)):
            here = _join(path, name)
            if name not in u_by:
                if not o_by[name][1].options.map_entry:
                    out.append(("MESSAGE_REMOVED", here))
            elif name not in o_by:
                if not u_by[name][1].options.map_entry:
                    out.append(("MESSAGE_ADDED", here))
            else:
                (oi, om), (ui, um) = o_by[name], u_by[name]
                out += self.message(f"{o.full}.{name}", f"{u.full}.{name}", om, um, here)
                if oi != ui:
                    out.append(("MESSAGE_MOVED", here))
        o_enum = {e.name: e for e in o.enums}
        u_enum = {e.name: e for e in u.enums}
        for name in sorted(set(o_enum) | set(u_enum)):
            here = _join(path, name)
            if name not in u_enum:
                out.append(("ENUM_REMOVED", here))
            elif name not in o_enum:
                out.append(("ENUM_ADDED", here))
            else:
                out += _enum(o_enum[name], u_enum[name], here)
        return out

    def message(
        self, o_full: str, u_full: str, o: d.DescriptorProto, u: d.DescriptorProto, path: str
    ) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if (o_full, u_full) not in self.seen:
            self.seen.add((o_full, u_full))
            out += self._fields(o, u, path)
        return out + self.types_in(_Scope.of(o_full, o), _Scope.of(u_full, u), path)

    def _fields(
        self, o: d.DescriptorProto, u: d.DescriptorProto, path: str
    ) -> list[tuple[str, str]]:
        before_all, after_all = _Members(o), _Members(u)
        out = _oneof_changes(before_all, after_all, path)
        for tag in sorted(set(before_all.by_tag) | set(after_all.by_tag)):
            before, after = before_all.by_tag.get(tag), after_all.by_tag.get(tag)
            o_oneof, u_oneof = before_all.oneof_of.get(tag), after_all.oneof_of.get(tag)
            if before is None or after is None:
                out += _added_or_removed(before_all, after_all, tag, path)
                continue
            if o_oneof is not None and u_oneof is None:
                out.append(("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", _join(path, str(tag))))
            where = _join(path, f"{u_oneof}/{tag}" if u_oneof is not None else str(tag))
            if before.name != after.name:
                out.append(("FIELD_NAME_CHANGED", where))
            o_label = self._label("o", before, o_oneof is not None)
            u_label = self._label("u", after, u_oneof is not None)
            out += self._types(before, after, o_label, u_label, where)
        return out

    def _label(self, side: str, f: d.FieldDescriptorProto, in_oneof: bool) -> str | None:
        """Wire's label as Confluent compares it: None for a proto3 field without one."""
        if in_oneof:
            return "ONE_OF"
        if f.label == F.LABEL_REPEATED:
            return "REPEATED"
        if f.label == F.LABEL_REQUIRED:
            return "REQUIRED"
        return "OPTIONAL" if not self.proto3[side] or f.proto3_optional else None

    def _kind(self, side: str, f: d.FieldDescriptorProto) -> str:
        if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            target = self.types[side].get(f.type_name)
            return "MAP" if target is not None and target.is_map else "MESSAGE"
        return "SCALAR"

    def _types(
        self,
        o: d.FieldDescriptorProto,
        u: d.FieldDescriptorProto,
        o_label: str | None,
        u_label: str | None,
        where: str,
    ) -> list[tuple[str, str]]:
        o_kind, u_kind = self._kind("o", o), self._kind("u", u)
        if o_kind != u_kind:
            return [("FIELD_KIND_CHANGED", where)]
        if o_kind == "SCALAR":
            return _scalar(o, u, o_label, u_label, where)
        o_type, u_type = self.types["o"][o.type_name], self.types["u"][u.type_name]
        if o_kind == "MAP":
            assert o_type.message is not None
            assert u_type.message is not None
            out: list[tuple[str, str]] = []
            for index in (0, 1):
                key_o, key_u = o_type.message.field[index], u_type.message.field[index]
                out += self._types(key_o, key_u, None, None, where)
            return out
        return self._named(o_type, u_type, where)

    def _named(self, o_type: _Type, u_type: _Type, where: str) -> list[tuple[str, str]]:
        """A message field: the same type name (in its package), and a compatible message."""
        if o_type.local != u_type.local:
            return [("FIELD_NAMED_TYPE_CHANGED", where)]
        if o_type.message is None or u_type.message is None:
            return []
        sub = self.message(o_type.full, u_type.full, o_type.message, u_type.message, "")
        sub = [(kind, _join(o_type.local.replace(".", "/"), p)) for kind, p in sub]
        if all(kind in COMPATIBLE for kind, _ in sub):
            return sub
        return [*sub, ("FIELD_NAMED_TYPE_CHANGED", where)]


@dataclass(frozen=True)
class _Scope:
    """The messages and enums declared in a file or a message, and its full name."""

    full: str
    messages: list[d.DescriptorProto]
    enums: list[d.EnumDescriptorProto]

    @classmethod
    def of_file(cls, file: d.FileDescriptorProto) -> _Scope:
        full = f".{file.package}" if file.package else ""
        return cls(full, list(file.message_type), list(file.enum_type))

    @classmethod
    def of(cls, full: str, message: d.DescriptorProto) -> _Scope:
        return cls(full, list(message.nested_type), list(message.enum_type))


class _Members:
    """A message's fields by number, each real oneof member's oneof, each oneof's members."""

    def __init__(self, message: d.DescriptorProto) -> None:
        self.by_tag = {f.number: f for f in message.field}
        self.oneof_of: dict[int, str] = {}
        self.oneofs: dict[str, list[int]] = {}
        for f in message.field:
            if f.HasField("oneof_index") and not f.proto3_optional:
                name = message.oneof_decl[f.oneof_index].name
                self.oneof_of[f.number] = name
                self.oneofs.setdefault(name, []).append(f.number)


def _oneof_changes(before: _Members, after: _Members, path: str) -> list[tuple[str, str]]:
    """Fields made mutually exclusive (moved into one oneof), oneofs added and removed."""
    out: list[tuple[str, str]] = []
    for name, tags in after.oneofs.items():
        origins = set()
        moved_in = 0
        for tag in tags:
            if tag in before.oneof_of:
                origins.add("oneof:" + before.oneof_of[tag])
            elif tag in before.by_tag:
                origins.add(f"field:{tag}")
                moved_in += 1
        if len(origins) > 1:
            many = moved_in > 1
            kind = "MULTIPLE_FIELDS_MOVED_TO_ONEOF" if many else "FIELD_MOVED_TO_EXISTING_ONEOF"
            out.append((kind, _join(path, name)))
    for name in sorted(set(before.oneofs) | set(after.oneofs)):
        if name not in after.oneofs:
            out.append(("ONEOF_REMOVED", _join(path, name)))
        elif name not in before.oneofs:
            out.append(("ONEOF_ADDED", _join(path, name)))
    return out


def _added_or_removed(
    before: _Members, after: _Members, tag: int, path: str
) -> list[tuple[str, str]]:
    """A field number in only one of the two messages."""
    removed = tag not in after.by_tag
    side = before if removed else after
    field = side.by_tag[tag]
    oneof = side.oneof_of.get(tag)
    if oneof is not None:
        if removed:
            survivors = [t for t in before.oneofs[oneof] if t in after.by_tag]
            if oneof not in after.oneofs and not survivors:
                return []  # the whole oneof went: compatible
            return [("ONEOF_FIELD_REMOVED", _join(path, f"{oneof}/{tag}"))]
        return [("ONEOF_FIELD_ADDED", _join(path, f"{oneof}/{tag}"))]
    required = "REQUIRED_" if field.label == F.LABEL_REQUIRED else ""
    change = "REMOVED" if removed else "ADDED"
    return [(f"{required}FIELD_{change}", _join(path, str(tag)))]


def _scalar(
    o: d.FieldDescriptorProto,
    u: d.FieldDescriptorProto,
    o_label: str | None,
    u_label: str | None,
    where: str,
) -> list[tuple[str, str]]:
    o_group, u_group = SCALAR_GROUPS.get(o.type), SCALAR_GROUPS.get(u.type)
    if o_group != u_group:
        return [("FIELD_SCALAR_KIND_CHANGED", where)]
    if o_label is None or u_label is None or o_label == u_label:
        return []
    if o_group in NUMERIC:
        return [("FIELD_NUMERIC_LABEL_CHANGED", where)]
    if o_group == "STRING_OR_BYTES":
        return [("FIELD_STRING_OR_BYTES_LABEL_CHANGED", where)]
    return []


def _enum(o: d.EnumDescriptorProto, u: d.EnumDescriptorProto, path: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    o_by = {v.number: v.name for v in o.value}
    u_by = {v.number: v.name for v in u.value}
    for tag in sorted(set(o_by) | set(u_by)):
        here = _join(path, str(tag))
        if tag not in u_by:
            out.append(("ENUM_CONST_REMOVED", here))
        elif tag not in o_by:
            out.append(("ENUM_CONST_ADDED", here))
        elif o_by[tag] != u_by[tag]:
            out.append(("ENUM_CONST_CHANGED", here))
    return out


def _join(path: str, name: str) -> str:
    if not name:
        return path
    return f"{path}/{name}" if path else name


DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{p}' in the {r} schema does not match the package in "
    "the {w} schema",
    "MESSAGE_REMOVED": "The {r} schema is missing a MESSAGE type at path '{p}' in the {w} schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{p}' in the {r} schema does not match "
    "the {w} schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{p}' in the {r} schema "
    "does not match its kind in the {w} schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{p}' in the {r} schema "
    "does not match its type in the {w} schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{p}' in the {r} "
    "schema does not match its label in the {w} schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{p}' in the {r} schema is missing in "
    "the {w} schema",
    "REQUIRED_FIELD_REMOVED": "The {r} schema is missing a required field at path: '{p}' in "
    "the {w} schema",
    "ONEOF_FIELD_REMOVED": "The {r} schema is missing a oneof field at path '{p}' in the {w} "
    "schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{p}' in the {r} "
    "schema are outside a oneof in the {w} schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{p}' in the {r} schema is "
    "outside an existing oneof in the {w} schema",
}
"""Confluent's words (``protobuf/diff/Difference.java``)."""


def can_read(reader: ProtoSchema, writer: ProtoSchema) -> list[str]:
    """What keeps ``reader`` from reading data written with ``writer``, as Confluent reports
    it (the differences from ``writer`` to ``reader`` that are not compatible)."""
    found = _Differ(writer, reader).file(writer.file, reader.file)
    out = []
    for kind, path in found:
        if kind in COMPATIBLE:
            continue
        text = DESCRIPTIONS.get(kind, "").format(p="#/" + path, r=READER, w=WRITER)
        out.append(f'{{errorType:"{kind}", description:"{text}"}}')
    return out
