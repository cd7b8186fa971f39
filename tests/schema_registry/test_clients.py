"""confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers
against the registry of a real cluster, producing and consuming through its broker; and
`cloudctl get-schema-registry-url`."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc_tools
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from proto.sluice.v1 import topics_pb2 as tpb
from tests.conftest import REPO
from tests.schema_registry.conftest import Registry

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")
USER_AVRO = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
}
USER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "User",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}
ADDRESS_PROTO = 'syntax = "proto3";\npackage ex;\nmessage Address { string city = 1; }\n'
USER_PROTO = """syntax = "proto3";
package ex;
import "address.proto";
import "google/protobuf/timestamp.proto";
message User {
  string name = 1;
  int64 id = 2;
  Address address = 3;
  google.protobuf.Timestamp at = 4;
  map<string, int32> scores = 5;
}
"""


@pytest.fixture
def client(registry: Registry) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry.url}) as made:
        yield made


def roundtrip(registry: Registry, topic: str, serializer: Any, deserializer: Any, values: list[Any]
              ) -> list[Any]:  # fmt: skip
    """Produce ``values`` serialized to a new topic, consume them back deserialized."""
    plane = registry.plane
    plane.topics.CreateTopic(
        tpb.CreateTopicRequest(cluster=registry.cluster, name=topic, partitions=1),
        metadata=plane.metadata,
        timeout=30,
    )
    producer = Producer({"bootstrap.servers": registry.bootstrap})
    for value in values:
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": registry.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[Any] = []
    try:
        while len(out) < len(values):
            message = consumer.poll(30)
            assert message is not None, f"got {len(out)} of {len(values)} records"
            assert message.error() is None, message.error()
            ctx = SerializationContext(topic, MessageField.VALUE)
            out.append(deserializer(message.value(), ctx))
    finally:
        consumer.close()
    return out


def test_the_url_is_given_once_active(registry: Registry) -> None:
    assert registry.url.startswith("http://127.0.0.1:")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")},
        "SLUICE_HOME": str(registry.plane.home),
        "SLUICE_ENDPOINT": registry.plane.endpoint,
    }

    def cloudctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLOUDCTL, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
            check=False,
        )  # fmt: skip

    done = cloudctl("get-schema-registry-url", registry.cluster)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == registry.url
    done = cloudctl("get-schema-registry-url", registry.cluster, "-o", "json")
    assert json.loads(done.stdout) == {
        "cluster": registry.cluster,
        "state": "ACTIVE",
        "schema_registry_url": registry.url,
        "basic_auth": False,
    }
    done = cloudctl("get-schema-registry-url", "no-such-cluster")
    assert done.returncode == 1
    assert "no-such-cluster" in done.stderr


def test_avro_serializer_roundtrip(registry: Registry, client: SchemaRegistryClient) -> None:
    serializer = AvroSerializer(client, json.dumps(USER_AVRO))
    deserializer = AvroDeserializer(client)
    values = [
        {"name": "ada", "age": 36, "email": None},
        {"name": "alan", "age": 41, "email": "alan@example.com"},
    ]
    assert roundtrip(registry, "users-avro", serializer, deserializer, values) == values
    latest = client.get_latest_version("users-avro-value")
    assert latest.version == 1
    assert json.loads(latest.schema.schema_str or "") == USER_AVRO
    # an evolution the BACKWARD default allows: a field with a default
    evolved = {**USER_AVRO, "fields": [*USER_AVRO["fields"], {"name": "vip", "type": "boolean",
                                                                "default": False}]}  # fmt: skip
    second = client.register_schema("users-avro-value", Schema(json.dumps(evolved), "AVRO"))
    assert second != latest.schema_id
    # and one it refuses: a field without a default
    broken = {**USER_AVRO, "fields": [*USER_AVRO["fields"], {"name": "x", "type": "long"}]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("users-avro-value", Schema(json.dumps(broken), "AVRO"))
    assert refused.value.http_status_code == 409
    assert refused.value.error_code == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.value.error_message


def test_json_serializer_roundtrip(registry: Registry, client: SchemaRegistryClient) -> None:
    serializer = JSONSerializer(json.dumps(USER_JSON), client)
    deserializer = JSONDeserializer(json.dumps(USER_JSON))
    values = [{"name": "grace", "age": 85}, {"name": "linus"}]
    assert roundtrip(registry, "users-json", serializer, deserializer, values) == values
    registered = client.get_latest_version("users-json-value")
    assert registered.schema.schema_type == "JSON"
    assert json.loads(registered.schema.schema_str or "") == USER_JSON
    # the deserializer that reads the writer's schema from the registry, by id
    by_id = JSONDeserializer(None, schema_registry_client=client)
    assert roundtrip(registry, "users-json-2", serializer, by_id, values) == values


def proto_classes(tmp: Path) -> tuple[Any, Any]:
    """The ex.User and ex.Address message classes, compiled from .proto by protoc."""
    (tmp / "address.proto").write_text(ADDRESS_PROTO)
    (tmp / "user.proto").write_text(USER_PROTO)
    include = Path(grpc_tools.__file__).parent / "_proto"
    out = tmp / "set.pb"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{include}",
         "--include_imports", f"--descriptor_set_out={out}", str(tmp / "user.proto")],
        check=True, timeout=60,
    )  # fmt: skip
    files = descriptor_pb2.FileDescriptorSet()
    files.ParseFromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    user = message_factory.GetMessageClass(pool.FindMessageTypeByName("ex.User"))
    address = message_factory.GetMessageClass(pool.FindMessageTypeByName("ex.Address"))
    return user, address


def test_protobuf_serializer_roundtrip_with_a_reference(
    registry: Registry, client: SchemaRegistryClient, tmp_path: Path
) -> None:
    user_class, _ = proto_classes(tmp_path)
    serializer = ProtobufSerializer(user_class, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(user_class, {"use.deprecated.format": False})
    values = []
    for i in range(3):
        value = user_class(name=f"u{i}", id=i)
        value.address.city = "Paris"
        value.at.seconds = 1_700_000_000 + i
        value.scores["x"] = i
        values.append(value)
    assert roundtrip(registry, "users-proto", serializer, deserializer, values) == values
    # the import became a reference, registered under its file name (Confluent's default)
    user = client.get_latest_version("users-proto-value")
    assert user.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in user.schema.references or ()] == [
        ("address.proto", "address.proto", 1)
    ]
    # stored as .proto text (printed from the descriptor the client sent), readable as is
    text = user.schema.schema_str or ""
    assert "message User {" in text
    assert 'import "address.proto";' in text
    address = client.get_latest_version("address.proto")
    assert address.version is not None
    assert client.get_referenced_by("address.proto", address.version) == [user.schema_id]
    # the .proto text registers as the same schema (same id) under another subject
    same = Schema(text, "PROTOBUF", user.schema.references)
    assert client.register_schema("users-proto-copy", same) == user.schema_id


def test_protobuf_text_and_serialized_formats(registry: Registry) -> None:
    http = registry.http
    status, body = http.register("proto-text", ADDRESS_PROTO, "PROTOBUF")
    assert status == 200, body
    status, found = http.call("GET", f"/schemas/ids/{body['id']}?format=serialized")
    assert status == 200
    file = descriptor_pb2.FileDescriptorProto()
    file.ParseFromString(base64.b64decode(found["schema"]))
    assert [m.name for m in file.message_type] == ["Address"]
    status, raw = http.call("GET", "/subjects/proto-text/versions/1/schema")
    assert status == 200
    assert "message Address {" in raw
