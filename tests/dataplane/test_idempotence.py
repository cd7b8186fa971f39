"""Idempotent producers: per producer and partition sequence checks; a retried batch is
acknowledged with its original offset and not written twice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kio.schema.errors import ErrorCode

from tests.conftest import BrokerProcess, unique
from tests.support.cluster_workload import wait_for
from tests.support.raw_client import RawClient
from tests.support.records import fetch_request, partition_response, produce_request
from wire.record_batch import encode_batch, iter_headers


@pytest.fixture(scope="module")
def auto_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("idem") / "data", {"auto.create.topics.enable": "true"}
    ).start()
    yield proc
    proc.stop()
    proc.kill()


def _batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    return encode_batch(
        [(b"k%d" % (seq + i), b"v") for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        timestamp_ms=1,
    )


def _produce(client: RawClient, topic: str, batch: bytes) -> Any:
    return partition_response(client.request(produce_request(topic, batch)))


def _stored_batches(client: RawClient, topic: str) -> int:
    part = partition_response(client.request(fetch_request(topic, 0)))
    return sum(1 for _ in iter_headers(part.records))


def test_duplicate_batch_is_acknowledged_once(auto_broker: BrokerProcess) -> None:
    topic = unique("dup")
    with RawClient(auto_broker.bootstrap) as client:
        first = _produce(client, topic, _batch(4242, 0, 0))
        second = _produce(client, topic, _batch(4242, 0, 2))
        retry = _produce(client, topic, _batch(4242, 0, 0))
        assert first.error_code == ErrorCode.none
        assert second.base_offset == 2
        assert retry.error_code == ErrorCode.none
        assert retry.base_offset == first.base_offset == 0
        assert _stored_batches(client, topic) == 2


def test_sequence_gap_is_out_of_order(auto_broker: BrokerProcess) -> None:
    topic = unique("gap")
    with RawClient(auto_broker.bootstrap) as client:
        assert _produce(client, topic, _batch(77, 0, 0)).error_code == ErrorCode.none
        gap = _produce(client, topic, _batch(77, 0, 5))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        assert _stored_batches(client, topic) == 1


def test_older_epoch_is_fenced(auto_broker: BrokerProcess) -> None:
    topic = unique("epoch")
    with RawClient(auto_broker.bootstrap) as client:
        assert _produce(client, topic, _batch(99, 3, 0)).error_code == ErrorCode.none
        old = _produce(client, topic, _batch(99, 2, 2))
        assert old.error_code == ErrorCode.invalid_producer_epoch
        bumped = _produce(client, topic, _batch(99, 4, 0))
        assert bumped.error_code == ErrorCode.none
        assert _stored_batches(client, topic) == 2


def test_a_batch_behind_one_refused_not_enough_replicas_is_refused_alike(
    auto_broker: BrokerProcess,
) -> None:
    """Found by the soak (seed 10: 312 records twice): a batch refused NOT_ENOUGH_REPLICAS
    is not written, and the next one, arriving once the ISR was back, was a sequence gap:
    OUT_OF_ORDER_SEQUENCE, on which librdkafka bumps its epoch and re-sends what it has in
    flight under new sequence numbers. It is refused alike until the refused one comes
    again, as after a full disk or a replica that did not lead yet."""
    topic = unique("isr")
    admin = AdminClient({"bootstrap.servers": auto_broker.bootstrap})
    # one replica, two wanted in sync: acks=all is refused
    new = NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(30)
    with RawClient(auto_broker.bootstrap) as client:

        def first() -> tuple[ErrorCode] | None:  # while the broker learns of the topic
            code = ErrorCode(_produce(client, topic, _batch(606, 0, 0)).error_code)
            return None if code == ErrorCode.unknown_topic_or_partition else (code,)

        assert wait_for(first, 30, "the topic") == (ErrorCode.not_enough_replicas,)
        resource = ConfigResource("topic", topic)
        resource.add_incremental_config(
            ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        # another producer shows the new setting in force
        wait_for(
            lambda: _produce(client, topic, _batch(607, 0, 0)).error_code == ErrorCode.none,
            30,
            "min.insync.replicas=1",
        )
        behind = _produce(client, topic, _batch(606, 0, 2))
        assert behind.error_code == ErrorCode.not_enough_replicas  # was OUT_OF_ORDER_SEQUENCE
        assert _produce(client, topic, _batch(606, 0, 0)).error_code == ErrorCode.none
        assert _produce(client, topic, _batch(606, 0, 2)).error_code == ErrorCode.none
        assert _stored_batches(client, topic) == 3  # and producer 607's


def test_deduplication_survives_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("idem-restart") / "data", {"auto.create.topics.enable": "true"}
    ).start()
    topic = unique("restart")
    try:
        with RawClient(proc.bootstrap) as client:
            first = _produce(client, topic, _batch(5, 0, 0))
        proc.kill()  # no clean shutdown: state must come back from the log itself
        proc.start()
        with RawClient(proc.bootstrap) as client:
            retry = _produce(client, topic, _batch(5, 0, 0))
            assert retry.base_offset == first.base_offset
            following = _produce(client, topic, _batch(5, 0, 2))
            assert following.error_code == ErrorCode.none
            assert _stored_batches(client, topic) == 2
    finally:
        proc.stop()
