"""Every compatibility level accepts and refuses the right evolutions, for Avro, JSON Schema and
Protobuf, through the registry of a real cluster: a refusal is HTTP 409 with error_code 409 and
Confluent's message naming the incompatibility.

Per type, four one-step evolutions of a first version: one only BACKWARD compatible (the new
schema reads old data, not the reverse), one only FORWARD compatible, one FULL compatible and
one compatible neither way; and a three-version chain whose third version is compatible with
the second but not with the first, which the transitive levels refuse.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.schema_registry.conftest import Http, Registry


def avro(*fields: tuple[str, str, Any]) -> str:
    """A record of (name, type, default) fields; a default of ... means none."""
    out = []
    for name, kind, default in fields:
        field: dict[str, Any] = {"name": name, "type": kind}
        if default is not ...:
            field["default"] = default
        out.append(field)
    return json.dumps({"type": "record", "name": "Event", "fields": out})


def json_object(
    properties: dict[str, str], defaults: dict[str, Any] | None = None, **extra: Any
) -> str:
    schema: dict[str, Any] = {"type": "object", "properties": {}, **extra}
    for name, kind in properties.items():
        schema["properties"][name] = {"type": kind}
        if defaults and name in defaults:
            schema["properties"][name]["default"] = defaults[name]
    return json.dumps(schema)


def proto(*fields: str, extra: str = "") -> str:
    body = " ".join(f"{field};" for field in fields)
    return f'syntax = "proto3";\npackage ev;\nmessage Event {{ {body} }}\n{extra}'


CASES: dict[str, dict[str, Any]] = {
    "AVRO": {
        "v1": avro(("a", "int", ...), ("b", "string", ...)),
        "backward_only": avro(("a", "int", ...)),  # b removed: old readers need it
        "forward_only": avro(("a", "int", ...), ("b", "string", ...), ("c", "long", ...)),
        "full": avro(("a", "int", ...), ("b", "string", ...), ("c", "long", 0)),
        "neither": avro(("a", "string", ...), ("b", "string", ...)),
        "backward_chain": [
            avro(("a", "int", ...)),
            avro(("a", "int", ...), ("b", "string", "x")),
            avro(("a", "int", ...), ("b", "string", ...)),
        ],
        "forward_chain": [
            avro(("a", "int", ...), ("b", "string", ...)),
            avro(("a", "int", ...), ("b", "string", "x")),
            avro(("a", "int", ...)),
        ],
    },
    "JSON": {
        "v1": json_object({"a": "string", "b": "integer"}),
        # open content model: removing a property is backward only, adding one forward only
        "backward_only": json_object({"a": "string"}),
        "forward_only": json_object({"a": "string", "b": "integer", "c": "boolean"}),
        "full": json_object({"a": "string", "b": "integer"}, description="documented"),
        "neither": json_object({"a": "string", "b": "string"}),
        # a required property: without a default it refuses data that lacks it
        "backward_chain": [
            json_object({"a": "string", "b": "integer"}),
            json_object({"a": "string", "b": "integer"}, required=["b"], defaults={"b": 0}),
            json_object({"a": "string", "b": "integer"}, required=["b"]),
        ],
        "forward_chain": [
            json_object({"a": "string", "b": "integer"}, required=["b"]),
            json_object({"a": "string", "b": "integer"}, required=["b"], defaults={"b": 0}),
            json_object({"a": "string", "b": "integer"}),
        ],
    },
    "PROTOBUF": {
        "v1": proto("string a = 1", "int32 b = 2", extra="message Extra { int32 x = 1; }"),
        # a message added is backward only; removed, forward only
        "backward_only": proto(
            "string a = 1",
            "int32 b = 2",
            extra="message Extra { int32 x = 1; }\nmessage More { int32 y = 1; }",
        ),
        "forward_only": proto("string a = 1", "int32 b = 2"),
        "full": proto(
            "string a = 1", "int32 b = 2", "bool c = 3", extra="message Extra { int32 x = 1; }"
        ),
        "neither": proto("string a = 1", "string b = 2", extra="message Extra { int32 x = 1; }"),
        "backward_chain": [
            proto("string a = 1", "int32 b = 2"),
            proto("string a = 1"),
            proto("string a = 1", "string b = 2"),
        ],
        "forward_chain": [
            proto("string a = 1", "int32 b = 2"),
            proto("string a = 1"),
            proto("string a = 1", "string b = 2"),
        ],
    },
}
LEVELS = [
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
]
ACCEPTS = {
    "NONE": {"backward_only", "forward_only", "full", "neither"},
    "BACKWARD": {"backward_only", "full"},
    "FORWARD": {"forward_only", "full"},
    "FULL": {"full"},
}


def versions(api: Http, subject: str, level: str, kind: str, schemas: list[str]) -> list[int]:
    """Register ``schemas`` in order under a new ``subject`` at ``level``: each status."""
    assert api.call("PUT", f"/config/{subject}", {"compatibility": level}) == (
        200,
        {"compatibility": level},
    )
    out = []
    for schema in schemas:
        status, answer = api.register(subject, schema, kind)
        if status == 409:
            assert answer["error_code"] == 409
            assert answer["message"].startswith(
                "Schema being registered is incompatible with an earlier schema for subject "
                f'"{subject}", details: [{{errorType:'
            )
            assert f"compatibility: '{level}'" in answer["message"]
        else:
            assert status == 200, answer
        out.append(status)
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_one_step_evolutions(registry: Registry, kind: str, level: str) -> None:
    api = registry.http
    accepted = ACCEPTS[level.removesuffix("_TRANSITIVE")]
    cases = CASES[kind]
    for case in ("backward_only", "forward_only", "full", "neither"):
        subject = f"{kind}-{level}-{case}".lower()
        found = versions(api, subject, level, kind, [cases["v1"], cases[case]])
        expected = 200 if case in accepted else 409
        assert found == [200, expected], f"{kind} {level} {case}"


@pytest.mark.parametrize("kind", sorted(CASES))
def test_transitive_levels_check_every_version(registry: Registry, kind: str) -> None:
    api = registry.http
    chains = {
        "BACKWARD": "backward_chain",
        "FORWARD": "forward_chain",
        "FULL": "backward_chain",
    }
    for level, chain in chains.items():
        schemas = CASES[kind][chain]
        subject = f"{kind}-{level}-chain".lower()
        assert versions(api, subject, level, kind, schemas) == [200, 200, 200], (kind, level)
        subject = f"{kind}-{level}-transitive-chain".lower()
        found = versions(api, subject, f"{level}_TRANSITIVE", kind, schemas)
        assert found == [200, 200, 409], (kind, level)


def test_a_different_schema_type_is_incompatible(registry: Registry) -> None:
    api = registry.http
    assert api.register("switch", CASES["AVRO"]["v1"], "AVRO")[0] == 200
    status, answer = api.register("switch", CASES["JSON"]["v1"], "JSON")
    assert (status, answer["error_code"]) == (409, 409)
    assert "Incompatible because of different schema type" in answer["message"]
