"""The registry's typed values: schema types, compatibility levels, modes, references and the
versions of a subject. Text only at the edges (``parse`` from a request, ``value`` to JSON).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from controlplane.schema_registry import errors


class SchemaType(enum.StrEnum):
    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"

    @classmethod
    def parse(cls, value: object) -> SchemaType:
        """A request's ``schemaType`` (absent: AVRO); 42201 for anything else, as Confluent."""
        if value is None or value == "":
            return cls.AVRO
        if not isinstance(value, str) or value not in cls.__members__:
            raise errors.invalid_schema(f"Invalid schema type {value}")
        return cls(value)


TYPES_LISTED = (SchemaType.JSON, SchemaType.PROTOBUF, SchemaType.AVRO)
"""``GET /schemas/types``, in Confluent's order."""


class Compatibility(enum.StrEnum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def parse(cls, value: object) -> Compatibility:
        """Case-insensitive, as Confluent; 42203 otherwise."""
        if not isinstance(value, str) or value.upper() not in cls.__members__:
            raise errors.invalid_compatibility()
        return cls(value.upper())

    @property
    def transitive(self) -> bool:
        """Checked against every earlier version (else only the latest)."""
        return self.name.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """The new schema must read data written with the earlier ones."""
        return self.name.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """The earlier schemas must read data written with the new one."""
        return self.name.startswith(("FORWARD", "FULL"))


DEFAULT_COMPATIBILITY = Compatibility.BACKWARD


class Mode(enum.StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"

    @classmethod
    def parse(cls, value: object) -> Mode:
        if not isinstance(value, str) or value.upper() not in cls.__members__:
            raise errors.invalid_mode()
        return cls(value.upper())

    @property
    def read_only(self) -> bool:
        return self in (Mode.READONLY, Mode.READONLY_OVERRIDE)


DEFAULT_MODE = Mode.READWRITE


@dataclass(frozen=True, order=True)
class Reference:
    """A schema's use of another registered schema (Confluent's SchemaReference): ``name``
    is how the schema refers to it (an Avro full name, a JSON ``$ref``, a .proto import)."""

    name: str
    subject: str
    version: int

    def value(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaContent:
    """What identifies a schema: equal contents get the same id in a registry."""

    schema_type: SchemaType
    text: str
    """The canonical text (what is stored and served)."""
    references: tuple[Reference, ...] = ()


@dataclass
class VersionEntry:
    """One version of a subject (a ``SCHEMA`` record of ``_schemas``)."""

    subject: str
    version: int
    schema_id: int
    content: SchemaContent
    deleted: bool = False


@dataclass
class Subject:
    versions: dict[int, VersionEntry] = field(default_factory=dict)

    def live(self) -> list[VersionEntry]:
        return [v for _, v in sorted(self.versions.items()) if not v.deleted]

    def all(self) -> list[VersionEntry]:
        return [v for _, v in sorted(self.versions.items())]

    def latest(self, deleted: bool = False) -> VersionEntry | None:
        entries = self.all() if deleted else self.live()
        return entries[-1] if entries else None


def schema_json(content: SchemaContent, text: str | None = None) -> dict[str, object]:
    """The fields every answer about a schema carries: ``schemaType`` (left out for AVRO, as
    Confluent), ``references`` (left out when there are none) and ``schema``."""
    out: dict[str, object] = {}
    if content.schema_type is not SchemaType.AVRO:
        out["schemaType"] = content.schema_type.value
    if content.references:
        out["references"] = [r.value() for r in content.references]
    out["schema"] = content.text if text is None else text
    return out
