"""Confluent's REST API over raw HTTP (urllib and http.client: what curl sends), against the
registry of a real cluster: the documented curl session, Confluent's error codes for bad
input (never a 500), modes, references, soft and permanent deletes, configs, normalization,
and the HTTP framing (chunked bodies, Expect: 100-continue, keep-alive, the body limit)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.controlplane.harness import running_control_plane
from tests.schema_registry.conftest import CONTENT_TYPE, Http, Registry, open_cluster

BODY_LIMIT = 65_536
STRING = json.dumps({"type": "string"})


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    settings = {"schema.registry.max.request.bytes": str(BODY_LIMIT)}
    with running_control_plane(tmp_path_factory.mktemp("sluice-home"), settings) as plane:
        yield open_cluster(plane)


@pytest.fixture
def api(registry: Registry) -> Http:
    return registry.http


def record(name: str, *fields: dict[str, Any], namespace: str = "com.example") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace,
                       "fields": list(fields)})  # fmt: skip


def test_confluents_documented_curl_session(api: Http) -> None:
    """The examples of Confluent's "Schema Registry API Usage Examples", answer for answer."""
    assert api.call("POST", "/subjects/Kafka-key/versions", {"schema": STRING}) == (200, {"id": 1})
    assert api.call("POST", "/subjects/Kafka-value/versions", {"schema": STRING}) == (
        200,
        {"id": 1},
    )
    status, subjects = api.call("GET", "/subjects")
    assert status == 200
    assert {"Kafka-key", "Kafka-value"} <= set(subjects)
    assert api.call("GET", "/subjects/Kafka-value/versions") == (200, [1])
    assert api.call("GET", "/schemas/ids/1") == (200, {"schema": '"string"'})
    expected = {"subject": "Kafka-value", "version": 1, "id": 1, "schema": '"string"'}
    assert api.call("GET", "/subjects/Kafka-value/versions/1") == (200, expected)
    assert api.call("GET", "/subjects/Kafka-value/versions/latest") == (200, expected)
    assert api.call("GET", "/subjects/Kafka-value/versions/-1") == (200, expected)
    assert api.call("POST", "/subjects/Kafka-key", {"schema": STRING}) == (
        200,
        {"subject": "Kafka-key", "version": 1, "id": 1, "schema": '"string"'},
    )
    assert api.call(
        "POST", "/compatibility/subjects/Kafka-value/versions/latest", {"schema": STRING}
    ) == (200, {"is_compatible": True})
    assert api.call("GET", "/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])
    assert api.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert api.call("PUT", "/config/Kafka-value", {"compatibility": "NONE"}) == (
        200,
        {"compatibility": "NONE"},
    )
    assert api.call("GET", "/config/Kafka-value") == (200, {"compatibilityLevel": "NONE"})
    assert api.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert api.call("GET", "/schemas/ids/1/versions") == (
        200,
        [{"subject": "Kafka-key", "version": 1}, {"subject": "Kafka-value", "version": 1}],
    )
    assert api.call("DELETE", "/subjects/Kafka-value/versions/1") == (200, 1)
    assert api.call("DELETE", "/subjects/Kafka-value") == (
        404,
        {
            "error_code": 40404,
            "message": "Subject 'Kafka-value' was soft deleted.Set permanent=true to delete "
            "permanently",
        },
    )
    assert api.call("DELETE", "/subjects/Kafka-value?permanent=true") == (200, [1])
    # the id stays: Kafka-key still has it
    assert api.call("GET", "/schemas/ids/1/subjects") == (200, ["Kafka-key"])


ERRORS = [
    ("GET", "/subjects/nope/versions", None, 404, 40401),
    ("GET", "/subjects/nope/versions/1", None, 404, 40401),
    ("GET", "/subjects/errors/versions/7", None, 404, 40402),
    ("GET", "/schemas/ids/99999", None, 404, 40403),
    ("GET", "/schemas/ids/abc", None, 404, 40403),
    ("POST", "/subjects/errors", {"schema": json.dumps({"type": "int"})}, 404, 40403),
    ("GET", "/subjects/errors/versions/0", None, 422, 42202),
    ("GET", "/subjects/errors/versions/abc", None, 422, 42202),
    ("POST", "/subjects/errors/versions", {"schema": '{"type": "record"}'}, 422, 42201),
    ("POST", "/subjects/errors/versions", {"schema": "{not json"}, 422, 42201),
    ("POST", "/subjects/errors/versions", {"schema": ""}, 422, 42201),
    ("POST", "/subjects/errors/versions", {"schema": STRING, "schemaType": "XML"}, 422, 42201),
    ("POST", "/subjects/errors/versions", {"schema": '{"type": 5}', "schemaType": "JSON"}, 422,
     42201),
    ("POST", "/subjects/errors/versions",
     {"schema": 'syntax = "proto3"; message M { strin a = 1; }', "schemaType": "PROTOBUF"}, 422,
     42201),
    ("POST", "/subjects/errors/versions",
     {"schema": STRING, "references": [{"name": "x", "subject": "nope", "version": 1}]}, 422,
     42201),
    ("POST", "/subjects/errors/versions", {"schema": 5}, 422, 422),
    ("POST", "/subjects/errors/versions", {"schema": STRING, "references": "x"}, 422, 422),
    ("POST", "/subjects/errors/versions", [1, 2], 422, 422),
    ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("PUT", "/config/errors", {"compatibility": 3}, 422, 42203),
    ("PUT", "/mode", {"mode": "WRITEONLY"}, 422, 42204),
    ("GET", "/config/errors", None, 404, 40408),
    ("GET", "/mode/errors", None, 404, 40409),
    ("DELETE", "/schemas/types", None, 405, 405),
    ("GET", "/no/such/path", None, 404, 404),
]  # fmt: skip


@pytest.mark.parametrize("case", ERRORS, ids=[f"{c[0]} {c[1]} {c[4]}" for c in ERRORS])
def test_errors_have_confluents_codes(api: Http, case: tuple[str, str, Any, int, int]) -> None:
    method, path, body, status, code = case
    assert api.register("errors", STRING)[0] == 200
    found, answer = api.call(method, path, body)
    assert (found, answer["error_code"]) == (status, code), answer
    assert isinstance(answer["message"], str)
    assert answer["message"]


def test_unreadable_requests_are_4xx(api: Http, registry: Registry) -> None:
    status, answer = api.call("POST", "/subjects/x/versions", data=b'{"schema": ')
    assert (status, answer["error_code"]) == (400, 400)
    status, answer = api.call("POST", "/subjects/x/versions", data=b"\xff\xfe")
    assert (status, answer["error_code"]) == (400, 400)
    status, answer = api.call(
        "POST", "/subjects/x/versions", {"schema": STRING}, content_type="text/plain"
    )
    assert (status, answer["error_code"]) == (415, 415)
    assert api.call("POST", "/subjects/x/versions", {"schema": STRING},
                    content_type="application/json")[0] == 200  # fmt: skip
    huge = json.dumps({"schema": json.dumps({"type": "string", "doc": "x" * BODY_LIMIT})})
    status, answer = api.call("POST", "/subjects/x/versions", data=huge.encode())
    assert (status, answer["error_code"]) == (413, 413)
    assert "schema.registry.max.request.bytes" in answer["message"]
    status, answer = Http(registry.url.replace("/clusters/sr", "/clusters/nope")).call(
        "GET", "/subjects"
    )
    assert (status, answer["error_code"]) == (404, 404)
    status, answer = Http(registry.url.replace("/clusters/sr", "")).call("GET", "/subjects")
    assert status == 404
    assert "/clusters/NAME" in answer["message"]


def test_http_framing(registry: Registry) -> None:
    """Chunked bodies, Expect: 100-continue (curl sends it past 1 KiB) and keep-alive."""
    parts = urlsplit(registry.url)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        body = json.dumps({"schema": record("Chunky", {"name": "a", "type": "int"})}).encode()
        connection.request(
            "POST", f"{parts.path}/subjects/chunked/versions", body=iter([body[:10], body[10:]]),
            headers={"Content-Type": CONTENT_TYPE}, encode_chunked=True,
        )  # fmt: skip
        first = connection.getresponse()
        assert first.status == 200
        schema_id = json.loads(first.read())["id"]
        connection.request(  # the same connection (keep-alive), announced with 100-continue
            "POST", f"{parts.path}/subjects/chunked",
            body=body, headers={"Content-Type": CONTENT_TYPE, "Expect": "100-continue"},
        )  # fmt: skip
        second = connection.getresponse()
        assert second.status == 200
        assert json.loads(second.read())["id"] == schema_id
        assert second.getheader("Content-Type") == CONTENT_TYPE
    finally:
        connection.close()


def test_modes(api: Http) -> None:
    assert api.register("ro", STRING)[0] == 200
    assert api.call("PUT", "/mode/ro", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, answer = api.register("ro", json.dumps({"type": "int"}))
    assert (status, answer["error_code"]) == (422, 42205)
    assert "read-only" in answer["message"]
    assert api.call("DELETE", "/subjects/ro")[1]["error_code"] == 42205
    assert api.call("DELETE", "/mode/ro") == (200, {"mode": "READONLY"})
    assert api.call("GET", "/mode/ro?defaultToGlobal=true") == (200, {"mode": "READWRITE"})
    # IMPORT: refused over existing schemas unless forced; then ids and versions are kept
    status, answer = api.call("PUT", "/mode", {"mode": "IMPORT"})
    assert (status, answer["error_code"]) == (422, 42205)
    assert api.call("PUT", "/mode/imported", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    schema = record("Imported", {"name": "a", "type": "int"})
    assert api.register("imported", schema, id=5000, version=7) == (200, {"id": 5000})
    assert api.call("GET", "/subjects/imported/versions") == (200, [7])
    assert api.call("GET", "/schemas/ids/5000")[1]["schema"] == json.dumps(
        json.loads(schema), separators=(",", ":")
    )
    other = record("Other", {"name": "b", "type": "int"})
    status, answer = api.register("imported", other, id=5000, version=8)
    assert (status, answer["error_code"]) == (422, 42205)  # id 5000 is another schema
    status, answer = api.register("imported", other)
    assert (status, answer["error_code"]) == (422, 42205)  # no id in IMPORT mode
    assert api.call("PUT", "/mode/imported", {"mode": "READWRITE"})[0] == 200
    status, answer = api.register("imported", other, id=6000)
    assert (status, answer["error_code"]) == (422, 42205)  # an id outside IMPORT mode
    assert api.register("fresh", other)[1]["id"] == 5001  # ids continue above the highest


def test_references_and_referencedby(api: Http) -> None:
    address = record("Address", {"name": "city", "type": "string"})
    assert api.register("address", address)[0] == 200
    user = record("Person", {"name": "name", "type": "string"},
                  {"name": "home", "type": "com.example.Address"})  # fmt: skip
    ref = [{"name": "com.example.Address", "subject": "address", "version": 1}]
    status, answer = api.register("person", user)
    assert (status, answer["error_code"]) == (422, 42201)  # the type is unknown without it
    status, person = api.register("person", user, references=ref)
    assert status == 200, person
    assert api.call("GET", "/subjects/address/versions/1/referencedby") == (200, [person["id"]])
    status, answer = api.call("GET", "/subjects/person/versions/1")
    assert answer["references"] == ref
    status, answer = api.call("DELETE", "/subjects/address/versions/1")
    assert (status, answer["error_code"]) == (422, 42206)
    assert "{magic=1,keytype=SCHEMA,subject=address,version=1}" in answer["message"]
    # looking the schema up needs the same references
    assert api.call("POST", "/subjects/person", {"schema": user, "references": ref})[0] == 200


def test_soft_and_permanent_deletes(api: Http) -> None:
    v1 = record("Del", {"name": "a", "type": "int"})
    v2 = record("Del", {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0})
    id1 = api.register("del", v1)[1]["id"]
    id2 = api.register("del", v2)[1]["id"]
    assert api.call("DELETE", "/subjects/del/versions/1") == (200, 1)
    assert api.call("GET", "/subjects/del/versions") == (200, [2])
    assert api.call("GET", "/subjects/del/versions?deleted=true") == (200, [1, 2])
    assert api.call("GET", "/subjects/del/versions/1")[1]["error_code"] == 40402
    assert api.call("GET", "/subjects/del/versions/1?deleted=true")[1]["id"] == id1
    assert api.call("GET", f"/schemas/ids/{id1}")[0] == 200  # soft-deleted: still readable
    assert api.call("DELETE", "/subjects/del/versions/1")[1]["error_code"] == 40406
    assert api.call("DELETE", "/subjects/del/versions/2?permanent=true")[1]["error_code"] == 40407
    assert api.call("DELETE", "/subjects/del?permanent=true")[1]["error_code"] == 40405
    assert api.call("DELETE", "/subjects/del") == (200, [2])
    assert "del" not in api.call("GET", "/subjects")[1]
    assert "del" in api.call("GET", "/subjects?deleted=true")[1]
    assert api.call("GET", "/subjects?deletedOnly=true") == (200, ["del"])
    assert api.call("GET", "/subjects/del/versions")[1]["error_code"] == 40401
    # a new version continues the numbering
    assert api.register("del", v1) == (200, {"id": id1})
    assert api.call("GET", "/subjects/del/versions") == (200, [3])
    assert api.call("DELETE", "/subjects/del")[0] == 200
    assert api.call("DELETE", "/subjects/del?permanent=true") == (200, [1, 2, 3])
    assert "del" not in api.call("GET", "/subjects?deleted=true")[1]
    assert api.call("GET", f"/schemas/ids/{id2}")[1]["error_code"] == 40403


def test_configs_and_normalize(api: Http) -> None:
    assert api.register("cfg", STRING)[0] == 200
    assert api.call("PUT", "/config/cfg", {"compatibility": "full"}) == (
        200,
        {"compatibility": "FULL"},
    )
    assert api.call("GET", "/config/cfg") == (200, {"compatibilityLevel": "FULL"})
    assert api.call("GET", "/config/unset?defaultToGlobal=true") == (
        200,
        {"compatibilityLevel": "BACKWARD"},
    )
    assert api.call("DELETE", "/config/cfg") == (200, {"compatibilityLevel": "FULL"})
    assert api.call("GET", "/config/cfg")[1]["error_code"] == 40408
    # normalize: the same schema written two ways is one schema
    a = json.dumps({"type": "record", "name": "N", "fields": [{"name": "x", "type": "int"}]})
    b = json.dumps({"fields": [{"type": "int", "name": "x"}], "name": "N", "type": "record"})
    first = api.call("POST", "/subjects/norm/versions?normalize=true", {"schema": a})[1]
    second = api.call("POST", "/subjects/norm/versions?normalize=true", {"schema": b})[1]
    assert first == second
    assert api.call("GET", "/subjects/norm/versions") == (200, [1])
    assert api.call("POST", "/subjects/norm?normalize=true", {"schema": b})[1]["version"] == 1


def test_compatibility_check_endpoint(api: Http) -> None:
    v1 = record("Chk", {"name": "a", "type": "int"})
    assert api.register("chk", v1)[0] == 200
    bad = record("Chk", {"name": "a", "type": "string"})
    assert api.call("POST", "/compatibility/subjects/chk/versions/1", {"schema": bad}) == (
        200,
        {"is_compatible": False},
    )
    status, answer = api.call(
        "POST", "/compatibility/subjects/chk/versions/latest?verbose=true", {"schema": bad}
    )
    assert status == 200
    assert answer["is_compatible"] is False
    assert any("TYPE_MISMATCH" in m for m in answer["messages"])
    assert answer["messages"][-1] == "{validateFields: 'false', compatibility: 'BACKWARD'}"
    assert (
        api.call("POST", "/compatibility/subjects/chk/versions/9", {"schema": bad})[1]["error_code"]
        == 40402
    )
    assert api.call("POST", "/compatibility/subjects/empty/versions/latest", {"schema": bad}) == (
        200,
        {"is_compatible": True},
    )
    status, answer = api.call(
        "POST", "/compatibility/subjects/chk/versions/latest?verbose=true", {"schema": "{x"}
    )
    assert (status, answer["is_compatible"]) == (200, False)


def test_json_schema_references(api: Http) -> None:
    address = json.dumps(
        {"$id": "https://example.com/address.json", "type": "object",
         "properties": {"city": {"type": "string"}}}
    )  # fmt: skip
    assert api.register("json-address", address, "JSON")[0] == 200
    person = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
    ref = [{"name": "address.json", "subject": "json-address", "version": 1}]
    status, answer = api.register("json-person", person, "JSON")
    assert (status, answer["error_code"]) == (422, 42201)
    assert "address.json" in answer["message"]
    assert api.register("json-person", person, "JSON", references=ref)[0] == 200
    # the referenced subject evolves under its own level: a narrower version is refused
    narrower = json.dumps(
        {"type": "object", "properties": {"city": {"type": "string", "maxLength": 5}}}
    )
    assert api.register("json-address", narrower, "JSON")[0] == 409
