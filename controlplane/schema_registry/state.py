"""A registry's state: what the records of its ``_schemas`` topic say, applied in offset order
(``apply``). Nothing else changes it: a write is produced first and applied when it is read
back, so memory is always a prefix of the topic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from controlplane.schema_registry import records
from controlplane.schema_registry.model import (
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    Compatibility,
    Mode,
    SchemaContent,
    Subject,
    VersionEntry,
)
from controlplane.schema_registry.records import KeyType

log = logging.getLogger("sluice.controlplane.schema_registry")


@dataclass(frozen=True)
class Config:
    compatibility: Compatibility | None = None
    normalize: bool | None = None


@dataclass
class RegistryState:
    subjects: dict[str, Subject] = field(default_factory=dict)
    configs: dict[str | None, Config] = field(default_factory=dict)
    """By subject; None is the global one."""
    modes: dict[str | None, Mode] = field(default_factory=dict)
    next_offset: int = 0
    """The offset after the last record applied."""
    malformed: int = 0
    """Records skipped because they are in no known format."""
    _by_id: dict[int, SchemaContent] | None = None
    _by_content: dict[SchemaContent, int] | None = None

    # ------------------------------------------------------------------ the records

    def apply(self, offset: int, key_raw: bytes | None, value: bytes | None) -> None:
        self.next_offset = max(self.next_offset, offset + 1)
        self._by_id = self._by_content = None
        try:
            key = records.decode_key(key_raw)
            if key is not None:
                self._apply(key, value)
        except records.Malformed as exc:
            self.malformed += 1
            log.warning("_schemas offset %d skipped: %s", offset, exc)

    def _apply(self, key: records.Key, value: bytes | None) -> None:  # noqa: PLR0912 - one branch per key type
        subject = key.subject
        if key.keytype is KeyType.SCHEMA:
            assert subject is not None
            assert key.version is not None
            if value is None:
                found = self.subjects.get(subject)
                if found is not None:
                    found.versions.pop(key.version, None)
                    if not found.versions:
                        del self.subjects[subject]
            else:
                entry = records.decode_schema(value, key)
                self.subjects.setdefault(subject, Subject()).versions[key.version] = entry
        elif key.keytype is KeyType.CONFIG:
            if value is None:
                self.configs.pop(subject, None)
            else:
                level, normalize = records.decode_config(value)
                self.configs[subject] = Config(level, normalize)
        elif key.keytype is KeyType.MODE:
            if value is None:
                self.modes.pop(subject, None)
            else:
                self.modes[subject] = records.decode_mode(value)
        elif key.keytype is KeyType.DELETE_SUBJECT and value is not None and subject:
            upto = records.decode_delete_subject(value)
            for entry in self.subjects.get(subject, Subject()).versions.values():
                if entry.version <= upto:
                    entry.deleted = True
        elif key.keytype is KeyType.CLEAR_SUBJECT and value is not None and subject:
            self.subjects.pop(subject, None)

    # ------------------------------------------------------------------ reads

    def entries(self, deleted: bool = True) -> list[VersionEntry]:
        return [
            entry
            for name in sorted(self.subjects)
            for entry in self.subjects[name].all()
            if deleted or not entry.deleted
        ]

    def _index(self) -> tuple[dict[int, SchemaContent], dict[SchemaContent, int]]:
        if self._by_id is None or self._by_content is None:
            self._by_id, self._by_content = {}, {}
            for entry in self.entries():
                self._by_id.setdefault(entry.schema_id, entry.content)
                self._by_content.setdefault(entry.content, entry.schema_id)
        return self._by_id, self._by_content

    def content(self, schema_id: int) -> SchemaContent | None:
        """The schema with this id (soft-deleted versions keep it readable)."""
        return self._index()[0].get(schema_id)

    def id_of(self, content: SchemaContent) -> int | None:
        return self._index()[1].get(content)

    def max_id(self) -> int:
        return max((entry.schema_id for entry in self.entries()), default=0)

    def has_schemas(self, subject: str | None = None) -> bool:
        if subject is None:
            return any(s.versions for s in self.subjects.values())
        found = self.subjects.get(subject)
        return found is not None and bool(found.versions)

    def referrers(self, subject: str, version: int, deleted: bool) -> list[VersionEntry]:
        """The versions whose references name ``subject`` ``version``."""
        return [
            entry
            for entry in self.entries(deleted)
            if any(r.subject == subject and r.version == version for r in entry.content.references)
        ]

    def compatibility(self, subject: str | None) -> Compatibility:
        for scope in (subject, None):
            config = self.configs.get(scope)
            if config is not None and config.compatibility is not None:
                return config.compatibility
        return DEFAULT_COMPATIBILITY

    def normalize(self, subject: str | None) -> bool:
        for scope in (subject, None):
            config = self.configs.get(scope)
            if config is not None and config.normalize is not None:
                return config.normalize
        return False

    def mode(self, subject: str | None) -> Mode:
        for scope in (subject, None):
            if scope in self.modes:
                return self.modes[scope]
        return DEFAULT_MODE
