"""One face for the three schema types: parse (with the parsed references), the canonical and
normalized texts, and the compatibility levels over a subject's versions, with Confluent's
messages (its ``SchemaValidatorBuilder`` and ``AbstractSchemaRegistry.isCompatibleWithPrevious``).

- BACKWARD: the new schema reads data written with the latest version (the new schema is
  the reader); FORWARD: the latest version reads data written with the new one; FULL: both;
  ``*_TRANSITIVE``: against every live version, newest first, stopping at the first that
  fails; NONE: nothing is checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controlplane.schema_registry import avro, errors, json_schema, protobuf
from controlplane.schema_registry.avro import READER, WRITER, AvroSchema
from controlplane.schema_registry.json_schema import JsonSchema
from controlplane.schema_registry.model import Compatibility, SchemaType
from controlplane.schema_registry.protobuf import ProtoSchema

Parsed = AvroSchema | JsonSchema | ProtoSchema
MAX_SCHEMA_IN_MESSAGE = 10 * 1024
"""Confluent's ``MAX_SCHEMA_SIZE_FOR_LOGGING``: a longer old schema is cut in messages."""


async def parse(
    schema_type: SchemaType, text: str, references: Mapping[str, Parsed], protoc_timeout: float
) -> Parsed:
    """``text`` parsed as ``schema_type`` with ``references`` (reference name -> parsed), and
    its canonical text computed; 42201 (RegistryError) when it is not a valid schema."""
    try:
        parsed = await _parse(schema_type, text, references, protoc_timeout)
        _ = parsed.canonical, parsed.normalized
    except RecursionError:
        raise _too_deep(schema_type) from None
    except (KeyError, TypeError, ValueError) as exc:  # a shape the checks above let through
        raise errors.invalid_schema(
            f"Invalid schema of type {schema_type.value}, details: {exc}"
        ) from None
    return parsed


def _too_deep(schema_type: SchemaType) -> errors.RegistryError:
    return errors.invalid_schema(
        f"Invalid schema of type {schema_type.value}, details: it nests too deeply"
    )


async def _parse(
    schema_type: SchemaType, text: str, references: Mapping[str, Parsed], protoc_timeout: float
) -> Parsed:
    if schema_type is SchemaType.AVRO:
        return avro.parse(text, [r for r in references.values() if isinstance(r, AvroSchema)])
    if schema_type is SchemaType.JSON:
        refs = {name: r for name, r in references.items() if isinstance(r, JsonSchema)}
        return json_schema.parse(text, refs)
    protos = {name: r for name, r in references.items() if isinstance(r, ProtoSchema)}
    return await protobuf.parse(text, protos, protoc_timeout)


def text_of(parsed: Parsed, normalize: bool) -> str:
    return parsed.normalized if normalize else parsed.canonical


def _can_read(reader: Parsed, writer: Parsed) -> list[str]:
    try:
        return _dispatch_can_read(reader, writer)
    except RecursionError:
        return ["The schemas nest too deeply to be compared"]


def _dispatch_can_read(reader: Parsed, writer: Parsed) -> list[str]:
    if isinstance(reader, AvroSchema) and isinstance(writer, AvroSchema):
        return avro.can_read(reader, writer)
    if isinstance(reader, JsonSchema) and isinstance(writer, JsonSchema):
        return json_schema.can_read(reader, writer)
    if isinstance(reader, ProtoSchema) and isinstance(writer, ProtoSchema):
        return protobuf.can_read(reader, writer)
    return ["Incompatible because of different schema type"]


def _fill(messages: list[str], reader: str, writer: str) -> list[str]:
    return [m.replace(READER, reader).replace(WRITER, writer) for m in messages]


@dataclass(frozen=True)
class Previous:
    """A live version of the subject, for the check."""

    version: int
    text: str
    parsed: Parsed


def _against(level: Compatibility, new: Parsed, old: Previous) -> list[str]:
    text = old.text
    if len(text) > MAX_SCHEMA_IN_MESSAGE:
        shown = f"{{oldSchema: <truncated> '{text[:MAX_SCHEMA_IN_MESSAGE]}...'}}"
    else:
        shown = f"{{oldSchema: '{text}'}}"
    tail = [f"{{oldSchemaVersion: {old.version}}}", shown]
    out: list[str] = []
    if level.forward:
        found = _fill(_can_read(old.parsed, new), "old", "new")
        out += found + (tail if found and not level.backward else [])
    if level.backward:
        found = _fill(_can_read(new, old.parsed), "new", "old")
        out += found + (tail if found else [])
    return out


def check(level: Compatibility, new: Parsed, previous: Sequence[Previous]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) under ``level``; empty: it may."""
    if level is Compatibility.NONE or not previous:
        return []
    candidates = list(reversed(previous)) if level.transitive else [previous[-1]]
    for old in candidates:
        found = _against(level, new, old)
        if found:
            return [*found, f"{{validateFields: 'false', compatibility: '{level.value}'}}"]
    return []
