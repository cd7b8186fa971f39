"""Seeds for the fuzz corpora from real clients and a real broker:
``python -m tests.fuzz.capture [--out tests/fuzz/corpus]``.

Two brokers (``tests.support.broker``) on 127.0.0.1, each behind a recording proxy that
its ``advertised.listeners`` point at, so every connection of a client goes through it:

- a PLAINTEXT broker driven by confluent-kafka (admin calls, idempotent producers in each
  codec, a transaction committed and one aborted, a read_committed consumer group) and
  kafka-python (producers, a consumer group, admin calls). Its request frames seed
  ``kafka_request`` and, through their records, ``record_batch``. After a clean stop, its
  partition directories seed ``segment_recovery`` and ``remote_segment`` (a sealed
  segment's ``.log``, ``.index`` and ``.txnindex`` are the objects the broker uploads) and
  its Raft directory seeds ``metadata_log``;
- a SASL_PLAINTEXT broker (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; user ``alice``) logged in
  to by both clients, right and wrong passwords: each connection's frames seed ``sasl``.

Seeds are kept small (the corpus directory stays well under 2 MB): a few frames per API
version, files cut to ``MAX_SEED`` bytes. Existing seeds of the same name are replaced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KafkaNewTopic

from dataplane.cluster.image import MetadataImage
from dataplane.cluster.member import METADATA_DIR
from dataplane.raft.storage import RaftStorage
from dataplane.raft.types import EntryKind
from tests.fuzz import inputs
from tests.fuzz.targets import SASL_PASSWORD, SASL_USER
from tests.support.broker import BrokerProcess
from tests.support.processes import free_port
from wire.framing import decode_request, peek_header
from wire.record_batch import HEADER_SIZE, parse_header
from wire.segment_index import parse_index

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "fuzz" / "corpus"
MAX_SEED = 16 * 1024
"""Bytes of one seed at most (frames and files beyond it are left out or cut)."""
PER_API_VERSION = 2
"""Request frames kept per (API key, version) and client."""
PRODUCE = 0
TOPIC = "fuzz-seeds"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENT_TIMEOUT_S = 30
SMALL_INTERNAL_TOPICS = {
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
}
"""Few internal partitions: a metadata image (and its snapshot seed) of a few KB."""


class RecordingProxy:
    """A TCP proxy on 127.0.0.1 in a thread of its own that keeps the request frames of
    every connection (client to broker), in order."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.connections: list[list[bytes]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="fuzz-proxy", daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, "127.0.0.1", self.port)
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames: list[bytes] = []
        self.connections.append(frames)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            self._pump(reader, up_writer, frames), self._pump(up_reader, writer, None)
        )

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frames: list[bytes] | None
    ) -> None:
        pending = b""
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
                if frames is None:
                    continue
                pending += data
                while len(pending) >= 4:
                    (size,) = struct.unpack_from(">i", pending)
                    if size < 0 or len(pending) < 4 + size:
                        break
                    frames.append(pending[4 : 4 + size])
                    pending = pending[4 + size :]
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                writer.close()


# --------------------------------------------------------------------------- workloads


def confluent_workload(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(TOPIC, 1, 1, config={"segment.bytes": "1024", "index.interval.bytes": "256"}),
        NewTopic("fuzz-compact", 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic("fuzz-gone", 2, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result(CLIENT_TIMEOUT_S)
    for codec in CODECS:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for i in range(24):
            key = None if i % 7 == 0 else f"key-{i % 5}".encode()
            producer.produce(
                TOPIC, value=f"{codec} value {i} ".encode() * 3, key=key, headers=[("h", b"v")]
            )
        producer.produce("fuzz-compact", value=b"compacted", key=b"k")
        producer.flush(CLIENT_TIMEOUT_S)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fuzz-txn"})
    txn.init_transactions(CLIENT_TIMEOUT_S)
    for commit in (True, False, True):
        txn.begin_transaction()
        for i in range(5):
            txn.produce(TOPIC, value=f"txn {commit} {i}".encode(), key=b"t")
        txn.flush(CLIENT_TIMEOUT_S)  # written before an abort, which would purge them
        if commit:
            txn.commit_transaction(CLIENT_TIMEOUT_S)
        else:
            txn.abort_transaction(CLIENT_TIMEOUT_S)
    consume_confluent(bootstrap)
    resources = [
        ConfigResource(ResourceType.TOPIC, TOPIC),
        ConfigResource(ResourceType.BROKER, "1"),
    ]
    for future in admin.describe_configs(resources).values():
        with contextlib.suppress(KafkaException):
            future.result(CLIENT_TIMEOUT_S)
    admin.list_consumer_groups().result(CLIENT_TIMEOUT_S)
    for future in admin.describe_consumer_groups(["fuzz-group"]).values():
        future.result(CLIENT_TIMEOUT_S)
    admin.describe_cluster().result(CLIENT_TIMEOUT_S)
    for future in admin.create_partitions([NewPartitions("fuzz-gone", 3)]).values():
        future.result(CLIENT_TIMEOUT_S)
    for future in admin.delete_topics(["fuzz-gone"]).values():
        future.result(CLIENT_TIMEOUT_S)


def consume_confluent(bootstrap: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fuzz-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while seen < 100 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    with contextlib.suppress(KafkaException):
        consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition(TOPIC, 0)], CLIENT_TIMEOUT_S)
    consumer.close()


def kafka_python_workload(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    admin.create_topics([KafkaNewTopic("fuzz-kp", 1, 1)])
    for codec in (None, "gzip"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
        for i in range(12):
            producer.send(
                "fuzz-kp", key=f"kp-{i}".encode(), value=b"kafka-python " * 4, headers=[("h", b"1")]
            )
        producer.flush(CLIENT_TIMEOUT_S)
        producer.close(CLIENT_TIMEOUT_S)
    consumer = KafkaConsumer(
        "fuzz-kp",
        bootstrap_servers=bootstrap,
        group_id="fuzz-kp-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5_000,
    )
    for seen, _ in enumerate(consumer):
        if seen >= 23:
            break
    consumer.commit()
    consumer.close()
    calls = (
        admin.list_groups,
        lambda: admin.describe_groups(["fuzz-kp-group"]),
        lambda: admin.list_group_offsets("fuzz-kp-group"),
        lambda: admin.describe_topics(["fuzz-kp"]),
        admin.describe_cluster,
        admin.list_transactions,
        admin.describe_user_scram_credentials,
        admin.list_partition_reassignments,
        lambda: admin.delete_topics(["fuzz-kp"]),
    )
    for call in calls:  # each one's frames are the point; an API Sluice refuses is fine
        with contextlib.suppress(Exception):
            call()
    admin.close()


def sasl_workload(bootstrap: str) -> None:
    for mechanism, password in (
        ("PLAIN", SASL_PASSWORD),
        ("SCRAM-SHA-256", SASL_PASSWORD),
        ("SCRAM-SHA-512", SASL_PASSWORD),
        ("SCRAM-SHA-512", "wrong-password"),
        ("PLAIN", "wrong-password"),
    ):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": mechanism,
                "sasl.username": SASL_USER,
                "sasl.password": password,
                "log_level": 0,
            }
        )
        with contextlib.suppress(KafkaException):
            producer.list_topics(timeout=5)
        producer.flush(1)
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        with contextlib.suppress(Exception):  # kafka-python's errors vary by version
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism,
                sasl_plain_username=SASL_USER,
                sasl_plain_password=SASL_PASSWORD,
                request_timeout_ms=10_000,
            )
            admin.list_consumer_groups()
            admin.close()


# --------------------------------------------------------------------------- seeds


def _name(data: bytes, label: str) -> str:
    return f"{label}-{hashlib.sha1(data).hexdigest()[:12]}"


def _write(out: Path, target: str, label: str, data: bytes) -> None:
    if len(data) > MAX_SEED:
        return
    directory = out / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / _name(data, label)).write_bytes(data)


def request_seeds(out: Path, client: str, connections: list[list[bytes]]) -> None:
    kept: dict[tuple[int, int, int], int] = {}
    for frames in connections:
        for frame in frames:
            if len(frame) < 8:
                continue
            head = peek_header(frame)
            key = (head.api_key, head.api_version, _codec(frame, head.api_version, head.api_key))
            if kept.get(key, 0) >= PER_API_VERSION or len(frame) > MAX_SEED:
                continue
            kept[key] = kept.get(key, 0) + 1
            _write(out, "kafka_request", f"{client}-{key[0]}-v{key[1]}", frame)
            if head.api_key == PRODUCE:
                batch_seeds(out, client, frame, head.api_version)


def _codec(frame: bytes, version: int, api_key: int) -> int:
    """The codec of a Produce frame's first batch (-1: not a Produce frame, or none)."""
    if api_key != PRODUCE:
        return -1
    _, request = decode_request(frame, PRODUCE, version)
    for topic in request.topic_data:
        for partition in topic.partition_data:
            records = bytes(partition.records or b"")
            if len(records) >= HEADER_SIZE:
                return parse_header(records, 0).codec
    return -1


def batch_seeds(out: Path, client: str, frame: bytes, version: int) -> None:
    """The records of each partition of a Produce frame: as sent (mode 0) and, for an
    uncompressed batch, its records block for the harness to build in every codec (2)."""
    _, request = decode_request(frame, PRODUCE, version)
    for topic in request.topic_data:
        for partition in topic.partition_data:
            records = bytes(partition.records or b"")
            if len(records) < HEADER_SIZE:
                continue
            header = parse_header(records, 0)
            _write(out, "record_batch", f"{client}-codec{header.codec}", b"\x00" + records)
            if header.codec == 0 and header.record_count < 256:
                block = records[HEADER_SIZE : header.size]
                for codec in range(5):
                    built = bytes([2, codec, header.record_count, 0]) + block
                    _write(out, "record_batch", f"{client}-built{codec}", built)


def segment_seeds(out: Path, partition: Path) -> None:
    """The partition directory as one container (cut to MAX_SEED), and each sealed segment
    as the objects of a remote segment."""
    items: list[tuple[int, bytes]] = []
    roles = {".log": 0, ".index": 1, ".txnindex": 2, ".snapshot": 3}
    names = {
        "leader-epoch-checkpoint": 4,
        "log-start-offset": 5,
        "high-watermark": 6,
        "cleaner-offset-checkpoint": 7,
    }
    for path in sorted(partition.iterdir()):
        data = path.read_bytes()
        stem, dot, suffix = path.name.partition(".")
        role = roles.get(dot + suffix)
        if role is not None and stem.isdigit():
            items.append((role, struct.pack(">Q", int(stem)) + data))
        elif path.name in names:
            items.append((names[path.name], data))
    whole = b""
    for item in items:
        candidate = whole + inputs.pack([item])
        if len(candidate) <= MAX_SEED:
            whole = candidate
    _write(out, "segment_recovery", partition.name, whole)
    logs = [i for i in items if i[0] == 0]
    if logs:  # one segment alone, torn in the middle, and fixed up again
        log = logs[0][1][: 8 + min(len(logs[0][1]) - 8, MAX_SEED // 2)]
        torn = log[: len(log) - 7]
        _write(out, "segment_recovery", f"{partition.name}-torn", inputs.pack([(0, torn)]))
        _write(
            out, "segment_recovery", f"{partition.name}-fixed", inputs.pack([(inputs.FIX, torn)])
        )
    for path in sorted(partition.glob("*.index")):
        remote_seed(out, partition, path)


def remote_seed(out: Path, partition: Path, index_path: Path) -> None:
    base = int(index_path.name.partition(".")[0])
    index = index_path.read_bytes()
    view = parse_index(index)
    log_path = index_path.with_suffix(".log")
    if view is None or not log_path.exists():
        return
    log = log_path.read_bytes()
    txn_path = index_path.with_suffix(".txnindex")
    txn = txn_path.read_bytes() if txn_path.exists() else b""
    epoch = parse_header(log, 0).leader_epoch if len(log) >= HEADER_SIZE else 0
    params = struct.pack(">qqqiqi", base, view.next_offset - 1, base + 3, 65536, 0, epoch)
    items = [(0, log), (1, index), (4, params)]
    if txn:
        items.insert(2, (2, txn))
    data = inputs.pack(items)
    _write(out, "remote_segment", f"{partition.name}-{base}", data)


def metadata_seeds(out: Path, raft_dir: Path) -> None:
    items = []
    for role, name in enumerate(("raft.log", "raft.state", "raft.snapshot")):
        path = raft_dir / name
        if path.exists():
            items.append((role, path.read_bytes()[: MAX_SEED - 1024]))
    _write(out, "metadata_log", "files", inputs.pack(items))
    storage = RaftStorage(raft_dir)
    try:
        payloads = [(0, e.payload) for e in storage.entries if e.kind is EntryKind.DATA]
        image = MetadataImage(node_id=1, cluster_id="fuzz")
        for i, (_, payload) in enumerate(payloads):
            image.apply(i + 1, payload)
        snapshot = struct.pack(">Q", len(payloads)) + image.snapshot()
        fixed: list[tuple[int, bytes]] = []
        for _, payload in payloads:
            if len(inputs.pack([*fixed, (0, payload)])) > MAX_SEED // 2:
                break
            fixed.append((0, payload))
        _write(out, "metadata_log", "entries", inputs.pack([(inputs.FIX, inputs.pack(fixed))]))
        _write(out, "metadata_log", "snapshot", inputs.pack([(2 | inputs.FIX, snapshot)]))
    finally:
        storage.close()


def sasl_seeds(out: Path, connections: list[list[bytes]]) -> None:
    """One seed per kind of conversation (the API versions sent, the mechanism named),
    and a few with re-authentication on."""
    seen: set[tuple[object, ...]] = set()
    for frames in connections:
        items = [(0, frame) for frame in frames[:6] if 8 <= len(frame) <= 4096]
        if not items:
            continue
        heads = [peek_header(frame) for _, frame in items]
        shape = (*((h.api_key, h.api_version) for h in heads), *(f[-16:] for _, f in items[:2]))
        if shape in seen:
            continue
        seen.add(shape)
        _write(out, "sasl", "login", inputs.pack(items))
        if len(seen) <= 3:
            _write(out, "sasl", "login-reauth", inputs.pack([(1, items[0][1]), *items[1:]]))


# --------------------------------------------------------------------------- main


@contextlib.contextmanager
def broker(
    directory: Path, settings: dict[str, str], port: int | None = None
) -> Iterator[BrokerProcess]:
    process = BrokerProcess(directory, settings, port=port)
    try:
        process.start(timeout=60)
        yield process
    finally:
        process.stop()
        process.kill()


def capture_plain(out: Path, work: Path) -> None:
    port = free_port()
    with RecordingProxy(port) as proxy:
        settings = {
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
            **SMALL_INTERNAL_TOPICS,
        }
        with broker(work / "plain", settings, port=port):
            bootstrap = f"127.0.0.1:{proxy.port}"
            confluent_workload(bootstrap)
            confluent = list(proxy.connections)
            kafka_python_workload(bootstrap)
            kafka_python = proxy.connections[len(confluent) :]
    request_seeds(out, "confluent", confluent)
    request_seeds(out, "kafka-python", kafka_python)
    segment_seeds(out, work / "plain" / f"{TOPIC}-0")
    raft = work / "plain" / METADATA_DIR
    if raft.is_dir():
        metadata_seeds(out, raft)


def capture_sasl(out: Path, work: Path) -> None:
    users = work / "users.properties"
    users.write_text(
        f"SCRAM-SHA-512=[name={SASL_USER},password={SASL_PASSWORD}]\n"
        f"SCRAM-SHA-256=[name={SASL_USER},password={SASL_PASSWORD}]\n"
    )
    users.chmod(0o600)
    port, sasl_port = free_port(), free_port()
    with RecordingProxy(sasl_port) as proxy:
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{proxy.port}"
            ),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.scram.bootstrap.users.file": str(users),
            "connection.failed.authentication.delay.ms": "0",
            **SMALL_INTERNAL_TOPICS,
        }
        with broker(work / "sasl", settings, port=port):
            time.sleep(2)  # the bootstrap users are recorded through the controller
            sasl_workload(f"127.0.0.1:{proxy.port}")
        connections = list(proxy.connections)
    sasl_seeds(out, connections)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.capture", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="corpus directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sluice-fuzz-capture-") as tmp:
        capture_plain(args.out, Path(tmp))
        capture_sasl(args.out, Path(tmp))
    for target in sorted(p.name for p in args.out.iterdir() if p.is_dir()):
        files = list((args.out / target).iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
