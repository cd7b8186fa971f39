"""Until Sluice has a transaction coordinator, transactional producers fail at once.

FindCoordinator for a transactional id is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED
with a message naming the reason: the one answer that every client treats as fatal
(librdkafka retries every other FindCoordinator error until its own timeout). Each
client is given a long timeout; the test checks the error it gets is that fatal one, not
a timeout.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TransactionalIdAuthorizationFailed
from confluent_kafka import KafkaException, Producer
from kafka import KafkaProducer
from kafka.errors import TransactionalIdAuthorizationFailedError

from tests.conftest import BrokerProcess

REASON = "Transactions are not supported by Sluice yet"


def test_confluent_kafka_init_transactions_fails_fatally(broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-ck"})
    with pytest.raises(KafkaException) as caught:
        producer.init_transactions(60)
    error = caught.value.args[0]
    assert error.fatal(), error
    assert error.name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", error
    assert REASON in error.str()


def test_kafka_python_init_transactions_fails(broker: BrokerProcess) -> None:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id="tx-kp", max_block_ms=60000
    )
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
    finally:
        producer.close(timeout=5)


def test_aiokafka_start_fails(broker: BrokerProcess) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id="tx-aio", request_timeout_ms=60000
        )
        try:
            with pytest.raises(TransactionalIdAuthorizationFailed):
                await producer.start()
        finally:
            await producer.stop()

    asyncio.run(run())
