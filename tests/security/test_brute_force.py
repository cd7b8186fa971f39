"""Brute force on the SASL listeners: 1,000 wrong SCRAM-SHA-512 logins from 20 threads at once
(raw connections, half of them over SASL_SSL, one in ten for a user that does not exist)
while a producer and a consumer logged in as alice (confluent-kafka, SASL_SSL) keep working.

Checked: every wrong login is answered SASL_AUTHENTICATION_FAILED and its connection is
closed by the broker (after ``connection.failed.authentication.delay.ms``, 100 ms); the good
producer's every record is acknowledged, during the attack too, and read back by the
consumer; afterwards the broker runs, alice logs in, and its RSS grew by less than
RSS_GROWTH_LIMIT. The broker runs with ``max.connections.per.ip`` = SLOT_LIMIT (default
1,000) so that failed connections holding their slots after they failed (a leak, or a
delayed close that never comes) would lock the good clients, which share 127.0.0.1 with the
attacker, out long before the 1,000th attempt. A quarter of the attackers keep their socket
open until the broker closes it (the slot the delay holds); the others close at once.

Printed, not asserted: the good producer's request times (produce + flush of one record,
acks=all) before, during and after the attack; the attack's rate; the most sockets the
broker held at once; its RSS before, at its peak and after (~53 MiB of growth over the
attack: uvloop keeps some closed TLS connections' buffers; before closed connections
released their 256 KiB read buffer and session at once, it was ~150-175 MiB).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

from tests.security.conftest import ALICE, ALICE_PASSWORD, Secured, start_secured
from tests.support.raw_client import RawClient
from wire.client import BlockingConnection

ATTEMPTS = 1_000
THREADS = 20
SLOT_LIMIT = 200
RSS_GROWTH_LIMIT = 96 * 1024 * 1024
BEFORE_REQUESTS = 150  # good requests measured before the attack starts
AFTER_REQUESTS = 100
FAILED = ErrorCode.sasl_authentication_failed


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    setup = start_secured(
        tmp_path_factory.mktemp("brute-force"), **{"max.connections.per.ip": str(SLOT_LIMIT)}
    )
    try:
        yield setup
    finally:
        setup.broker.stop()
        setup.broker.kill()


# ---------------------------------------------------------------------------- the attacker


def _connect(secured: Secured, tls: bool, context: ssl.SSLContext) -> RawClient:
    client = RawClient(secured.sasl_ssl if tls else secured.sasl_plaintext)
    if tls:
        client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
    return client


def _scram(client: BlockingConnection, user: str, password: str) -> int:
    """One SCRAM-SHA-512 login; the error code of the step that ended it."""
    handshake = client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    assert handshake.error_code == ErrorCode.none
    scram = ScramClient(["SCRAM-SHA-512"], user, password)
    first = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
    if first.error_code != ErrorCode.none:
        return int(first.error_code)
    scram.set_server_first(first.auth_bytes.decode())
    final = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
    return int(final.error_code)


def _closed_by_broker(client: BlockingConnection, timeout: float = 10) -> bool:
    client.sock.settimeout(timeout)
    try:
        return client.sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def _attempt(secured: Secured, context: ssl.SSLContext, i: int) -> tuple[int, bool | None]:
    """Wrong login number ``i``: (error code, closed by the broker if waited for, else None)."""
    user = f"nobody-{i}" if i % 10 == 0 else ALICE
    client = _connect(secured, tls=i % 2 == 1, context=context)
    try:
        code = _scram(client, user, f"guess-{i}")
        return code, _closed_by_broker(client) if i % 4 == 0 else None
    finally:
        client.close()


def _good_login(secured: Secured, context: ssl.SSLContext, tls: bool) -> None:
    with _connect(secured, tls, context) as client:
        assert _scram(client, ALICE, ALICE_PASSWORD) == ErrorCode.none
        metadata = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        assert client.request(metadata).brokers


# ---------------------------------------------------------------------------- the good clients


class GoodClients:
    """A producer (one record per request, acks=all, flushed each time) and a consumer (from
    the beginning), both on SASL_SSL as alice, each in its own thread."""

    def __init__(self, secured: Secured, topic: str) -> None:
        conf: dict[str, Any] = secured.conf("SASL_SSL", "SCRAM-SHA-512", ALICE, ALICE_PASSWORD)
        self.errors: list[str] = []
        self.producer = Producer({**conf, "acks": "all", "linger.ms": 0, "error_cb": self._error})
        self.consumer = Consumer(
            {
                **conf,
                "group.id": f"brute-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "error_cb": self._error,
            }
        )
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.topic = topic
        self.phase = "before"
        self.latencies: dict[str, list[float]] = {"before": [], "during": [], "after": []}
        self.acked: list[bytes] = []
        self.delivery_errors: list[str] = []
        self.read: list[bytes] = []
        self.read_during = 0
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def _error(self, error: KafkaError) -> None:
        self.errors.append(str(error))

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            self.acked.append(message.value() or b"")
        else:
            self.delivery_errors.append(str(error))

    def _produce(self) -> None:
        i = 0
        while not self.stop.is_set():
            phase = self.phase
            started = time.perf_counter()
            self.producer.produce(self.topic, f"good-{i}".encode(), on_delivery=self._delivered)
            left = self.producer.flush(30)
            self.latencies[phase].append(time.perf_counter() - started)
            if left:
                self.delivery_errors.append(f"record {i} not acknowledged within 30 s")
            i += 1

    def _consume(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.read.append(message.value() or b"")
                if self.phase == "during":
                    self.read_during += 1

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def wait_requests(self, phase: str, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.latencies[phase]) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.latencies[phase]) >= count, f"the good producer stalled {phase}"

    def finish(self) -> set[bytes]:
        """Stop producing; read on until every acknowledged record is read (or 30 s)."""
        self.stop.set()
        self.threads[0].join(60)
        self.threads[1].join(60)
        read = set(self.read)
        deadline = time.monotonic() + 30
        while not set(self.acked) <= read and time.monotonic() < deadline:
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.add(message.value() or b"")
        self.consumer.close()
        return read


# ---------------------------------------------------------------------------- broker resources


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _sockets(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed while we looked
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


class Monitor:
    """Samples the broker's RSS and open sockets every 20 ms until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss = 0
        self.peak_sockets = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.02):
            self.peak_rss = max(self.peak_rss, _rss(self.pid))
            self.peak_sockets = max(self.peak_sockets, _sockets(self.pid))

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(5)


def _ms(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"{len(values)} requests, median {statistics.median(values) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


# ---------------------------------------------------------------------------- the attack


@dataclass
class Attack:
    secured: Secured
    context: ssl.SSLContext
    outcomes: list[tuple[int, bool | None]]
    seconds: float
    good: GoodClients
    read: set[bytes]
    sockets_before: int
    monitor: Monitor
    rss_before: int
    rss_after: int


@pytest.fixture(scope="module")
def attack(attacked: Secured) -> Attack:
    """The good clients run; ATTEMPTS wrong logins from THREADS threads; the good clients
    go on for AFTER_REQUESTS requests, then every acknowledged record is read back."""
    broker = attacked.broker
    assert broker.proc is not None
    pid = broker.proc.pid
    context = ssl.create_default_context(cafile=str(attacked.ca.ca))
    topic = f"brute-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)

    good = GoodClients(attacked, topic)
    good.start()
    good.wait_requests("before", BEFORE_REQUESTS)
    rss_before, sockets_before = _rss(pid), _sockets(pid)
    monitor = Monitor(pid)
    good.phase = "during"
    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        outcomes = list(pool.map(lambda i: _attempt(attacked, context, i), range(ATTEMPTS)))
    seconds = time.perf_counter() - started
    good.phase = "after"
    good.wait_requests("after", AFTER_REQUESTS)
    monitor.finish()
    read = good.finish()
    return Attack(
        attacked,
        context,
        outcomes,
        seconds,
        good,
        read,
        sockets_before,
        monitor,
        rss_before,
        _rss(pid),
    )


# ---------------------------------------------------------------------------- the tests


def test_every_wrong_login_is_refused_and_its_connection_closed(attack: Attack) -> None:
    codes = [code for code, _ in attack.outcomes]
    assert codes == [FAILED] * ATTEMPTS, {c: codes.count(c) for c in set(codes)}
    waited = [closed for _, closed in attack.outcomes if closed is not None]
    assert waited, "no attacker waited for the broker to close its connection"
    assert all(waited), f"{waited.count(False)} failed connections were not closed by the broker"


def test_good_clients_keep_producing_and_consuming(attack: Attack) -> None:
    good = attack.good
    print(
        f"\nattack: {ATTEMPTS} wrong SCRAM-SHA-512 logins from {THREADS} threads in "
        f"{attack.seconds:.1f} s ({ATTEMPTS / attack.seconds:.0f}/s)"
        f"\ngood producer (SASL_SSL, one record per request, acks=all, flushed each time):"
        f"\n  before: {_ms(good.latencies['before'])}"
        f"\n  during: {_ms(good.latencies['during'])}"
        f"\n  after:  {_ms(good.latencies['after'])}"
        f"\ngood consumer: {len(attack.read)} records read, {good.read_during} during the attack"
        f"\nbroker sockets: {attack.sockets_before} before, at most "
        f"{attack.monitor.peak_sockets} during (max.connections.per.ip {SLOT_LIMIT})"
    )
    assert not good.delivery_errors, good.delivery_errors[:5]
    assert not good.errors, good.errors[:5]
    assert good.latencies["during"], "no good request was answered during the attack"
    assert good.read_during, "the good consumer read nothing during the attack"
    assert good.acked, "nothing was acknowledged"
    missing = set(good.acked) - attack.read
    assert not missing, f"{len(missing)} acknowledged records were not read back"


def test_broker_runs_and_a_good_login_works_afterwards(attack: Attack) -> None:
    assert attack.secured.broker.alive()
    _good_login(attack.secured, attack.context, tls=False)
    _good_login(attack.secured, attack.context, tls=True)


def test_broker_memory_does_not_grow_without_bound(attack: Attack) -> None:
    print(
        f"\nbroker RSS: {attack.rss_before / 2**20:.1f} MiB before the attack, peak "
        f"{attack.monitor.peak_rss / 2**20:.1f} MiB, {attack.rss_after / 2**20:.1f} MiB after"
    )
    growth = attack.rss_after - attack.rss_before
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew by {growth / 2**20:.0f} MiB"
