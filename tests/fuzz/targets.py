"""The fuzz targets: one function per parser that reads bytes someone else wrote.

Each target takes one input (``bytes``), runs it through the code the broker (or the Spark
executor) runs on such bytes, and catches exactly the errors that code documents for bad
input (``Target.expected``). Anything else escaping -- an IndexError, a struct.error, a
MemoryError, a crash of a native library -- is a bug, and so is a hang or an allocation
that grows with a length field instead of with the input. The table of targets is
``TARGETS``; README.md says what each one feeds and how.

``feature`` is a hook the fuzzing worker replaces with libFuzzer counters, so reaching a
new API version or codec counts as new coverage even where the parser is native code
(kio's decoder, the codecs) that atheris cannot instrument. Without atheris it does
nothing: the regression test runs the same targets.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import shutil
import struct
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

from dataplane.cluster import records as metadata_records
from dataplane.cluster.image import MetadataImage
from dataplane.config import BrokerConfig
from dataplane.handlers import sasl_authenticate, sasl_handshake
from dataplane.handlers.context import RequestContext
from dataplane.handlers.registry import SERVED
from dataplane.log.partition_log import PartitionLog
from dataplane.log.producer_state import ProducerStateTable
from dataplane.raft.errors import StorageCorrupt
from dataplane.raft.storage import (
    LOG_FILE,
    SNAPSHOT_FILE,
    STATE_FILE,
    RaftStorage,
    encode_entries,
)
from dataplane.raft.types import Entry, EntryKind
from dataplane.remote.reader import RemoteReader
from dataplane.security import credentials
from dataplane.security.session import Security, Session
from spark import reading as spark_reading
from spark.planning import TieredSplit
from spark.records import CorruptSegment
from tests.fuzz import inputs
from tiered.chunk_cache import ChunkCache
from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectNotFound
from tiered.layout import segment_keys
from tiered.object_store import ObjectInfo
from tiered.remote_segment import COPY_FINISHED, RemoteSegment
from wire.compression import decompress
from wire.errors import (
    CorruptRecord,
    InvalidRecord,
    InvalidRequest,
    InvalidTimestamp,
    MessageTooLarge,
    RemoteStorageError,
    UnsupportedCompression,
    UnsupportedMessageFormat,
)
from wire.framing import decode_request, encode_response, peek_header
from wire.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    LONG_MAX,
    Record,
    batch_of_records,
    decode_records,
    parse_header,
    validate_batches,
    validate_records,
)
from wire.record_columns import ColumnBuilder
from wire.segment_index import parse_index
from wire.transactions import parse_txn_index


def _no_feature(_name: str) -> None:
    return None


feature: Callable[[str], None] = _no_feature
"""Called with a name for each outcome worth keeping an input for (``worker.py`` sets it)."""

SCRATCH_ENV = "SLUICE_FUZZ_SCRATCH"
"""Where the file-based targets make their temporary directories (default: /dev/shm)."""
MIN_FRAME = 8  # the server closes a shorter frame before it parses anything
REQUEST_ERRORS: tuple[type[BaseException], ...] = (InvalidRequest,)
"""What ``decode_request`` raises on a malformed request (the server closes the connection)."""
BATCH_ERRORS: tuple[type[BaseException], ...] = (
    MessageTooLarge,  # with DecompressionLimit: a block over message.max.decompressed.bytes
    CorruptRecord,
    InvalidRecord,  # with InvalidRecords
    InvalidTimestamp,  # with InvalidTimestamps
    UnsupportedMessageFormat,
    UnsupportedCompression,
)
"""What ``validate_batches`` / ``validate_records`` / ``decode_records`` raise on bad
batches (a produce error code per partition)."""


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    run: Callable[[bytes], None]
    what: str


# --------------------------------------------------------------------------- requests


def kafka_request(data: bytes) -> None:
    """One request frame (the bytes after its size), as ``KafkaConnection._dispatch``
    takes it: header peeked, API key and version checked against what the broker serves,
    header and body decoded. The API key is the input's first two bytes."""
    if len(data) < MIN_FRAME:
        return
    head = peek_header(data)
    key, version = head.api_key, head.api_version
    served = SERVED.get(key)
    if served is None:
        return
    low, high = served.versions
    if not low <= version <= high:
        return
    try:
        decode_request(data, key, version)
    except REQUEST_ERRORS:
        feature(f"request/{key}/{version}/bad")
        return
    feature(f"request/{key}/{version}/ok")


def request_features() -> list[str]:
    """Every feature name ``kafka_request`` can report."""
    names = []
    for key, served in sorted(SERVED.items()):
        low, high = served.versions
        for version in range(low, high + 1):
            names += [f"request/{key}/{version}/ok", f"request/{key}/{version}/bad"]
    return names


def decoded_api(data: bytes) -> tuple[int, int] | None:
    """(API key, version) of a frame that decodes, else None (run.py's per-API table)."""
    if len(data) < MIN_FRAME:
        return None
    head = peek_header(data)
    served = SERVED.get(head.api_key)
    if served is None or not served.versions[0] <= head.api_version <= served.versions[1]:
        return None
    try:
        decode_request(data, head.api_key, head.api_version)
    except REQUEST_ERRORS:
        return None
    return head.api_key, head.api_version


# --------------------------------------------------------------------------- record batches

_NOW_MS = 1_700_000_000_000
_HOUR_MS = 3_600_000


def _built_batch(body: bytes) -> bytes:
    """A batch made by the harness around a fuzzed records block: byte 0 the codec (mod 5),
    byte 1 the record count, byte 2 attribute bits; the rest is compressed with the codec."""
    head = body[:3].ljust(3, b"\x00")
    codec, count, attributes = head[0] % 5, head[1], head[2]
    batch = bytearray(batch_of_records(body[3:], count, _NOW_MS, codec=codec))
    if not count:
        return bytes(batch)
    struct.pack_into(">h", batch, 21, codec | (attributes & 0x78))
    if attributes & 0x80:  # an idempotent producer's batch
        struct.pack_into(">qhi", batch, 43, 7, 0, 0)
    return inputs.fix_batch_crcs(bytes(batch))


def record_batch(data: bytes) -> None:
    """The records of one produce partition, as the broker checks them: byte 0 picks raw
    bytes (0), the same with every batch CRC recomputed (1), or a batch built around a
    fuzzed records block in one of the five codecs (2); then ``validate_batches`` (header,
    CRC, codec), the topic rules that decompress and walk records (``validate_records``:
    compacted-topic keys, timestamp bounds, recompression to another codec) and
    ``decode_records`` of each batch."""
    if not data:
        return
    mode, body = data[0] % 3, data[1:]
    buf = body if mode == 0 else inputs.fix_batch_crcs(body) if mode == 1 else _built_batch(body)
    try:
        headers = validate_batches(buf)
    except BATCH_ERRORS:
        feature(f"batch/{mode}/invalid")
        return
    codecs = {h.codec for h in headers}
    recompress_to = (max(codecs) + 1) % 5
    rules = (  # (compacted, timestamp bound ms, compression.type codec): one rule at a time
        (True, LONG_MAX, -1),
        (False, _HOUR_MS, -1),
        (False, LONG_MAX, recompress_to),
    )
    for compacted, bound, target_codec in rules:
        try:
            validate_records(
                buf,
                headers,
                topic_partition="t-0",
                now_ms=_NOW_MS,
                compacted=compacted,
                before_ms=bound,
                after_ms=bound,
                codec=target_codec,
            )
            feature(f"batch/rules-passed/{compacted}/{bound}/{target_codec}")
        except BATCH_ERRORS:
            feature(f"batch/{mode}/rules-refused/{compacted}/{bound}/{target_codec}")
    view = memoryview(buf)
    for header in headers:
        batch = view[header.position : header.position + header.size]
        try:
            records = decode_records(batch)
        except BATCH_ERRORS:
            feature(f"batch/codec/{header.codec}/undecodable")
            records = None
        else:
            feature(f"batch/codec/{header.codec}/decoded")
        _columns_agree(batch, records)


def _columns_agree(batch: memoryview, records: list[Record] | None) -> None:
    """The Spark source's compiled walker (``wire.record_columns``) on the same batch:
    it refuses what ``decode_records`` refused and gives the rows it gave (a difference
    is a bug: AssertionError); it reads nothing outside its arrays, which it does not
    check (a crash of the process)."""
    header = parse_header(batch, 0)
    try:
        body = np.frombuffer(decompress(header.codec, bytes(batch[HEADER_SIZE:])), np.uint8)
    except BATCH_ERRORS:
        assert records is None, "decompressed for decode_records, not for the columns"
        return
    builder = ColumnBuilder(True, rows=16, data=256)
    fixed = header.max_timestamp if header.log_append_time else -1
    try:
        builder.add(body, header.record_count, header.base_offset, header.base_timestamp, fixed)
    except CorruptRecord:
        assert records is None, "the column walker refused a batch that decode_records read"
        return
    assert records is not None, "the column walker read a batch that decode_records refused"
    taken = builder.take()
    assert taken.offsets.tolist() == [r.offset for r in records]
    assert taken.timestamps_ms.tolist() == [r.timestamp for r in records]
    values = [
        None if taken.value_nulls[i] else bytes(taken.value_data[lo:hi])
        for i, (lo, hi) in enumerate(itertools.pairwise(taken.value_ends.tolist()))
    ]
    assert values == [r.value for r in records]
    assert taken.header_ends.tolist()[-1] == sum(len(r.headers) for r in records)


def batch_features() -> list[str]:
    names = [f"batch/{m}/invalid" for m in range(3)]
    rules = [(True, LONG_MAX, -1), (False, _HOUR_MS, -1)]
    rules += [(False, LONG_MAX, codec) for codec in range(5)]
    names += [f"batch/{m}/rules-refused/{c}/{b}/{t}" for m in range(3) for c, b, t in rules]
    names += [f"batch/rules-passed/{c}/{b}/{t}" for c, b, t in rules]
    names += [f"batch/codec/{c}/{o}" for c in range(8) for o in ("undecodable", "decoded")]
    return names


# --------------------------------------------------------------------------- segments


class _Scratch:
    """One temporary directory per process, emptied before each input."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._root: Path | None = None

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Path]:
        if self._root is None:
            # tmpfs where there is one: recovery fsyncs, and a disk's fsync costs ~1 ms+;
            # run.py names a directory of its own, removed when the worker is done
            shm = Path("/dev/shm")
            where = os.environ.get(SCRATCH_ENV) or (str(shm) if shm.is_dir() else None)
            self._root = Path(tempfile.mkdtemp(prefix=f"sluice-fuzz-{self.name}-", dir=where))
            atexit.register(shutil.rmtree, self._root, True)
        work = self._root / "w"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)


_SEGMENT_SCRATCH = _Scratch("segment")
_BROKER_DEFAULTS = BrokerConfig.build(data_dir=".", listen="127.0.0.1:9092")
_TOPIC_OVERRIDES = {"file.delete.delay.ms": 0, "index.interval.bytes": 512}


def _topic_config(key: str) -> Any:
    if key in _TOPIC_OVERRIDES:
        return _TOPIC_OVERRIDES[key]
    return _BROKER_DEFAULTS.topic_default(key)


def _segment_file(kind: int, chunk: bytes) -> tuple[str, bytes]:
    """The file name and contents a container item stands for (see README.md)."""
    fix = bool(kind & inputs.FIX)
    role = (kind & ~inputs.FIX) % 9
    if role in (0, 1, 2, 3):
        base, content = inputs.u64_prefix(chunk)
        base %= 10**20
        suffix = (".log", ".index", ".txnindex", ".snapshot")[role]
        if fix:
            fixers = (
                inputs.fix_batch_crcs,
                inputs.fix_trailing_crc,
                bytes,
                inputs.fix_snapshot_crc,
            )
            content = fixers[role](content)
        return f"{base:020d}{suffix}", content
    if role == 8:  # an interrupted compaction swap: B.E.swap
        first, rest = inputs.u64_prefix(chunk)
        end, content = inputs.u64_prefix(rest)
        content = inputs.fix_batch_crcs(content) if fix else content
        return f"{first % 10**20:020d}.{end % 10**20:020d}.swap", content
    name = (
        "leader-epoch-checkpoint",
        "log-start-offset",
        "high-watermark",
        "cleaner-offset-checkpoint",
    )[role - 4]
    return name, chunk


def segment_recovery(data: bytes) -> None:
    """A partition directory made of the input's items (``.log``, ``.index``,
    ``.txnindex``, producer ``.snapshot``, ``leader-epoch-checkpoint``, ``log-start-offset``,
    ``high-watermark``, ``cleaner-offset-checkpoint``, ``.swap``), opened by the broker's
    ``PartitionLog`` (its ``LogLoader`` recovers it), then read from its start to its end.
    Recovery documents no error for damaged files: it truncates, ignores and rebuilds."""
    with _SEGMENT_SCRATCH.fresh() as work:
        directory = work / "t-0"
        directory.mkdir()
        for kind, chunk in inputs.unpack(data):
            name, content = _segment_file(kind, chunk)
            (directory / name).write_bytes(content)
        plog = PartitionLog(directory, "t", 0, _topic_config)
        try:
            offset, end = plog.log_start_offset, plog.log_end_offset
            feature(f"segment/segments/{min(len(plog.segments), 4)}")
            reads = 0
            while offset < end and reads < 64:
                batches = plog.read(offset, 1 << 16, upper=end)
                reads += 1
                if not batches:
                    break
                last = None
                for header in _headers(bytes(batches)):
                    last = header
                if last is None:
                    break
                offset = max(offset + 1, last.next_offset)
        finally:
            plog.close()


def _headers(buf: bytes) -> Iterator[Any]:
    position = 0
    while position + HEADER_SIZE <= len(buf):
        header = parse_header(buf, position)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return
        yield header
        position += header.size


def segment_features() -> list[str]:
    return [f"segment/segments/{n}" for n in range(5)]


# --------------------------------------------------------------------------- metadata log

_METADATA_SCRATCH = _Scratch("metadata")
_LOG_HEADER = struct.pack(">4sHH", b"SLRL", 1, 0)
_SNAP_HEAD = struct.Struct(">4sHHQQQ")


def _raft_file(kind: int, chunk: bytes) -> tuple[str, bytes]:
    """The Raft file an item stands for: 0 ``raft.log``, 1 ``raft.state``, 2
    ``raft.snapshot``. Fixed (bit 7): a log of well-framed entries of term 1 whose payloads
    are the items of ``chunk`` (a container), a snapshot of term 1 at the index in the
    first 8 bytes around the rest, a state with a good CRC."""
    role = (kind & ~inputs.FIX) % 3
    name = (LOG_FILE, STATE_FILE, SNAPSHOT_FILE)[role]
    if not kind & inputs.FIX:
        return name, chunk
    if role == 0:
        entries = [
            Entry(1, i + 1, payload, EntryKind.DATA)
            for i, (_, payload) in enumerate(inputs.unpack(chunk))
        ]
        return name, _LOG_HEADER + encode_entries(entries)
    if role == 1:
        body = struct.pack(
            ">4sHHQq", b"SLRH", 1, 0, *struct.unpack(">Qq", chunk[:16].ljust(16, b"\0"))
        )
        return name, body + struct.pack(">I", crc32c.crc32c(body))
    index, data = inputs.u64_prefix(chunk)
    head = _SNAP_HEAD.pack(b"SLRS", 1, 0, index % 2**63, 1, len(data))
    return name, head + data + struct.pack(">I", crc32c.crc32c(head + data))


def metadata_log(data: bytes) -> None:
    """A Raft directory (``raft.log``, ``raft.state``, ``raft.snapshot``) recovered by
    ``RaftStorage`` as a restarting broker does (StorageCorrupt for files damaged beyond a
    torn tail), then what the broker's metadata image reads from it: the snapshot
    (``MetadataImage.restore``) and every data entry (``MetadataImage.apply``: records
    decoded by ``dataplane.cluster.records``, CorruptRecord when unreadable)."""
    with _METADATA_SCRATCH.fresh() as work:
        for kind, chunk in inputs.unpack(data):
            name, content = _raft_file(kind, chunk)
            (work / name).write_bytes(content)
        try:
            storage = RaftStorage(work)
        except StorageCorrupt:
            feature("metadata/storage-corrupt")
            return
        try:
            image = MetadataImage(node_id=1, cluster_id="fuzz")
            if storage.snapshot.index:
                try:
                    image.restore(storage.snapshot.data)
                    feature("metadata/snapshot-restored")
                except CorruptRecord:
                    feature("metadata/snapshot-corrupt")
            for entry in storage.entries:
                if entry.kind is not EntryKind.DATA:
                    continue
                try:
                    image.apply(entry.index, entry.payload)
                except CorruptRecord:
                    feature("metadata/entry-corrupt")
                    continue
                for record in metadata_records.decode(entry.payload):
                    feature(f"metadata/record/{type(record).__name__}")
        finally:
            storage.close()


def metadata_features() -> list[str]:
    return [
        "metadata/storage-corrupt",
        "metadata/snapshot-restored",
        "metadata/snapshot-corrupt",
        "metadata/entry-corrupt",
    ] + [f"metadata/record/{name}" for name in sorted(metadata_records._TYPES)]


# --------------------------------------------------------------------------- remote segments


class MemoryStore:
    """The object store the remote tier reads from, in memory (what S3 hands back)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def ensure_bucket(self) -> None:
        return None

    def put(self, key: str, data: bytes | Path) -> ObjectInfo:
        self.objects[key] = data.read_bytes() if isinstance(data, Path) else bytes(data)
        return self.head(key)

    def get(self, key: str) -> bytes:
        try:
            return self.objects[key]
        except KeyError:
            raise ObjectNotFound(f"no object {key}") from None

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get(key)[start:end]

    def head(self, key: str) -> ObjectInfo:
        return ObjectInfo(key, len(self.get(key)), "")

    def exists(self, key: str) -> bool:
        return key in self.objects

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return iter([self.head(k) for k in sorted(self.objects) if k.startswith(prefix)])

    def delete_many(self, keys: Any) -> None:
        for key in keys:
            self.objects.pop(key, None)


_REMOTE_SCRATCH = _Scratch("remote")
_PARAMS = struct.Struct(">qqqiqi")  # base, end, read offset, max bytes, timestamp, epoch
_SETTINGS = ObjectStoreSettings(endpoint="http://127.0.0.1:9", bucket="fuzz")
_CLUSTER = "fuzz"
_TOPIC_ID = "00000000-0000-4000-8000-000000000001"


def remote_segment(data: bytes) -> None:
    """The objects of one uploaded segment as S3 hands them back (items: 0 ``.log``, 1
    ``.index``, 2 ``.txnindex``, 3 the producer ``.snapshot``, 4 the read's parameters:
    base and end offset, offset to read, max bytes, timestamp, leader epoch), read by the
    broker's ``RemoteReader`` (index, aborted transactions, read from an offset and from a
    timestamp: RemoteStorageError when damaged), the producer snapshot by
    ``ProducerStateTable.load_snapshot`` (False when damaged), and by the Spark executor's
    tiered read (``spark.reading.read_tiered`` with read_committed: CorruptSegment)."""
    items: dict[int, bytes] = {}
    for kind, chunk in inputs.unpack(data):
        role = (kind & ~inputs.FIX) % 5
        if kind & inputs.FIX and role < 4:
            fixers = (
                inputs.fix_batch_crcs,
                inputs.fix_trailing_crc,
                bytes,
                inputs.fix_snapshot_crc,
            )
            chunk = fixers[role](chunk)
        items[role] = chunk
    log, index, txn = items.get(0, b""), items.get(1, b""), items.get(2, b"")
    base, end, offset, max_bytes, timestamp, epoch = _PARAMS.unpack(
        items.get(4, b"").ljust(_PARAMS.size, b"\x00")[: _PARAMS.size]
    )
    base, end = abs(base) % 2**62, abs(end) % 2**62
    segment = RemoteSegment(
        topic="t",
        topic_id=_TOPIC_ID,
        partition=0,
        segment_id="0" * 32,
        base_offset=base,
        end_offset=max(base, end),
        max_timestamp=-1,
        size_bytes=len(log),
        index_bytes=len(index),
        leader_epoch=max(epoch, 0),
        epochs=((max(epoch, 0), base),) if epoch >= 0 else (),
        broker_id=1,
        created_ms=0,
        state=COPY_FINISHED,
        txn_index_bytes=len(txn),
    )
    keys = segment_keys(_CLUSTER, segment)
    objects = {keys.log: log, keys.index: index, keys.txn_index: txn}
    if 3 in items:
        objects[keys.snapshot] = items[3]
        ProducerStateTable(5).load_snapshot(items[3])
    store = MemoryStore(objects)
    max_bytes = max(1, max_bytes % (1 << 20))
    with _REMOTE_SCRATCH.fresh() as work:
        cache = ChunkCache(work, max_bytes=1 << 20, chunk_bytes=4096)
        reader = RemoteReader(store, cache, _CLUSTER)
        for read in (
            lambda: reader.index(segment),
            lambda: reader.aborted(segment),
            lambda: reader.read(segment, offset, max_bytes),
            lambda: reader.batches_for_timestamp(segment, timestamp, max_bytes),
        ):
            try:
                read()
                feature("remote/broker/ok")
            except RemoteStorageError:
                feature("remote/broker/damaged")
    split = TieredSplit(
        topic="t",
        partition=0,
        start=min(max(offset, base), max(base, end)),
        end=max(base, end) + 1,
        key=keys.log,
        size_bytes=len(log),
        segment_base=base,
        segment_end=max(base, end),
        index_key=keys.index,
        index_bytes=len(index),
        txn_index_key=keys.txn_index if txn else "",
        txn_index_bytes=len(txn),
    )
    spark_reading._stores[_SETTINGS] = store  # type: ignore[assignment]
    try:
        for _ in spark_reading.read_tiered(
            [split],
            _SETTINGS,
            include_headers=True,
            rows_per_batch=1000,
            chunk_bytes=4096,
            fail_on_data_loss=True,
            read_committed=True,
        ):
            feature("remote/spark/rows")
    except CorruptSegment:
        feature("remote/spark/damaged")
    with contextlib.suppress(CorruptRecord):
        parse_txn_index(txn)
    parse_index(index)


def remote_features() -> list[str]:
    return [
        "remote/broker/ok",
        "remote/broker/damaged",
        "remote/spark/rows",
        "remote/spark/damaged",
    ]


# --------------------------------------------------------------------------- SASL

SASL_USER, SASL_PASSWORD = "alice", "alice-secret"
"""The user the SASL seeds log in as (tests/fuzz/capture.py creates the same one)."""


class _Users:
    def __init__(self) -> None:
        self.scram = {
            SASL_USER: {
                mechanism: credentials.from_password(SASL_USER, mechanism, SASL_PASSWORD)
                for mechanism in (1, 2)
            }
        }


def _security(reauth_ms: int) -> Security:
    config = BrokerConfig.build(
        data_dir=".",
        listen="127.0.0.1:9092",
        overrides={
            "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "connection.failed.authentication.delay.ms": "0",
            "connections.max.reauth.ms": str(reauth_ms),
        },
    )
    return Security(config, "127.0.0.1", 9092, _Users())


class _Transport:
    def get_extra_info(self, _name: str, default: Any = None) -> Any:
        return default


_SECURITY: list[Security] = []
_LOOP: list[asyncio.AbstractEventLoop] = []
MAX_SASL_FRAMES = 16
_SASL_HANDLERS: dict[int, Callable[[RequestContext, Any], Any]] = {
    sasl_handshake.API_KEY: sasl_handshake.handle,
    sasl_authenticate.API_KEY: sasl_authenticate.handle,
}


async def _conversation(security: Security, frames: list[bytes]) -> None:
    """What ``KafkaConnection`` does with a SASL listener's frames, one after another."""
    closed: list[str] = []
    session = Session(security, security.listeners[1])
    session.connected(_Transport(), closed.append)  # type: ignore[arg-type]
    for frame in frames[:MAX_SASL_FRAMES]:
        if closed:
            return
        if session.raw_tokens:  # after SaslHandshake v0: raw tokens, as _raw_token
            outcome = session.authenticate(frame)
            if isinstance(outcome, Awaitable):
                outcome = await outcome
            feature(f"sasl/raw/{outcome.error is None}")
            if outcome.error is not None or session.state.value != "authenticate":
                session.raw_tokens = False
            if outcome.error is not None:
                return
            continue
        if len(frame) < MIN_FRAME:
            return
        head = peek_header(frame)
        key, version = head.api_key, head.api_version
        if session.refuse(key) is not None:
            feature(f"sasl/refused/{session.state.value}")
            return
        served = SERVED.get(key)
        if served is None or not served.versions[0] <= version <= served.versions[1]:
            return
        try:
            header, request = decode_request(frame, key, version)
        except REQUEST_ERRORS:
            return
        handler = _SASL_HANDLERS.get(key)
        if handler is None:  # ApiVersions, or any request once authenticated
            continue
        ctx = RequestContext(None, key, version, head.correlation_id, header.client_id, "", session)  # type: ignore[arg-type]
        result = handler(ctx, request)
        if isinstance(result, Awaitable):
            result = await result
        encode_response(head.correlation_id, result)
        feature(f"sasl/{key}/{version}/{session.mechanism}/{session.state.value}")


def sasl(data: bytes) -> None:
    """One connection to a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512;
    user ``alice``): the items are its frames -- requests (SaslHandshake v0-1 and
    SaslAuthenticate v0-2 go to their handlers and ``Session``), or raw tokens after a
    SaslHandshake v0. Bit 0 of the first item's kind turns on KIP-368 re-authentication.
    A bad token is an error answer, never an exception: nothing is expected to escape."""
    items = inputs.unpack(data)
    if not _SECURITY:
        _SECURITY.extend([_security(0), _security(3_600_000)])
        _LOOP.append(asyncio.new_event_loop())
    security = _SECURITY[items[0][0] & 1] if items else _SECURITY[0]
    loop = _LOOP[0]
    loop.run_until_complete(_conversation(security, [frame for _, frame in items]))
    loop.run_until_complete(asyncio.sleep(0))  # the closes a failure scheduled


def sasl_features() -> list[str]:
    names = [f"sasl/raw/{ok}" for ok in (True, False)]
    names += [f"sasl/refused/{s}" for s in ("handshake", "authenticate", "failed")]
    for key, versions in ((17, range(2)), (36, range(3))):
        for version in versions:
            for mechanism in ("None", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                for state in ("handshake", "authenticate", "authenticated", "failed"):
                    names.append(f"sasl/{key}/{version}/{mechanism}/{state}")
    return names


# --------------------------------------------------------------------------- the table

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("kafka_request", kafka_request, "request frames and headers, every API"),
        Target("record_batch", record_batch, "record batches, all codecs, produce checks"),
        Target("segment_recovery", segment_recovery, "partition directory recovery"),
        Target("metadata_log", metadata_log, "Raft log, state, snapshot; metadata image"),
        Target("remote_segment", remote_segment, "remote segment objects: broker and Spark"),
        Target("sasl", sasl, "SASL handshake and authenticate, PLAIN and SCRAM"),
    )
}

FEATURES: dict[str, Callable[[], list[str]]] = {
    "kafka_request": request_features,
    "record_batch": batch_features,
    "segment_recovery": segment_features,
    "metadata_log": metadata_features,
    "remote_segment": remote_features,
    "sasl": sasl_features,
}
"""Feature names of each target, reserved as counters before fuzzing starts."""
