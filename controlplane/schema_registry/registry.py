"""One cluster's registry: its state (``state.py``), read from the cluster's ``_schemas`` topic
(``storage.py``) and changed only by records written there, and the operations of Confluent's
REST API over it (``routes.py`` maps requests to them).

Invariants:
- Memory is a prefix of the topic: loaded at first use, caught up before every change, and a
  change is a record produced with acks=all and applied when read back. The HTTP answer comes
  after that, so an acknowledged registration is on every in-sync replica.
- Changes are serialized (one lock per cluster); reads are served from memory.
- Ids are global in the cluster: the same schema (type, canonical text, references) gets the
  same id under every subject; a new one gets the highest id so far plus one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from controlplane.schema_registry import errors, records, schemas
from controlplane.schema_registry.model import (
    Compatibility,
    Mode,
    Reference,
    SchemaContent,
    SchemaType,
    Subject,
    VersionEntry,
    schema_json,
)
from controlplane.schema_registry.protobuf import ProtoSchema
from controlplane.schema_registry.records import Key, KeyType
from controlplane.schema_registry.schemas import Parsed, Previous
from controlplane.schema_registry.state import RegistryState
from controlplane.schema_registry.storage import SchemasTopic, TopicMissing

log = logging.getLogger("sluice.controlplane.schema_registry")

MAX_REFERENCE_DEPTH = 32
"""References of references ... deeper than this are refused (a cycle would never end)."""
CONTEXT = "."
"""Confluent's default context, named in its messages."""


@dataclass(frozen=True)
class SchemaRequest:
    """The body of a register, lookup or compatibility request, checked for types."""

    schema: str
    schema_type: SchemaType
    references: tuple[Reference, ...] = ()
    schema_id: int | None = None
    version: int | None = None


LATEST = -1


def validate_subject(subject: str) -> None:
    if not subject or any(ord(c) < 0x20 or ord(c) == 0x7F for c in subject):
        raise errors.invalid_subject(subject)


class Registry:
    def __init__(self, cluster: str, topic: SchemasTopic, protoc_timeout: float) -> None:
        self.cluster = cluster
        self.topic = topic
        self.protoc_timeout = protoc_timeout
        self.state = RegistryState()
        self.lock = asyncio.Lock()
        self.loaded = False
        self.parsed: dict[SchemaContent, Parsed] = {}

    # ------------------------------------------------------------------ the topic

    async def ensure_loaded(self) -> None:
        if self.loaded:
            return
        async with self.lock:
            if not self.loaded:
                await self._catch_up()
                self.loaded = True
                log.info(
                    "cluster %s: schema registry loaded (%d subjects, offset %d)",
                    self.cluster,
                    len(self.state.subjects),
                    self.state.next_offset,
                )

    async def _catch_up(self) -> None:
        try:
            start, end = await self.topic.bounds()
        except TopicMissing:
            return
        begin = max(self.state.next_offset, start)
        if begin < end:
            for record in await self.topic.read(begin, end):
                self.state.apply(record.offset, record.key, record.value)

    async def _write(self, key: Key, value: bytes | None) -> None:
        offset = await self.topic.write(key.encode(), value)
        for record in await self.topic.read(self.state.next_offset, offset + 1):
            self.state.apply(record.offset, record.key, record.value)

    # ------------------------------------------------------------------ parsing

    async def parsed_of(self, content: SchemaContent, depth: int = 0) -> Parsed:
        cached = self.parsed.get(content)
        if cached is None:
            refs = await self._references(content.references, depth)
            cached = await schemas.parse(
                content.schema_type, content.text, refs, self.protoc_timeout
            )
            self.parsed[content] = cached
        return cached

    async def _references(self, references: tuple[Reference, ...], depth: int) -> dict[str, Parsed]:
        if depth > MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema(
                f"Invalid schema, details: references nest deeper than {MAX_REFERENCE_DEPTH}"
            )
        out: dict[str, Parsed] = {}
        for ref in references:
            entry = self._entry(ref.subject, ref.version, deleted=True)
            if entry is None:
                raise errors.invalid_schema(
                    f"Invalid schema, details: reference {ref.name!r} names subject "
                    f"'{ref.subject}' version {ref.version}, which does not exist"
                )
            out[ref.name] = await self.parsed_of(entry.content, depth + 1)
        return out

    def _resolve_references(self, references: tuple[Reference, ...]) -> tuple[Reference, ...]:
        """Version -1 of a reference is its subject's latest version."""
        out = []
        for ref in references:
            if ref.version != LATEST:
                out.append(ref)
                continue
            latest = self._subject(ref.subject).latest()
            if latest is None:
                raise errors.invalid_schema(
                    f"Invalid schema, details: reference {ref.name!r} names subject "
                    f"'{ref.subject}', which has no version"
                )
            out.append(Reference(ref.name, ref.subject, latest.version))
        return tuple(out)

    async def _content(
        self, request: SchemaRequest, normalize: bool
    ) -> tuple[SchemaContent, Parsed]:
        if not request.schema.strip():
            raise errors.invalid_schema("Empty schema")
        references = self._resolve_references(request.references)
        refs = await self._references(references, 0)
        parsed = await schemas.parse(request.schema_type, request.schema, refs, self.protoc_timeout)
        text = schemas.text_of(parsed, normalize)
        return SchemaContent(request.schema_type, text, references), parsed

    # ------------------------------------------------------------------ reads

    def _subject(self, subject: str) -> Subject:
        return self.state.subjects.get(subject) or Subject()

    def _entry(self, subject: str, version: int, deleted: bool) -> VersionEntry | None:
        found = self._subject(subject)
        if version == LATEST:
            return found.latest(deleted)
        entry = found.versions.get(version)
        if entry is None or (entry.deleted and not deleted):
            return None
        return entry

    def entry(self, subject: str, version: int, deleted: bool) -> VersionEntry:
        """A version of a subject: 40401 without one (live, or any with ``deleted``), 40402
        when the version is not there."""
        found = self._subject(subject)
        if not (found.all() if deleted else found.live()):
            raise errors.subject_not_found(subject)
        entry = self._entry(subject, version, deleted)
        if entry is None:
            raise errors.version_not_found(version)
        return entry

    def subjects(self, deleted: bool, prefix: str, deleted_only: bool = False) -> list[str]:
        """Subjects with a live version (or any, with ``deleted``; only those without a live
        one, with ``deleted_only``), sorted."""
        out = []
        for name, subject in sorted(self.state.subjects.items()):
            if not name.startswith(prefix) or not subject.versions:
                continue
            live = bool(subject.live())
            if (deleted_only and not live) or (not deleted_only and (live or deleted)):
                out.append(name)
        return out

    def versions(self, subject: str, deleted: bool) -> list[int]:
        found = self._subject(subject)
        entries = found.all() if deleted else found.live()
        if not entries:
            raise errors.subject_not_found(subject)
        return [e.version for e in entries]

    def content_of(self, schema_id: int) -> SchemaContent:
        content = self.state.content(schema_id)
        if content is None:
            raise errors.schema_not_found(schema_id)
        return content

    def uses_of(self, schema_id: int, deleted: bool) -> list[VersionEntry]:
        self.content_of(schema_id)
        return [e for e in self.state.entries(deleted) if e.schema_id == schema_id]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        entry = self.entry(subject, version, deleted=False)
        return sorted({e.schema_id for e in self.state.referrers(subject, entry.version, False)})

    async def render(self, content: SchemaContent, fmt: str) -> dict[str, Any]:
        """A schema's fields in an answer; ``format=serialized`` gives a Protobuf schema as
        its base64 FileDescriptorProto (what Python clients read)."""
        text = None
        if fmt == "serialized" and content.schema_type is SchemaType.PROTOBUF:
            parsed = await self.parsed_of(content)
            assert isinstance(parsed, ProtoSchema)
            text = parsed.serialized()
        return schema_json(content, text)

    async def version_json(self, entry: VersionEntry, fmt: str = "") -> dict[str, Any]:
        return {
            "subject": entry.subject,
            "version": entry.version,
            "id": entry.schema_id,
            **(await self.render(entry.content, fmt)),
        }

    # ------------------------------------------------------------------ lookups and checks

    async def lookup(
        self, subject: str, request: SchemaRequest, normalize: bool, deleted: bool
    ) -> VersionEntry:
        """The version of ``subject`` that is this schema (POST /subjects/{subject})."""
        found = self._subject(subject)
        entries = found.all() if deleted else found.live()
        if not entries:
            raise errors.subject_not_found(subject)
        normalize = normalize or self.state.normalize(subject)
        content, parsed = await self._content(request, normalize)
        for entry in reversed(entries):
            if await self._same(entry, content, parsed):
                return entry
        raise errors.schema_not_found()

    async def _same(self, entry: VersionEntry, content: SchemaContent, parsed: Parsed) -> bool:
        if entry.content == content:
            return True
        if entry.content.schema_type is not content.schema_type:
            return False
        if entry.content.references != content.references:
            return False
        try:
            stored = await self.parsed_of(entry.content)
        except errors.RegistryError:
            return False
        return stored.normalized == parsed.normalized

    async def check(
        self, subject: str, version: int | None, request: SchemaRequest, normalize: bool
    ) -> list[str]:
        """Why ``request`` is not compatible with ``version`` of ``subject`` (None: the
        versions the subject's level names) under the subject's level; empty: it is."""
        normalize = normalize or self.state.normalize(subject)
        if version is None:
            against = self._subject(subject).live()
        elif version == LATEST:
            latest = self._subject(subject).latest()
            against = [] if latest is None else [latest]
        else:
            entry = self._entry(subject, version, deleted=False)
            if entry is None:
                raise errors.version_not_found(version)
            against = [entry]
        _, parsed = await self._content(request, normalize)
        previous = await self._previous(against)
        return schemas.check(self.state.compatibility(subject), parsed, previous)

    async def _previous(self, entries: list[VersionEntry]) -> list[Previous]:
        out = []
        for entry in entries:
            try:
                parsed = await self.parsed_of(entry.content)
            except errors.RegistryError as exc:
                raise errors.invalid_schema(
                    f"version {entry.version} of subject '{entry.subject}' does not parse any "
                    f"more: {exc.message}"
                ) from None
            out.append(Previous(entry.version, entry.content.text, parsed))
        return out

    # ------------------------------------------------------------------ changes

    def _writable(self, subject: str) -> Mode:
        mode = self.state.mode(subject)
        if mode.read_only:
            raise errors.not_permitted(
                f"Subject {subject} in context {CONTEXT} is in read-only mode"
            )
        return mode

    async def register(self, subject: str, request: SchemaRequest, normalize: bool) -> VersionEntry:
        validate_subject(subject)
        async with self.lock:
            await self._catch_up()
            mode = self._writable(subject)
            importing = request.schema_id is not None and request.schema_id >= 0
            if importing and mode is not Mode.IMPORT:
                raise errors.not_permitted(
                    f"Subject {subject} in context {CONTEXT} is not in import mode"
                )
            if not importing and mode is not Mode.READWRITE:
                raise errors.not_permitted(
                    f"Subject {subject} in context {CONTEXT} is not in read-write mode"
                )
            normalize = normalize or self.state.normalize(subject)
            content, parsed = await self._content(request, normalize)
            found = self._subject(subject)
            live = found.live()
            existing_id = self.state.id_of(content)
            if request.version in (None, LATEST):
                for entry in reversed(live):
                    if (importing and entry.schema_id != request.schema_id) or not (
                        await self._same(entry, content, parsed)
                    ):
                        continue
                    return entry
            if mode is not Mode.IMPORT:
                level = self.state.compatibility(subject)
                messages = schemas.check(level, parsed, await self._previous(live))
                if messages:
                    raise errors.incompatible(subject, messages)
            version = self._next_version(found, request.version, mode)
            schema_id = self._new_id(content, existing_id, request.schema_id if importing else None)
            entry = VersionEntry(subject, version, schema_id, content)
            await self._write(Key(KeyType.SCHEMA, subject, version), records.schema_value(entry))
            self.parsed[content] = parsed
            log.info(
                "cluster %s: registered %s schema id %d as %s version %d",
                self.cluster,
                content.schema_type.value,
                schema_id,
                subject,
                version,
            )
            return entry

    @staticmethod
    def _next_version(found: Subject, asked: int | None, mode: Mode) -> int:
        next_version = max(found.versions, default=0) + 1
        if asked in (None, LATEST, 0):
            return next_version
        assert asked is not None
        if asked != next_version and mode is not Mode.IMPORT:
            raise errors.invalid_schema("Version is not one more than previous version")
        return asked

    def _new_id(self, content: SchemaContent, existing: int | None, asked: int | None) -> int:
        if asked is not None:
            held = self.state.content(asked)
            if held is not None and held != content:
                raise errors.not_permitted(
                    f"Overwrite new schema with id {asked} in context {CONTEXT} is not permitted."
                )
            return asked
        if existing is not None:
            return existing
        return self.state.max_id() + 1

    async def delete_version(self, subject: str, version: int, permanent: bool) -> int:
        async with self.lock:
            await self._catch_up()
            self._writable(subject)
            found = self._subject(subject)
            if not found.versions:
                raise errors.subject_not_found(subject)
            entry = self._entry(subject, version, deleted=True)
            if entry is None:
                if version == LATEST:
                    raise errors.subject_not_found(subject)
                raise errors.version_not_found(version)
            if self.state.referrers(subject, entry.version, deleted=permanent):
                raise errors.reference_exists(subject, entry.version)
            key = Key(KeyType.SCHEMA, subject, entry.version)
            if not permanent:
                if entry.deleted:
                    raise errors.version_soft_deleted(subject, entry.version)
                gone = VersionEntry(subject, entry.version, entry.schema_id, entry.content, True)
                await self._write(key, records.schema_value(gone))
                return entry.version
            if not entry.deleted:
                raise errors.version_not_soft_deleted(subject, entry.version)
            await self._write(key, None)
            if not self._subject(subject).versions:
                await self._forget(subject)
            return entry.version

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self.lock:
            await self._catch_up()
            self._writable(subject)
            found = self._subject(subject)
            if not found.versions:
                raise errors.subject_not_found(subject)
            live = found.live()
            targets = found.all() if permanent else live
            for entry in targets:
                users = self.state.referrers(subject, entry.version, deleted=permanent)
                if any(user.subject != subject for user in users):
                    raise errors.reference_exists(subject, entry.version)
            if not permanent:
                if not live:
                    raise errors.subject_soft_deleted(subject)
                await self._write(
                    Key(KeyType.DELETE_SUBJECT, subject),
                    records.delete_subject_value(subject, live[-1].version),
                )
                return [e.version for e in live]
            if live:
                raise errors.subject_not_soft_deleted(subject)
            for entry in reversed(targets):
                await self._write(Key(KeyType.SCHEMA, subject, entry.version), None)
            await self._forget(subject)
            return [e.version for e in targets]

    async def _forget(self, subject: str) -> None:
        """A subject permanently gone takes its config and mode with it (as Confluent)."""
        if self.state.configs.get(subject) is not None:
            await self._write(Key(KeyType.CONFIG, subject), None)
        if subject in self.state.modes:
            await self._write(Key(KeyType.MODE, subject), None)

    async def set_config(
        self, subject: str | None, level: Compatibility | None, normalize: bool | None
    ) -> Compatibility:
        async with self.lock:
            await self._catch_up()
            if subject is not None:
                validate_subject(subject)
            current = self.state.configs.get(subject)
            if level is None:
                level = (current.compatibility if current else None) or (
                    self.state.compatibility(subject)
                )
            if normalize is None and current is not None:
                normalize = current.normalize
            await self._write(
                Key(KeyType.CONFIG, subject), records.config_value(subject, level, normalize)
            )
            return level

    async def delete_config(self, subject: str | None) -> Compatibility:
        async with self.lock:
            await self._catch_up()
            current = self.state.configs.get(subject)
            if current is None or current.compatibility is None:
                if subject is not None:
                    raise errors.compatibility_not_configured(subject)
                return self.state.compatibility(None)
            await self._write(Key(KeyType.CONFIG, subject), None)
            return current.compatibility

    async def set_mode(self, subject: str | None, mode: Mode, force: bool) -> Mode:
        async with self.lock:
            await self._catch_up()
            if subject is not None:
                validate_subject(subject)
            if mode is Mode.IMPORT and not force and self.state.has_schemas(subject):
                raise errors.not_permitted(
                    "Cannot import since found existing subjects"
                    if subject is None
                    else f"Cannot import since found existing subject '{subject}'"
                )
            await self._write(Key(KeyType.MODE, subject), records.mode_value(subject, mode))
            return mode

    async def delete_mode(self, subject: str) -> Mode:
        async with self.lock:
            await self._catch_up()
            current = self.state.modes.get(subject)
            if current is None:
                raise errors.mode_not_configured(subject)
            await self._write(Key(KeyType.MODE, subject), None)
            return current
