"""The registry's formats without a server: the ``_schemas`` records (Confluent's JSON keys and
values, as its registry writes them), the state they build, and the .proto text printed from a
FileDescriptorProto (it compiles back to the same messages, and printing is stable)."""

from __future__ import annotations

import asyncio
import json

import pytest

from controlplane.schema_registry import errors, protobuf, records
from controlplane.schema_registry.model import (
    Compatibility,
    Mode,
    Reference,
    SchemaContent,
    SchemaType,
    VersionEntry,
)
from controlplane.schema_registry.records import Key, KeyType
from controlplane.schema_registry.state import RegistryState


def test_keys_are_confluents() -> None:
    assert Key(KeyType.SCHEMA, "s", 3).encode() == (
        b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}'
    )
    assert Key(KeyType.CONFIG, None).encode() == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert Key(KeyType.MODE, "s").encode() == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert Key(KeyType.DELETE_SUBJECT, "s").encode() == (
        b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    )


def test_values_are_confluents() -> None:
    content = SchemaContent(SchemaType.JSON, '{"type":"string"}', (Reference("r", "t", 2),))
    value = json.loads(records.schema_value(VersionEntry("s", 1, 7, content)))
    assert value == {
        "subject": "s",
        "version": 1,
        "id": 7,
        "schemaType": "JSON",
        "references": [{"name": "r", "subject": "t", "version": 2}],
        "schema": '{"type":"string"}',
        "deleted": False,
    }
    avro = SchemaContent(SchemaType.AVRO, '"string"')
    assert json.loads(records.schema_value(VersionEntry("s", 2, 8, avro))) == {
        "subject": "s", "version": 2, "id": 8, "schema": '"string"', "deleted": False,
    }  # fmt: skip
    assert json.loads(records.config_value(None, Compatibility.FULL, None)) == {
        "subject": None,
        "compatibilityLevel": "FULL",
    }


def apply(state: RegistryState, key: str, value: object | None) -> None:
    raw = None if value is None else json.dumps(value).encode()
    state.apply(state.next_offset, key.encode(), raw)


def test_state_from_confluent_records() -> None:
    """Records as Confluent's registry writes them (md5, no schemaType for Avro, NOOP keys)
    build the state the API serves; tombstones and DELETE_SUBJECT take effect; what is not a
    record of ours is skipped."""
    state = RegistryState()
    key = '{"keytype":"SCHEMA","subject":"orders","version":%d,"magic":1}'
    for version, schema_id in ((1, 1), (2, 4)):
        apply(state, key % version, {
            "subject": "orders", "version": version, "id": schema_id, "md5": "abc",
            "schema": f'"v{version}"', "deleted": False,
        })  # fmt: skip
    apply(state, '{"keytype":"NOOP","magic":0}', {})
    apply(state, '{"keytype":"CONFIG","subject":null,"magic":0}', {"compatibilityLevel": "FULL"})
    apply(state, '{"keytype":"MODE","subject":"orders","magic":0}', {"mode": "READONLY"})
    state.apply(state.next_offset, b"not json", b"{}")
    assert state.malformed == 1
    assert [e.version for e in state.subjects["orders"].live()] == [1, 2]
    assert state.max_id() == 4
    assert state.compatibility("orders") is Compatibility.FULL
    assert state.mode("orders") is Mode.READONLY
    assert state.mode("other") is Mode.READWRITE
    apply(state, '{"keytype":"DELETE_SUBJECT","subject":"orders","magic":0}',
          {"subject": "orders", "version": 2})  # fmt: skip
    assert state.subjects["orders"].live() == []
    content = state.content(4)
    assert content is not None
    assert content.text == '"v2"'  # soft-deleted: still readable by id
    apply(state, key % 2, None)
    assert state.content(4) is None
    assert state.next_offset == 8


PROTO = """
syntax = "proto2";
package shop.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.shop";
message Order {
  required int64 id = 1;
  optional string note = 2 [default = "none \\"quoted\\""];
  map<string, Line> lines = 3;
  message Line { optional int32 qty = 1 [default = 1]; repeated bytes tags = 2; }
  oneof payment { string card = 4; int64 account = 5; }
  optional group Extra = 6 { optional bool gift = 1; }
  optional Status status = 7 [default = OPEN];
  enum Status { OPEN = 1; CLOSED = 2 [deprecated = true]; }
  optional google.protobuf.Timestamp at = 8;
  extensions 100 to max;
  reserved 20 to 29;
  reserved "old";
}
extend Order { optional string ext = 100; }
service Shop { rpc Place(Order) returns (stream Order); }
"""


def _shape(file: object) -> list[tuple[object, ...]]:
    """What compiled code depends on: messages, fields (name, number, label, type, type
    name, oneof), enums and values."""
    out: list[tuple[object, ...]] = []

    def walk(prefix: str, messages: object, enums: object) -> None:
        for enum in enums:  # type: ignore[attr-defined]
            out.append((prefix + enum.name, [(v.name, v.number) for v in enum.value]))
        for message in messages:  # type: ignore[attr-defined]
            name = prefix + message.name
            fields = sorted(
                (f.name, f.number, f.label, f.type, f.type_name, f.default_value,
                 f.oneof_index if f.HasField("oneof_index") else None)
                for f in message.field
            )  # fmt: skip
            out.append((name, fields, [o.name for o in message.oneof_decl]))
            walk(name + ".", message.nested_type, message.enum_type)

    walk("", file.message_type, file.enum_type)  # type: ignore[attr-defined]
    return out


def test_printed_proto_compiles_back_to_the_same_schema() -> None:
    first = asyncio.run(protobuf.parse(PROTO, {}, 30))
    text = first.canonical
    again = asyncio.run(protobuf.parse(text, {}, 30))
    assert again.canonical == text  # printing is stable
    assert _shape(again.file) == _shape(first.file)
    assert [m.name for m in again.file.message_type] == ["Order"]  # message indexes kept
    assert [n.name for n in again.file.message_type[0].nested_type] == [
        "LinesEntry", "Line", "Extra",
    ]  # fmt: skip
    serialized = asyncio.run(protobuf.parse(first.serialized(), {}, 30))
    assert serialized.canonical == text  # base64 FileDescriptorProto: the same schema


def test_invalid_protobuf_names_the_problem() -> None:
    with pytest.raises(errors.RegistryError) as refused:
        asyncio.run(protobuf.parse('syntax = "proto3"; message M { Missing m = 1; }', {}, 30))
    assert refused.value.code == 42201
    assert "Missing" in refused.value.message
    with pytest.raises(errors.RegistryError) as refused:
        asyncio.run(protobuf.parse('syntax = "proto3"; import "other.proto";', {}, 30))
    assert "other.proto" in refused.value.message
