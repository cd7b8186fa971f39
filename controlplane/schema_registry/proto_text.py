"""A FileDescriptorProto printed as .proto text: the canonical form the registry stores and
serves for Protobuf schemas, whether they came as .proto text (compiled by protoc first) or as
a base64 FileDescriptorProto (what confluent-kafka's Python serializer sends).

The text compiles back to the same messages, fields, numbers, types, labels, oneofs, enums,
maps, reserved ranges and names, extensions, services and standard options, in the same
order where order matters: top-level and nested messages keep their positions (Confluent's
message indexes count them), a map's entry type stays where it was among the nested types
(the map field is printed there). Type names are printed fully qualified (``.pkg.Msg``), so
they resolve the same wherever they stand. Custom options (extensions of the option messages)
are not kept. Editions files are refused by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2 as d

F = d.FieldDescriptorProto
SCALARS = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}  # fmt: skip
FIELD_MAX = 536870911
"""The largest field number (``max`` in reserved and extensions ranges)."""
ENUM_MAX = 2147483647
INDENT = "  "


def render(fdp: d.FileDescriptorProto) -> str:
    """The .proto text of ``fdp``."""
    out: list[str] = []
    syntax = fdp.syntax or "proto2"
    out.append(f'syntax = "{syntax}";')
    if fdp.package:
        out.append(f"package {fdp.package};")
    public = set(fdp.public_dependency)
    weak = set(fdp.weak_dependency)
    for index, name in enumerate(fdp.dependency):
        kind = "public " if index in public else "weak " if index in weak else ""
        out.append(f"import {kind}{_quote(name)};")
    out += _options(fdp.options, "")
    proto3 = syntax == "proto3"
    scope = f".{fdp.package}" if fdp.package else ""
    for message in fdp.message_type:
        out += _message(message, "", proto3, scope)
    for enum in fdp.enum_type:
        out += _enum(enum, "")
    out += _extensions(fdp.extension, "", proto3)
    for service in fdp.service:
        out += _service(service)
    return "\n".join(out) + "\n"


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _value(field: Any, value: Any) -> str:
    if field.type == field.TYPE_ENUM:
        return str(field.enum_type.values_by_number[value].name)
    if field.type == field.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == field.TYPE_STRING:
        return _quote(str(value))
    if field.type == field.TYPE_BYTES:
        return _quote(bytes(value).decode("latin-1"))
    return repr(value) if isinstance(value, float) else str(value)


def _option_items(options: Any, skip: Iterable[str] = ()) -> list[str]:
    """``name = value`` of every set, single-valued standard option."""
    items = []
    for field, value in options.ListFields():
        if field.name in skip or field.is_extension:
            continue
        if field.label == field.LABEL_REPEATED or field.type == field.TYPE_MESSAGE:
            continue
        items.append(f"{field.name} = {_value(field, value)}")
    return items


def _options(options: Any, indent: str, skip: Iterable[str] = ()) -> list[str]:
    return [f"{indent}option {item};" for item in _option_items(options, skip)]


def _ranges(ranges: Iterable[Any], inclusive_end: bool, most: int) -> str:
    parts = []
    for r in ranges:
        end = r.end if inclusive_end else r.end - 1
        if end == r.start:
            parts.append(str(r.start))
        else:
            parts.append(f"{r.start} to {'max' if end >= most else end}")
    return ", ".join(parts)


def _reserved(ranges: Any, names: Any, indent: str, inclusive_end: bool, most: int) -> list[str]:
    out = []
    if len(ranges):
        out.append(f"{indent}reserved {_ranges(ranges, inclusive_end, most)};")
    if len(names):
        out.append(f"{indent}reserved {', '.join(_quote(n) for n in names)};")
    return out


def _type_name(field: d.FieldDescriptorProto) -> str:
    if field.type in SCALARS:
        return SCALARS[field.type]
    return field.type_name


def _default_json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _field_options(field: d.FieldDescriptorProto) -> str:
    items = []
    if field.HasField("default_value"):
        value = field.default_value
        if field.type == F.TYPE_STRING:
            value = _quote(value)
        elif field.type == F.TYPE_BYTES:
            value = f'"{value}"'  # already C-escaped in the descriptor
        items.append(f"default = {value}")
    if field.HasField("json_name") and field.json_name != _default_json_name(field.name):
        items.append(f"json_name = {_quote(field.json_name)}")
    items += _option_items(field.options)
    return f" [{', '.join(items)}]" if items else ""


def _label(field: d.FieldDescriptorProto, proto3: bool, in_oneof: bool) -> str:
    if in_oneof:
        return ""
    if field.label == F.LABEL_REPEATED:
        return "repeated "
    if field.label == F.LABEL_REQUIRED:
        return "required "
    if not proto3 or field.proto3_optional:
        return "optional "
    return ""


def _field(
    field: d.FieldDescriptorProto,
    indent: str,
    proto3: bool,
    in_oneof: bool = False,
    map_entry: d.DescriptorProto | None = None,
) -> str:
    if map_entry is not None:
        key, value = map_entry.field[0], map_entry.field[1]
        kind = f"map<{_type_name(key)}, {_type_name(value)}>"
        return f"{indent}{kind} {field.name} = {field.number}{_field_options(field)};"
    label = _label(field, proto3, in_oneof)
    return (
        f"{indent}{label}{_type_name(field)} {field.name} = {field.number}{_field_options(field)};"
    )


def _message(message: d.DescriptorProto, indent: str, proto3: bool, scope: str) -> list[str]:
    """``scope``: the full name of the enclosing package or message (``.pkg.Outer``)."""
    inner = indent + INDENT
    full = f"{scope}.{message.name}"
    out = [f"{indent}message {message.name} {{"]
    out += _options(message.options, inner, skip=("map_entry",))
    nested, printed = _nested(message, inner, proto3, full)
    out += nested
    for enum in message.enum_type:
        out += _enum(enum, inner)
    out += _members(message, inner, proto3, printed)
    if len(message.extension_range):
        out.append(f"{inner}extensions {_ranges(message.extension_range, False, FIELD_MAX)};")
    out += _reserved(message.reserved_range, message.reserved_name, inner, False, FIELD_MAX)
    out += _extensions(message.extension, inner, proto3)
    out.append(f"{indent}}}")
    return out


def _nested(
    message: d.DescriptorProto, indent: str, proto3: bool, full: str
) -> tuple[list[str], set[str]]:
    """The nested messages in their order, a map's entry printed as its map field and a
    group's body as the group; and the names of the fields printed so."""
    nested = {f"{full}.{n.name}": n for n in message.nested_type}
    entry_of: dict[str, d.FieldDescriptorProto] = {}
    group_of: dict[str, d.FieldDescriptorProto] = {}
    for field in message.field:
        target = nested.get(field.type_name)
        if target is None:
            continue
        if field.type == F.TYPE_GROUP:
            group_of[target.name] = field
        elif target.options.map_entry and field.label == F.LABEL_REPEATED:
            entry_of[target.name] = field
    out: list[str] = []
    printed: set[str] = set()
    for child in message.nested_type:
        if child.name in entry_of:
            field = entry_of[child.name]
            out.append(_field(field, indent, proto3, map_entry=child))
            printed.add(field.name)
        elif child.name in group_of:
            field = group_of[child.name]
            out += _group(field, child, indent, proto3, full)
            printed.add(field.name)
        else:
            out += _message(child, indent, proto3, full)
    return out, printed


def _members(message: d.DescriptorProto, indent: str, proto3: bool, printed: set[str]) -> list[str]:
    """The fields not printed yet, each real oneof as a block where its first field is."""
    real_oneofs = {
        f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional
    }
    out: list[str] = []
    done_oneofs: set[int] = set()
    for field in message.field:
        if field.name in printed:
            continue
        if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
            if field.oneof_index not in done_oneofs:
                done_oneofs.add(field.oneof_index)
                out += _oneof(message, field.oneof_index, indent, proto3)
            continue
        out.append(_field(field, indent, proto3))
    return out


def _oneof(message: d.DescriptorProto, index: int, indent: str, proto3: bool) -> list[str]:
    decl = message.oneof_decl[index]
    out = [f"{indent}oneof {decl.name} {{"]
    out += _options(decl.options, indent + INDENT)
    for field in message.field:
        if field.HasField("oneof_index") and field.oneof_index == index:
            out.append(_field(field, indent + INDENT, proto3, in_oneof=True))
    out.append(f"{indent}}}")
    return out


def _group(
    field: d.FieldDescriptorProto, body: d.DescriptorProto, indent: str, proto3: bool, scope: str
) -> list[str]:
    label = _label(field, proto3, field.HasField("oneof_index"))
    lines = _message(body, indent, proto3, scope)
    lines[0] = f"{indent}{label}group {body.name} = {field.number}{_field_options(field)} {{"
    return lines


def _enum(enum: d.EnumDescriptorProto, indent: str) -> list[str]:
    inner = indent + INDENT
    out = [f"{indent}enum {enum.name} {{"]
    out += _options(enum.options, inner)
    for value in enum.value:
        options = _option_items(value.options)
        suffix = f" [{', '.join(options)}]" if options else ""
        out.append(f"{inner}{value.name} = {value.number}{suffix};")
    out += _reserved(enum.reserved_range, enum.reserved_name, inner, True, ENUM_MAX)
    out.append(f"{indent}}}")
    return out


def _extensions(
    extensions: Iterable[d.FieldDescriptorProto], indent: str, proto3: bool
) -> list[str]:
    out: list[str] = []
    by_extendee: dict[str, list[d.FieldDescriptorProto]] = {}
    for field in extensions:
        by_extendee.setdefault(field.extendee, []).append(field)
    for extendee, fields in by_extendee.items():
        out.append(f"{indent}extend {extendee} {{")
        out += [_field(field, indent + INDENT, proto3) for field in fields]
        out.append(f"{indent}}}")
    return out


def _service(service: d.ServiceDescriptorProto) -> list[str]:
    out = [f"service {service.name} {{"]
    out += _options(service.options, INDENT)
    for method in service.method:
        request = ("stream " if method.client_streaming else "") + method.input_type
        response = ("stream " if method.server_streaming else "") + method.output_type
        options = _options(method.options, INDENT * 2)
        head = f"{INDENT}rpc {method.name}({request}) returns ({response})"
        if options:
            out += [f"{head} {{", *options, f"{INDENT}}}"]
        else:
            out.append(f"{head};")
    out.append("}")
    return out
