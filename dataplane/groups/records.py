"""Keys and values of ``__consumer_offsets``, in Apache Kafka's own formats.

Every key and every value starts with an int16 version. Classic (non-flexible) versions
use int16-length strings (-1 = null) and int32-length bytes; flexible versions (value v4)
use compact strings and bytes (unsigned varint length + 1, 0 = null), compact arrays, and
end each struct with tagged fields (unsigned varint count, then tag, size, data).

Keys (the version tells the record type)::

    v0, v1  OffsetCommitKey    group string | topic string | partition int32
    v2      GroupMetadataKey   group string
    v3+     consumer-protocol (KIP-848) and share-group records: not used here, skipped

OffsetCommitValue::

    v0  offset int64 | metadata string | commitTimestamp int64
    v1  offset int64 | metadata string | commitTimestamp int64 | expireTimestamp int64
    v2  offset int64 | metadata string | commitTimestamp int64
    v3  offset int64 | leaderEpoch int32 | metadata string | commitTimestamp int64
    v4  flexible v3 | tagged fields (tag 0: topicId uuid)

GroupMetadataValue::

    protocolType string | generation int32 | protocol nullable string |
    leader nullable string | [v2+] currentStateTimestamp int64 |
    members int32 count, then per member:
        memberId string | [v3+] groupInstanceId nullable string | clientId string |
        clientHost string | [v1+] rebalanceTimeout int32 | sessionTimeout int32 |
        subscription bytes | assignment bytes
    v4 is the flexible form of v3.

A consumer's JoinGroup metadata (ConsumerProtocolSubscription, protocol type "consumer"),
read only for the topics it names (``subscribed_topics``)::

    version int16 | topics int32 count, then string each | userData bytes | [v1+] ...

A record with a null value is a tombstone: the offset or the group is gone. Sluice
writes what Kafka 4 writes: OffsetCommitKey v1 with value v3 (v1 when the commit carries
a retention time) and GroupMetadataKey v2 with value v3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from wire.errors import CorruptRecord

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    """-1 when the client did not send one."""
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    """Only value v1 has it; -1 otherwise."""


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


# --------------------------------------------------------------------------- encoding


class RecordWriter:
    """Classic (non-flexible) fields after an int16 version, as coordinator records use."""

    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

    def i8(self, value: int) -> None:
        self.out += _I8.pack(value)

    def i16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def i32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def i64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.out += _I16.pack(-1)
            return
        data = value.encode()
        self.out += _I16.pack(len(data))
        self.out += data

    def bytes_(self, value: bytes) -> None:
        self.out += _I32.pack(len(value))
        self.out += value


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    w = RecordWriter(OFFSET_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.out)


def encode_group_key(group: str) -> bytes:
    w = RecordWriter(GROUP_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def encode_offset_value(value: OffsetValue) -> bytes:
    if value.expire_timestamp >= 0:
        w = RecordWriter(OFFSET_VALUE_WITH_EXPIRY)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
        return bytes(w.out)
    w = RecordWriter(OFFSET_VALUE_VERSION)
    w.i64(value.offset)
    w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    return bytes(w.out)


def encode_group_value(value: GroupValue) -> bytes:
    w = RecordWriter(GROUP_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


# --------------------------------------------------------------------------- decoding


class RecordReader:
    """Fields of a coordinator record, classic or flexible; CorruptRecord names ``what``."""

    def __init__(
        self, data: bytes, flexible: bool = False, what: str = "__consumer_offsets"
    ) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible
        self.what = what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptRecord(f"truncated {self.what} record")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        shift = 0
        value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise CorruptRecord(f"varint too long in {self.what} record")

    def nullable_string(self) -> str | None:
        size = self.uvarint() - 1 if self.flexible else self.i16()
        if size < 0:
            return None
        return self._take(size).decode("utf-8", "replace")

    def string(self) -> str:
        return self.nullable_string() or ""

    def bytes_(self) -> bytes:
        size = self.uvarint() - 1 if self.flexible else self.i32()
        return b"" if size < 0 else self._take(size)

    def array_length(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i32()

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of one record, or None for record types this coordinator does not use."""
    r = RecordReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string())
    return None


def decode_offset_value(data: bytes) -> OffsetValue:
    version = _I16.unpack_from(data, 0)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise CorruptRecord(f"unknown OffsetCommitValue version {version}")
    r = RecordReader(data, flexible=version >= 4)
    r.pos = 2
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tagged_fields()
    return OffsetValue(offset, epoch, metadata, commit_ts, expire_ts)


def decode_group_value(data: bytes) -> GroupValue:
    version = _I16.unpack_from(data, 0)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise CorruptRecord(f"unknown GroupMetadataValue version {version}")
    r = RecordReader(data, flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members: list[MemberValue] = []
    for _ in range(max(r.array_length(), 0)):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session = rebalance = r.i32()
        if version >= 1:
            session = r.i32()
        else:
            rebalance = session
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tagged_fields()
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance,
                session,
                subscription,
                assignment,
            )
        )
    r.skip_tagged_fields()
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """The topics a consumer's ConsumerProtocolSubscription names (any version: the fields
    after the topic list are not read). CorruptRecord if it is not one."""
    r = RecordReader(metadata)
    r.i16()
    count = r.i32()
    if count < 0:
        raise CorruptRecord("negative topic count in a consumer subscription")
    return frozenset(r.string() for _ in range(count))
