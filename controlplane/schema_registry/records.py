"""The records of the ``_schemas`` topic, in Confluent's formats (JSON key and value; a null
value deletes what its key names, and compaction keeps the last record per key):

    key                                                          value
    {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}       {"subject":S,"version":V,"id":N,
                                                                  "schemaType":T,"references":[..],
                                                                  "schema":TEXT,"deleted":false}
    {"keytype":"CONFIG","subject":S|null,"magic":0}              {"subject":S|null,
                                                                  "compatibilityLevel":"FULL"}
    {"keytype":"MODE","subject":S|null,"magic":0}                {"subject":S|null,"mode":"IMPORT"}
    {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}           {"subject":S,"version":V}
    {"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}            {"subject":S}

``schemaType`` is left out for AVRO and ``references`` when empty, as Confluent writes them.
DELETE_SUBJECT soft-deletes every version up to V; a SCHEMA tombstone deletes one version for
good. Keys of other types (NOOP, CONTEXT, ...) are read and ignored.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from controlplane.schema_registry.model import (
    Compatibility,
    Mode,
    Reference,
    SchemaContent,
    SchemaType,
    VersionEntry,
)


class KeyType(enum.StrEnum):
    SCHEMA = "SCHEMA"
    CONFIG = "CONFIG"
    MODE = "MODE"
    DELETE_SUBJECT = "DELETE_SUBJECT"
    CLEAR_SUBJECT = "CLEAR_SUBJECT"
    NOOP = "NOOP"


@dataclass(frozen=True)
class Key:
    keytype: KeyType
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        if self.keytype is KeyType.SCHEMA:
            doc: dict[str, Any] = {
                "keytype": "SCHEMA",
                "subject": self.subject,
                "version": self.version,
                "magic": 1,
            }
        else:
            doc = {"keytype": self.keytype.value, "subject": self.subject, "magic": 0}
        return _dump(doc)


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def schema_value(entry: VersionEntry) -> bytes:
    doc: dict[str, Any] = {
        "subject": entry.subject,
        "version": entry.version,
        "id": entry.schema_id,
    }
    content = entry.content
    if content.schema_type is not SchemaType.AVRO:
        doc["schemaType"] = content.schema_type.value
    if content.references:
        doc["references"] = [r.value() for r in content.references]
    doc["schema"] = content.text
    doc["deleted"] = entry.deleted
    return _dump(doc)


def config_value(subject: str | None, level: Compatibility, normalize: bool | None) -> bytes:
    doc: dict[str, Any] = {"subject": subject, "compatibilityLevel": level.value}
    if normalize is not None:
        doc["normalize"] = normalize
    return _dump(doc)


def mode_value(subject: str | None, mode: Mode) -> bytes:
    return _dump({"subject": subject, "mode": mode.value})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


class Malformed(ValueError):
    """A record that is not one of the formats above (it is skipped, with a warning)."""


def decode_key(raw: bytes | None) -> Key | None:
    """The key, or None for a key type the registry does not use."""
    doc = _load(raw)
    try:
        keytype = KeyType(str(doc.get("keytype")))
    except ValueError:
        return None
    subject = doc.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise Malformed(f"subject {subject!r} is not a string")
    if keytype is KeyType.SCHEMA:
        version = doc.get("version")
        if not isinstance(version, int) or subject is None:
            raise Malformed("a SCHEMA key needs a subject and an integer version")
        return Key(keytype, subject, version)
    return Key(keytype, subject)


def _load(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        raise Malformed("no key")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise Malformed(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise Malformed("not a JSON object")
    return doc


def decode_schema(raw: bytes, key: Key) -> VersionEntry:
    doc = _load(raw)
    try:
        references = tuple(
            Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in doc.get("references") or ()
        )
        content = SchemaContent(
            SchemaType(doc.get("schemaType") or "AVRO"), str(doc["schema"]), references
        )
        assert key.subject is not None
        assert key.version is not None
        return VersionEntry(
            subject=key.subject,
            version=key.version,
            schema_id=int(doc["id"]),
            content=content,
            deleted=bool(doc.get("deleted", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise Malformed(f"SCHEMA value: {exc}") from None


def decode_config(raw: bytes) -> tuple[Compatibility | None, bool | None]:
    doc = _load(raw)
    level = doc.get("compatibilityLevel")
    normalize = doc.get("normalize")
    try:
        parsed = None if level is None else Compatibility(str(level))
    except ValueError:
        raise Malformed(f"compatibility level {level!r}") from None
    return parsed, normalize if isinstance(normalize, bool) else None


def decode_mode(raw: bytes) -> Mode:
    doc = _load(raw)
    try:
        return Mode(str(doc.get("mode")))
    except ValueError:
        raise Malformed(f"mode {doc.get('mode')!r}") from None


def decode_delete_subject(raw: bytes) -> int:
    doc = _load(raw)
    version = doc.get("version")
    if not isinstance(version, int):
        raise Malformed("a DELETE_SUBJECT value needs an integer version")
    return version
