"""Per-record produce errors (KIP-467) and the compression configs, Sluice beside Kafka.

The same raw Produce requests (v11, and v7 from before record errors) go to Sluice and to
Apache Kafka: a null key in a compacted topic (INVALID_RECORD), CreateTime timestamps out
of ``message.timestamp.before/after.max.ms`` (INVALID_TIMESTAMP), a client batch stamped
LogAppendTime, in uncompressed and compressed batches, kept in their codec or
recompressed; the answers must match field by field: error code, message, record errors
(index and message) and log start offset. Timestamp bounds depend on each broker's clock
and are compared as "[LO, HI]". confluent-kafka's delivery reports of such a batch, and
the CreateTopics / DescribeConfigs / IncrementalAlterConfigs answers for
``compression.type`` and the ``compression.*.level`` configs, are compared too.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.conftest import unique
from tests.support.raw_client import RawClient
from wire.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY
from wire.framing import build
from wire.record_batch import CODEC_NONE, CODEC_ZSTD, TIMESTAMP_TYPE_BIT, Record, encode_batch

pytestmark = pytest.mark.oracle

CT = load_payload_module(19, 7, EntityType.request)
DC = load_payload_module(32, 4, EntityType.request)
IAC = load_payload_module(44, 1, EntityType.request)
TOPIC, BROKER = 2, 4
SECONDS = datetime.timedelta(seconds=30)

TOPICS = {
    "compact": {"cleanup.policy": "compact"},
    "compactzstd": {"cleanup.policy": "compact", "compression.type": "zstd"},
    "ts": {"message.timestamp.after.max.ms": "1000", "message.timestamp.before.max.ms": "100000"},
    "after": {"message.timestamp.after.max.ms": "1000"},
    "cts": {"cleanup.policy": "compact", "message.timestamp.after.max.ms": "1000"},
    "lat": {"message.timestamp.type": "LogAppendTime"},
    "latzstd": {"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"},
    "plain": {},
}


def creatable(name: str, configs: dict[str, str]) -> Any:
    return build(
        CT.CreatableTopic,
        name=name,
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=tuple(build(CT.CreatableTopicConfig, name=k, value=v) for k, v in configs.items()),
    )


def create_topics(bootstrap: str, prefix: str, validate_only: bool = False) -> Any:
    request = build(
        CT.CreateTopicsRequest,
        topics=tuple(creatable(prefix + name, cfg) for name, cfg in TOPICS.items()),
        timeout=SECONDS,
        validate_only=validate_only,
    )
    with RawClient(bootstrap) as client:
        response = client.request(request)
    assert {t.error_code.name for t in response.topics} == {"none"}, response
    if not validate_only:  # until every partition has a leader that takes writes
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = {prefix + name for name in TOPICS}
        deadline = time.monotonic() + 30
        while True:
            topics = admin.list_topics(timeout=10).topics
            if all(n in topics and topics[n].partitions[0].leader >= 0 for n in names):
                break
            assert time.monotonic() < deadline, "topics without a leader"
            time.sleep(0.1)
    return response


def produce(bootstrap: str, topic: str, batch: bytes, version: int) -> Any:
    p = load_payload_module(0, version, EntityType.request)
    request = build(
        p.ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=SECONDS,
        topic_data=(
            build(
                p.TopicProduceData,
                name=topic,
                partition_data=(build(p.PartitionProduceData, index=0, records=batch),),
            ),
        ),
    )
    deadline = time.monotonic() + 30
    while True:  # a new topic's leader may not take writes at once (retriable)
        with RawClient(bootstrap) as client:
            response = client.request(request)
        (part,) = response.responses[0].partition_responses
        if part.error_code.name != "not_leader_or_follower" or time.monotonic() > deadline:
            return part
        time.sleep(0.2)


def normalized(text: str | None, prefix: str) -> str | None:
    if text is None:
        return None
    return re.sub(r"within \[-?\d+, -?\d+\]", "within [LO, HI]", text.replace(prefix, "P"))


def cases(now: int) -> list[tuple[str, str, bytes]]:
    """(name, topic, batch): the same bytes go to both systems."""
    recs = [Record(0, now, None, b"v0"), Record(1, now, b"k", b"v1"), Record(2, now, None, b"v2")]
    many = [Record(i, now, None if i % 2 else b"k", b"v") for i in range(11)]
    stamps = [now, now + 3_600_000, now - 200_000, now, -1, now + 999]
    timed = [Record(i, ts, b"k", b"v%d" % i) for i, ts in enumerate(stamps)]
    mixed = [Record(0, now, None, b"v0"), Record(1, now + 3_600_000, b"k", b"v1")]
    mixed.append(Record(2, now + 3_600_000, None, b"v2"))
    lat = [Record(0, now, None, b"v0"), Record(1, now, b"k", b"v1")]
    out: list[tuple[str, str, bytes]] = []
    for codec in (CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD):
        out.append((f"null keys {codec}", "compact", encode_batch(recs, codec=codec)))
        out.append((f"null keys {codec} to zstd", "compactzstd", encode_batch(recs, codec=codec)))
        out.append((f"timestamps {codec}", "ts", encode_batch(timed, codec=codec)))
        out.append((f"after only {codec}", "after", encode_batch(timed, codec=codec)))
        latb = encode_batch(lat, codec=codec, attributes=TIMESTAMP_TYPE_BIT)
        out.append((f"client LogAppendTime {codec}", "lat", latb))
        out.append((f"client LogAppendTime {codec} to zstd", "latzstd", latb))
        out.append((f"client LogAppendTime {codec} CreateTime", "ts", latb))
    late = encode_batch(lat, attributes=TIMESTAMP_TYPE_BIT, max_timestamp=now + 3_600_000)
    out += [
        ("eleven records, six keyless", "compact", encode_batch(many)),
        ("key and timestamp", "cts", encode_batch(mixed, codec=CODEC_GZIP)),
        ("client LogAppendTime too late", "ts", late),
        ("fine compacted", "compact", encode_batch([(b"k", b"v"), (b"k", None)])),
        ("fine timestamps", "ts", encode_batch([Record(0, now, b"k", b"v")], codec=CODEC_LZ4)),
    ]
    return out


@pytest.mark.parametrize("version", [11, 7])
def test_record_errors_match_kafka(both: dict[str, str], version: int) -> None:
    prefix = unique(f"re{version}").replace("-", "")
    for bootstrap in both.values():
        create_topics(bootstrap, prefix)
    now = int(time.time() * 1000)
    seen: dict[str, list[Any]] = {}
    for system, bootstrap in both.items():
        answers = []
        for name, topic, batch in cases(now):
            part = produce(bootstrap, prefix + topic, batch, version)
            errors = [
                (e.batch_index, normalized(e.batch_index_error_message, prefix))
                for e in getattr(part, "record_errors", ())
            ]
            answers.append(
                (
                    name,
                    part.error_code.name,
                    part.base_offset >= 0,
                    part.log_start_offset,
                    normalized(getattr(part, "error_message", None), prefix),
                    errors,
                )
            )
        seen[system] = answers
    for ours, theirs in zip(seen["sluice"], seen["kafka"], strict=True):
        assert ours == theirs


def test_confluent_delivery_reports_match_kafka(both: dict[str, str]) -> None:
    """How librdkafka reports a batch with one refused record, from each system."""
    prefix = unique("ck").replace("-", "")
    reports: dict[str, list[Any]] = {}
    for system, bootstrap in both.items():
        create_topics(bootstrap, prefix)
        outcomes: list[Any] = []
        producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 200, "acks": "all", "retries": 0}
        )

        def report(err: Any, msg: Any, outcomes: list[Any] = outcomes) -> None:
            outcomes.append((msg.topic().replace(prefix, "P"), msg.key(), err and err.code()))

        now = int(time.time() * 1000)
        for key in (b"a", None, b"c"):
            producer.produce(prefix + "compact", b"v", key, 0, on_delivery=report)
        for ts in (now, now + 7_200_000, now):
            producer.produce(prefix + "after", b"v", b"k", 0, on_delivery=report, timestamp=ts)
        producer.produce(prefix + "plain", b"v", None, 0, on_delivery=report)
        producer.flush(30)
        reports[system] = sorted(outcomes, key=repr)
    assert reports["sluice"] == reports["kafka"]
    assert (None, KafkaError.INVALID_RECORD) in [(k, e) for t, k, e in reports["kafka"]]


# --------------------------------------------------------------------------- configs

CONFIG_CASES = [
    ("compression.type", "uncompressed"),
    ("compression.type", "zstd"),
    ("compression.type", "lz4"),
    ("compression.type", "snappy"),
    ("compression.type", "gzip"),
    ("compression.type", "producer"),
    ("compression.type", "none"),
    ("compression.type", "zip"),
    ("compression.type", "GZIP"),
    ("compression.type", ""),
    ("compression.type", " gzip"),
    ("compression.gzip.level", "-1"),
    ("compression.gzip.level", "1"),
    ("compression.gzip.level", "9"),
    ("compression.gzip.level", "x"),
    ("compression.lz4.level", "1"),
    ("compression.lz4.level", "17"),
    ("compression.lz4.level", "0"),
    ("compression.lz4.level", "18"),
    ("compression.zstd.level", "-131072"),
    ("compression.zstd.level", "22"),
    ("compression.zstd.level", "-131073"),
    ("compression.zstd.level", "23"),
]
GZIP_LEVELS = [("compression.gzip.level", v) for v in ("0", "10", "-2")]


def create_one(bootstrap: str, name: str, key: str, value: str) -> Any:
    request = build(
        CT.CreateTopicsRequest,
        topics=(creatable(name, {key: value}),),
        timeout=SECONDS,
        validate_only=True,
    )
    with RawClient(bootstrap) as client:
        (topic,) = client.request(request).topics
    return topic.error_code.name, topic.error_message


@pytest.mark.parametrize(
    ("key", "value"),
    CONFIG_CASES,
)
def test_create_topics_with_compression_configs_match_kafka(
    both: dict[str, str], key: str, value: str
) -> None:
    name = unique("cfg")
    sluice, kafka = (create_one(both[s], name, key, value) for s in ("sluice", "kafka"))
    assert sluice == kafka


@pytest.mark.parametrize(("key", "value"), GZIP_LEVELS)
def test_gzip_levels_kafka_refuses_are_refused(both: dict[str, str], key: str, value: str) -> None:
    """1-9 or -1, with Kafka's message ("between 1 and 9 or equal to -1")."""
    name = unique("cfg")
    kafka = create_one(both["kafka"], name, key, value)
    sluice = create_one(both["sluice"], name, key, value)
    assert kafka[0] == "invalid_config"
    assert sluice == kafka


def describe(bootstrap: str, resource_type: int, name: str) -> dict[str, Any]:
    request = build(
        DC.DescribeConfigsRequest,
        resources=(
            build(
                DC.DescribeConfigsResource,
                resource_type=resource_type,
                resource_name=name,
                configuration_keys=None,
            ),
        ),
        include_synonyms=True,
        include_documentation=False,
    )
    # a topic just created may not be in the answering broker's metadata yet (Kafka
    # publishes the controller's records to its own broker asynchronously): asked again
    deadline = time.monotonic() + 30
    while True:
        with RawClient(bootstrap) as client:
            (result,) = client.request(request).results
        if result.error_code.name != "unknown_topic_or_partition" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert result.error_code.name == "none", result
    return {
        c.name: (
            c.value,
            c.config_source,
            c.read_only,
            c.config_type,
            [(s.name, s.value, s.source) for s in c.synonyms],
        )
        for c in result.configs
        if c.name.startswith("compression.")
    }


def test_describe_compression_configs_match_kafka(both: dict[str, str]) -> None:
    name = unique("desc")
    overrides = {"compression.type": "zstd", "compression.zstd.level": "7"}
    for bootstrap in both.values():
        with RawClient(bootstrap) as client:
            request = build(
                CT.CreateTopicsRequest,
                topics=(creatable(name, overrides),),
                timeout=SECONDS,
                validate_only=False,
            )
            (topic,) = client.request(request).topics
            assert topic.error_code.name == "none", topic
    sluice, kafka = (describe(both[s], TOPIC, name) for s in ("sluice", "kafka"))
    assert sluice == kafka
    assert sluice["compression.type"][0] == "zstd"
    sluice, kafka = (describe(both[s], BROKER, "1") for s in ("sluice", "kafka"))
    assert sluice == kafka
    assert set(sluice) == {
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
    }


def test_broker_compression_type_is_dynamic_as_in_kafka(both: dict[str, str]) -> None:
    answers: dict[str, list[Any]] = {}
    for system, bootstrap in both.items():
        answers[system] = []
        for key, value in (
            ("compression.type", "gzip"),
            ("compression.type", "brotli"),
            ("compression.lz4.level", "12"),
            ("compression.zstd.level", "99"),
        ):
            config = build(IAC.AlterableConfig, name=key, config_operation=0, value=value)
            request = build(
                IAC.IncrementalAlterConfigsRequest,
                resources=(
                    build(
                        IAC.AlterConfigsResource,
                        resource_type=BROKER,
                        resource_name="",
                        configs=(config,),
                    ),
                ),
                validate_only=True,
            )
            with RawClient(bootstrap) as client:
                (result,) = client.request(request).responses
            answers[system].append(result.error_code.name)
    assert answers["sluice"] == answers["kafka"]
    assert answers["kafka"][0] == "none"
