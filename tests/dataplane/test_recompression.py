"""Topic ``compression.type`` (recompression) and per-record produce errors (KIP-467).

Pure-function tests of ``wire.compression.compress`` / ``validate_records``, the log append
path that calls them, and a broker process that real clients (confluent-kafka,
kafka-python, Kafka's Java client) write to and read from in every pair of client codec
and topic compression.type; the stored batches are fetched raw to check their codec.
The same answers from Apache Kafka are compared in tests/compat/test_record_errors.py.
"""

from __future__ import annotations

import os
import random
import struct
import time
from pathlib import Path
from typing import Any

import cramjam
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka import codec as kafka_codecs

from dataplane import config as config_module
from dataplane.config import BrokerConfig
from dataplane.log.partition_log import PartitionLog
from tests.conftest import BrokerProcess, unique
from tests.support.java_client import java_available, run_java_client
from tests.support.raw_client import RawClient
from tests.support.records import fetch_request
from wire import record_batch
from wire.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, COMPRESSION_TYPES, TARGET_CODECS
from wire.errors import MessageTooLarge
from wire.record_batch import (
    CODEC_NONE,
    CODEC_ZSTD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    InvalidRecords,
    InvalidTimestamps,
    Record,
    compress,
    decode_records,
    decompress,
    encode_batch,
    iter_headers,
    parse_header,
    validate_batches,
    validate_records,
)

CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4"}
NAMES[CODEC_ZSTD] = "zstd"
NOW = 1_800_000_000_000
TP = "t-0"


def text(size: int, seed: int = 0) -> bytes:
    """Compressible but not trivial bytes (words from a small vocabulary)."""
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(2, 8)).hex().encode() for _ in range(300)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words) + b" "
    return bytes(out[:size])


def sample_records(n: int = 5, value_size: int = 40) -> list[Record]:
    return [
        Record(
            i,
            NOW - 1_000 + (i * 37) % 11,
            None if i % 4 == 3 else b"key-%d" % i,
            None if i % 5 == 4 else text(value_size, i),
            (("h", b"%d" % i), ("empty", b""), ("null", None)) if i % 2 else (),
        )
        for i in range(n)
    ]


def validate(buf: bytes | bytearray, **rules: Any) -> tuple[bytes | bytearray, list[Any]]:
    rules.setdefault("topic_partition", TP)
    rules.setdefault("now_ms", NOW)
    return validate_records(buf, validate_batches(buf), **rules)


# --------------------------------------------------------------------------- codecs


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 10, 70_000, 300_000])
def test_compress_round_trips_in_kafkas_framing(codec: int, size: int) -> None:
    data = text(size, size)
    out = compress(codec, data)
    assert decompress(codec, out) == data
    if codec == CODEC_SNAPPY:
        # xerial framing, blocks of at most 32 KiB, as snappy-java's SnappyOutputStream
        assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        position, blocks = 16, 0
        while position < len(out):
            (length,) = struct.unpack_from(">i", out, position)
            block = bytes(cramjam.snappy.decompress_raw(out[position + 4 : position + 4 + length]))
            assert len(block) <= 32 * 1024
            position += 4 + length
            blocks += 1
        assert blocks == -(-size // (32 * 1024))
    if codec == CODEC_LZ4:
        # LZ4 frame, FLG: version 1, independent blocks (Kafka's Java reader refuses linked
        # blocks), no content checksum; BD: 64 KiB blocks
        assert out[:4] == b"\x04\x22\x4d\x18"
        flg, bd = out[4], out[5]
        assert flg >> 6 == 1
        assert flg & 0x20
        assert not flg & 0x04
        assert bd == 0x40


@pytest.mark.parametrize(("codec", "levels"), [(CODEC_GZIP, [1, 9]), (CODEC_ZSTD, [-5, 19])])
def test_levels_are_used(codec: int, levels: list[int]) -> None:
    data = text(200_000)
    fast, slow = (compress(codec, data, level) for level in levels)
    assert len(slow) < len(fast)
    assert decompress(codec, fast) == decompress(codec, slow) == data


@pytest.mark.parametrize("level", [1, 9, 17])
def test_lz4_levels_decode(level: int) -> None:
    data = text(150_000)
    assert decompress(CODEC_LZ4, compress(CODEC_LZ4, data, level)) == data


def test_compression_types_match_the_config_tables() -> None:
    assert config_module.COMPRESSION_TYPES == COMPRESSION_TYPES
    assert set(TARGET_CODECS) == set(COMPRESSION_TYPES) - {"producer"}
    topic = config_module.TOPIC_CONFIGS["compression.type"]
    assert topic.choices == COMPRESSION_TYPES
    assert topic.broker_key == "compression.type"
    assert config_module.BROKER_CONFIGS["compression.type"].default == "producer"
    for key in ("compression.gzip.level", "compression.lz4.level", "compression.zstd.level"):
        assert config_module.TOPIC_CONFIGS[key].broker_key == key
        assert key in config_module.BROKER_CONFIGS


# --------------------------------------------------------------------------- recompression


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompressed_batch_keeps_everything_but_the_codec(source: int, target: int) -> None:
    records = sample_records(40, 3_000)  # ~120 KB: several lz4 and snappy blocks
    original = encode_batch(
        records,
        codec=source,
        producer_id=42,
        producer_epoch=3,
        base_sequence=1_000,
        attributes=TRANSACTIONAL_BIT,
    )
    out, headers = validate(original, codec=target)
    before = parse_header(original)
    (after,) = headers
    if source == target:
        assert out is original  # zero copy
        return
    assert after.codec == target
    assert after.is_transactional
    assert not after.log_append_time
    same = ("last_offset_delta", "base_timestamp", "max_timestamp", "producer_id")
    same += ("producer_epoch", "base_sequence", "record_count", "base_offset")
    assert {f: getattr(after, f) for f in same} == {f: getattr(before, f) for f in same}
    assert validate_batches(out) == [after]  # a valid CRC
    assert decode_records(out) == records


def test_producer_and_matching_codecs_are_zero_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path: no record is walked, nothing is copied."""

    def walked(*_: Any) -> Any:
        raise AssertionError("records walked")

    monkeypatch.setattr(record_batch, "_scan", walked)
    monkeypatch.setattr(record_batch, "decompress", walked)
    for codec in CODECS:
        batch = encode_batch([(b"k", b"v")] * 3, codec=codec, timestamp_ms=NOW)
        assert validate(batch)[0] is batch
        assert validate(batch, codec=codec, after_ms=3_600_000)[0] is batch
        assert validate(batch, log_append_time=True, codec=codec)[0] is batch


def test_only_the_batches_in_another_codec_are_rewritten() -> None:
    first = encode_batch([(b"a", b"1")] * 3, codec=CODEC_ZSTD, timestamp_ms=NOW)
    second = encode_batch([(b"b", b"2")] * 2, codec=CODEC_GZIP, timestamp_ms=NOW, base_offset=3)
    third = encode_batch([(b"c", b"3")], codec=CODEC_ZSTD, timestamp_ms=NOW, base_offset=5)
    data = bytearray(first + second + third)
    out, headers = validate(data, codec=CODEC_ZSTD)
    assert out is not data
    assert [h.codec for h in headers] == [CODEC_ZSTD] * 3
    assert out[: len(first)] == first
    assert out[-len(third) :] == third
    assert [h.position for h in headers] == [h.position for h in iter_headers(out)]
    assert [r.value for r in decode_records(out[headers[1].position :][: headers[1].size])] == [
        b"2",
        b"2",
    ]


def test_log_append_time_bit_of_a_client_batch_is_kept() -> None:
    batch = encode_batch([(b"a", b"1")], codec=CODEC_NONE, timestamp_ms=NOW, attributes=8)
    out, (header,) = validate(batch, codec=CODEC_LZ4)
    assert header.codec == CODEC_LZ4
    assert header.log_append_time
    assert [r.timestamp for r in decode_records(out)] == [NOW]


# --------------------------------------------------------------------------- record errors


@pytest.mark.parametrize("codec", CODECS)
def test_every_null_key_in_a_compacted_topic_is_named(codec: int) -> None:
    records = [Record(i, NOW, None if i in (0, 2, 3, 6) else b"k", b"v") for i in range(7)]
    batch = encode_batch(records, codec=codec)
    with pytest.raises(InvalidRecords) as caught:
        validate(batch, compacted=True)
    message = f"Compacted topic cannot accept message without key in topic partition {TP}"
    assert caught.value.record_errors == tuple((i, message) for i in (0, 2, 3, 6))
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in (0, 2, 3))
    assert caught.value.message == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )
    assert caught.value.code.name == "invalid_record"
    keyed = encode_batch([(b"k", None)], codec=codec)  # a tombstone is fine
    assert validate(keyed, compacted=True)[0] is keyed


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_ZSTD])
def test_every_record_out_of_the_timestamp_bounds_is_named(codec: int) -> None:
    stamps = [NOW, NOW + 5_000, NOW - 50_000, NOW - 9_000, NOW + 1_000, -1]
    batch = encode_batch(
        [Record(i, ts, b"k", b"v") for i, ts in enumerate(stamps)],
        codec=codec,
        base_timestamp=NOW,
    )
    with pytest.raises(InvalidTimestamps) as caught:
        validate(batch, before_ms=10_000, after_ms=1_000)
    assert caught.value.message == "One or more records have been rejected due to invalid timestamp"
    bounds = f"[{NOW - 10_000}, {NOW + 1_000}]"
    assert caught.value.record_errors == (
        (1, f"Timestamp {NOW + 5_000} of message with offset 1 is out of range. "
         f"The timestamp should be within {bounds}"),
        (2, f"Timestamp {NOW - 50_000} of message with offset 2 is out of range. "
         f"The timestamp should be within {bounds}"),
    )  # fmt: skip
    # The same batch is fine under LogAppendTime, which ignores the producer's clock.
    assert validate(batch, before_ms=10_000, after_ms=1_000, log_append_time=True)[0] is batch


def test_key_errors_come_before_timestamp_errors_and_make_it_invalid_timestamp() -> None:
    batch = encode_batch(
        [Record(0, NOW, None, b"v"), Record(1, NOW + 10**7, b"k", b"v"), Record(2, NOW, b"k", b"")]
    )
    with pytest.raises(InvalidTimestamps) as caught:
        validate(batch, compacted=True, after_ms=1_000)
    assert [i for i, _ in caught.value.record_errors] == [0, 1]
    assert caught.value.record_errors[0][1].startswith("Compacted topic")


def test_the_batch_level_check_decides_when_it_can() -> None:
    """maxTimestamp within bounds and no lower bound: no walk (a batch whose header hides
    a newer record passes, see README); a newer maxTimestamp walks to find which."""
    hiding = encode_batch(
        [Record(0, NOW, b"k", b"v"), Record(1, NOW + 10**7, b"k", b"v")], max_timestamp=NOW
    )
    assert validate(hiding, after_ms=1_000)[0] is hiding
    with pytest.raises(InvalidTimestamps):
        validate(hiding, after_ms=1_000, before_ms=10**9)  # finite: every record is read
    honest = encode_batch([Record(0, NOW, b"k", b"v"), Record(1, NOW + 10**7, b"k", b"v")])
    with pytest.raises(InvalidTimestamps) as caught:
        validate(honest, after_ms=1_000)
    assert [i for i, _ in caught.value.record_errors] == [1]


@pytest.mark.parametrize(
    ("codec", "target", "shown"),
    [
        (CODEC_NONE, -1, "DefaultRecord(offset={o}, timestamp={t}, key={k} bytes, value=2 bytes)"),
        (CODEC_GZIP, CODEC_ZSTD, "DefaultRecord(offset={o}, timestamp={t}, key={k} bytes, "),
        (CODEC_ZSTD, -1, "PartialDefaultRecord(offset={o}, timestamp={t}, key={k} bytes, "),
        (CODEC_ZSTD, CODEC_ZSTD, "PartialDefaultRecord(offset={o}, timestamp={t}, key={k} "),
    ],
)
def test_log_append_time_set_by_a_client(codec: int, target: int, shown: str) -> None:
    records = [Record(0, NOW, None, b"v0"), Record(1, NOW, b"k", b"v1")]
    batch = encode_batch(records, codec=codec, attributes=TIMESTAMP_TYPE_BIT)
    with pytest.raises(InvalidTimestamps) as caught:
        validate(batch, log_append_time=True, codec=target)
    partial = shown.startswith("Partial")
    for index, (i, message) in enumerate(caught.value.record_errors):
        null_key = -1 if partial else 0
        expected = shown.format(o=i, t=NOW, k=null_key if i == 0 else 1)
        assert i == index
        assert message.startswith(f"Invalid timestamp type in message {expected}")
        assert message.endswith(". Producer should not set timestamp type to LogAppendTime.")
    # In a CreateTime topic the batch's maxTimestamp is every record's timestamp.
    assert validate(batch, codec=target)[1][0].record_count == 2
    with pytest.raises(InvalidTimestamps):
        validate(batch, codec=target, before_ms=0, after_ms=0, now_ms=NOW - 10)


# --------------------------------------------------------------------------- the log


def open_log(directory: Path, **topic: Any) -> PartitionLog:
    broker = BrokerConfig.build(data_dir=".", listen="127.0.0.1:0")
    values = {"file.delete.delay.ms": 0, **{k.replace("_", "."): v for k, v in topic.items()}}

    def view(key: str) -> Any:
        return values[key] if key in values else broker.topic_default(key)

    return PartitionLog(directory / "t-0", "t", 0, view)


def stored(plog: PartitionLog) -> list[Any]:
    data = bytes(plog.read(0, 1 << 24))
    return [(h, decode_records(data[h.position : h.position + h.size])) for h in iter_headers(data)]


@pytest.mark.parametrize("topic_type", COMPRESSION_TYPES)
def test_the_log_stores_the_topics_codec(tmp_path: Path, topic_type: str) -> None:
    plog = open_log(tmp_path, compression_type=topic_type, message_timestamp_type="LogAppendTime")
    written: list[list[Record]] = []
    for n, codec in enumerate(CODECS):
        records = sample_records(4)
        data = bytearray(encode_batch(records, codec=codec, producer_id=9, producer_epoch=0,
                                      base_sequence=4 * n))  # fmt: skip
        original = bytes(data)
        result = plog.append(data, validate_batches(data))
        assert bytes(data) == original  # the request buffer is not modified
        assert result.log_append_time > 0
        written.append(records)
    got = stored(plog)
    for n, ((header, records), codec) in enumerate(zip(got, CODECS, strict=True)):
        want = codec if topic_type == "producer" else TARGET_CODECS[topic_type]
        assert header.codec == want
        assert header.log_append_time
        assert header.base_offset == 4 * n
        assert header.base_sequence == 4 * n
        expect = [(r.key, r.value, r.headers) for r in written[n]]
        assert [(r.key, r.value, r.headers) for r in records] == expect
        assert {r.timestamp for r in records} == {header.max_timestamp}
    # an idempotent retry of a recompressed batch is recognised as a duplicate
    data = bytearray(encode_batch(written[0], producer_id=9, producer_epoch=0, base_sequence=0))
    assert plog.append(data, validate_batches(data)).duplicate


def test_a_batch_too_large_once_recompressed_is_refused(tmp_path: Path) -> None:
    plog = open_log(tmp_path, compression_type="uncompressed", max_message_bytes=4_000)
    data = bytearray(encode_batch([(b"k", b"a" * 10_000)], codec=CODEC_ZSTD))
    assert len(data) < 4_000
    with pytest.raises(MessageTooLarge, match="recompressed to uncompressed"):
        plog.append(data, validate_batches(data))
    assert plog.log_end_offset == 0


# --------------------------------------------------------------------------- real clients


def create_topic(bootstrap: str, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(timeout=30)


TOPIC_TYPES = ["uncompressed", "gzip", "snappy", "lz4", "zstd", "producer"]
CLIENT_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_TOPIC = 120


@pytest.fixture(scope="module")
def written(broker: BrokerProcess) -> dict[str, Any]:
    """One topic per (client codec, topic compression.type), written by confluent-kafka."""
    base = unique("rc")
    topics = {(c, t): f"{base}-{c}-{t}" for c in CLIENT_CODECS for t in TOPIC_TYPES}
    for (_, topic_type), topic in topics.items():
        create_topic(broker.bootstrap, topic, {"compression.type": topic_type})
    ts = (int(time.time()) - 600) * 1000
    expected = [
        (
            b"k%d" % i if i % 9 else None,
            os.urandom(8).hex().encode() + text(50 + (i * 97) % 3_000, i),
            [("i", b"%d" % i), ("e", b"")],
            ts + i,
        )
        for i in range(PER_TOPIC)
    ]
    for codec in CLIENT_CODECS:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "compression.type": codec,
                "linger.ms": 50,
                "enable.idempotence": True,
            }
        )
        for topic_type in TOPIC_TYPES:
            for key, value, headers, stamp in expected:
                producer.produce(
                    topics[codec, topic_type], value, key, 0, timestamp=stamp, headers=headers
                )
        assert producer.flush(60) == 0
    return {"topics": topics, "expected": expected}


def test_stored_batches_are_in_the_topics_codec(broker: BrokerProcess, written: Any) -> None:
    for (codec, topic_type), topic in written["topics"].items():
        with RawClient(broker.bootstrap) as client:
            response = client.request(fetch_request(topic, 0, max_bytes=1 << 24))
        data = response.responses[0].partitions[0].records
        headers = list(iter_headers(data))
        want = codec if topic_type == "producer" else topic_type
        want = "none" if want == "uncompressed" else want
        assert {NAMES[h.codec] for h in headers} == {want}, (codec, topic_type)
        assert sum(h.record_count for h in headers) == PER_TOPIC
        assert all(h.producer_id >= 0 for h in headers)  # idempotent producer's fields kept
        values = [r.value for h in headers for r in decode_records(data[h.position :][: h.size])]
        assert values == [v for _, v, _, _ in written["expected"]]


def test_confluent_kafka_reads_every_codec(broker: BrokerProcess, written: Any) -> None:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "log_level": 0}
    )
    topics = list(written["topics"].values())
    consumer.assign([TopicPartition(t, 0, 0) for t in topics])
    got: dict[str, list[Any]] = {t: [] for t in topics}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < PER_TOPIC * len(topics):
            assert time.monotonic() < deadline, {t: len(m) for t, m in got.items()}
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is None:
                    got[msg.topic()].append(msg)
                else:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
    finally:
        consumer.close()
    for topic, messages in got.items():
        seen = [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in messages]
        assert seen == [(k, v, h, t) for k, v, h, t in written["expected"]], topic
        assert [m.offset() for m in messages] == list(range(PER_TOPIC))


def test_kafka_python_reads_every_codec_it_has(broker: BrokerProcess, written: Any) -> None:
    """kafka-python decodes snappy, lz4 and zstd only with optional packages (python-snappy,
    lz4, zstandard): topics stored in a codec it lacks here are left out."""
    has = {"none": True, "uncompressed": True, "gzip": kafka_codecs.has_gzip()}
    has |= {"snappy": kafka_codecs.has_snappy(), "lz4": kafka_codecs.has_lz4()}
    has["zstd"] = kafka_codecs.has_zstd()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    topics = [
        topic
        for (codec, topic_type), topic in written["topics"].items()
        if has[codec if topic_type == "producer" else topic_type]
    ]
    consumer.assign([KTP(t, 0) for t in topics])
    consumer.seek_to_beginning()
    got: dict[str, list[Any]] = {t: [] for t in topics}
    for msg in consumer:
        got[msg.topic].append(msg)
        if sum(map(len, got.values())) == PER_TOPIC * len(topics):
            break
    consumer.close()
    for topic, messages in got.items():
        seen = [(m.key, m.value, [tuple(h) for h in m.headers], m.timestamp) for m in messages]
        expected = [(k, v, [tuple(x) for x in h], t) for k, v, h, t in written["expected"]]
        assert seen == expected, topic


@pytest.mark.parametrize("topic_type", ["gzip", "snappy", "lz4", "zstd"])
def test_kafkas_java_client_reads_recompressed_batches(
    broker: BrokerProcess, topic_type: str
) -> None:
    """Kafka's Java reader is the strict one (lz4: independent blocks only)."""
    reason = java_available()
    if reason:
        pytest.skip(reason)
    topic = unique(f"java-{topic_type}")
    create_topic(broker.bootstrap, topic, {"compression.type": topic_type})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    values = [text(2_000 + i, i).decode() for i in range(200)]  # ~450 KB a batch
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), b"k%d" % i, 0)
    assert producer.flush(30) == 0
    records = run_java_client(
        [
            "consume",
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            topic,
            "--group",
            unique("j"),
            "--count",
            str(len(values)),
            "--timeout-ms",
            "60000",
        ]
    )
    assert [r["value"] for r in records] == values


@pytest.mark.parametrize("client_codec", ["snappy", "lz4", "gzip"])
def test_batches_of_kafkas_java_producer_are_recompressed(
    broker: BrokerProcess, client_codec: str
) -> None:
    """The Java producer frames snappy the xerial way and lz4 as Kafka's own frame."""
    reason = java_available()
    if reason:
        pytest.skip(reason)
    topic = unique(f"from-java-{client_codec}")
    create_topic(broker.bootstrap, topic, {"compression.type": "zstd"})
    acks = run_java_client(
        [
            "produce",
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            topic,
            "--count",
            "300",
            "--compression",
            client_codec,
            "--headers",
        ]
    )
    assert len(acks) == 300
    with RawClient(broker.bootstrap) as client:
        response = client.request(fetch_request(topic, 0, max_bytes=1 << 24))
    data = response.responses[0].partitions[0].records
    headers = list(iter_headers(data))
    assert {h.codec for h in headers} == {CODEC_ZSTD}
    records = [r for h in headers for r in decode_records(data[h.position :][: h.size])]
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k%d" % i, b"v%d" % i, (("h", b"%d" % i),)) for i in range(300)
    ]
