"""Transforms run by a broker: deployed through the broker's Transforms API, fed and read
with confluent-kafka, outputs equal to the same logic in Python; failures pause only their
partition; pause, resume, redeploy, delete; every deploy-time refusal changes nothing.

One broker for the module (``transforms.module.max.bytes`` 4 MiB, so the size limit is
reachable); each test uses its own topics and transform names.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode

from tests.conftest import unique
from tests.support.broker import BrokerProcess
from tests.support.transforms import TransformsAdmin, TransformsError
from tests.transforms.conftest import REFERENCE, Guests
from tests.transforms.data import records
from tests.transforms.kafka_io import create_topics, expected, produce, read_all, wait_rows
from tests.transforms.test_module import CASES

MODULE_LIMIT = 4 * 1024 * 1024
PARTITIONS = 3
LOGS_TOPIC = "_sluice.transform_logs"


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {"transforms.module.max.bytes": str(MODULE_LIMIT)}
    proc = BrokerProcess(tmp_path_factory.mktemp("tbroker") / "data", settings).start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill()


@pytest.fixture(scope="module")
def admin(tbroker: BrokerProcess) -> TransformsAdmin:
    return TransformsAdmin(tbroker.bootstrap)


def topics(bootstrap: str, prefix: str, outputs: int = 1) -> tuple[str, list[str]]:
    name = unique(prefix)
    outs = [f"{name}-out{i}" for i in range(outputs)]
    create_topics(bootstrap, (name, PARTITIONS), *[(o, PARTITIONS) for o in outs])
    return name, outs


def guest_logs(bootstrap: str, transform: str) -> list[dict[str, object]]:
    """The log lines of ``transform`` in the logs topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "logs-reader"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(LOGS_TOPIC, 0), 10)
        consumer.assign([TopicPartition(LOGS_TOPIC, 0, 0)])
        lines = []
        seen = 0
        deadline = time.monotonic() + 20
        while seen < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen = msg.offset() + 1
            if msg.key() == transform.encode():
                lines.append(json.loads(msg.value()))
        return lines
    finally:
        consumer.close()


def wait_logs(
    bootstrap: str, transform: str, words: str, partitions: int = 1, timeout: float = 60
) -> list[dict[str, object]]:
    """The log lines of ``transform`` once lines with ``words`` came from ``partitions``
    of its input partitions (each failed partition writes its own)."""
    deadline = time.monotonic() + timeout
    lines: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        try:
            lines = guest_logs(bootstrap, transform)
        except Exception:  # the logs topic may not exist yet
            lines = []
        if len({line["partition"] for line in lines if words in str(line["text"])}) >= partitions:
            return lines
        time.sleep(0.3)
    raise AssertionError(
        f"no log line of {transform} with {words!r} from {partitions} partition(s): {lines}"
    )


# ------------------------------------------------------------------ outputs


@pytest.mark.parametrize(
    ("family", "name", "compression"),
    [
        ("go", "identity", "lz4"),
        ("go", "uppercase", "none"),
        ("go", "jsonfilter", "zstd"),
        ("c", "identity", "gzip"),
        ("c", "jsonfilter", "none"),
        ("as", "uppercase", "snappy"),
    ],
)
def test_outputs_equal_the_logic_in_python(  # noqa: PLR0917 - fixtures and parameters
    tbroker: BrokerProcess,
    admin: TransformsAdmin,
    guests: Guests,
    family: str,
    name: str,
    compression: str,
) -> None:
    bootstrap = tbroker.bootstrap
    source, (out,) = topics(bootstrap, f"{family}-{name}")
    produce(bootstrap, source, records(300), PARTITIONS, compression)
    transform = unique(f"{family}-{name}")
    deployed = admin.deploy(transform, guests.wasm(family, name), source, [out])
    assert deployed["deployed"] == 1
    assert deployed["abi"] == ("redpanda" if family == "go" else "batch")
    produce(bootstrap, source, records(300), PARTITIONS, compression)  # while it runs
    admin.wait_caught_up(transform, PARTITIONS)
    inputs = read_all(bootstrap, source, PARTITIONS)
    want = expected(REFERENCE[name], inputs, (out,))[out]
    assert read_all(bootstrap, out, PARTITIONS) == want
    assert sum(map(len, want)) > 0
    states = admin.partitions(transform)
    assert [p["committed_offset"] for p in states] == [len(rows) for rows in inputs]
    assert all(p["lag"] == 0 and p["state"] == "running" for p in states)


def test_route_writes_to_both_outputs(
    tbroker: BrokerProcess, admin: TransformsAdmin, guests: Guests
) -> None:
    bootstrap = tbroker.bootstrap
    source, outs = topics(bootstrap, "route", outputs=2)
    produce(bootstrap, source, records(200), PARTITIONS)
    transform = unique("route")
    admin.deploy(transform, guests.wasm("go", "route"), source, outs)
    admin.wait_caught_up(transform, PARTITIONS)
    inputs = read_all(bootstrap, source, PARTITIONS)
    want = expected(REFERENCE["route"], inputs, tuple(outs))
    for topic in outs:
        assert read_all(bootstrap, topic, PARTITIONS) == want[topic]
    assert 0 < sum(map(len, want[outs[1]])) < sum(map(len, want[outs[0]]))


# ------------------------------------------------------------------ failures


def test_failures_stop_their_transform_only(
    tbroker: BrokerProcess, admin: TransformsAdmin, guests: Guests
) -> None:
    """A panic, an endless loop, unbounded allocation and a write to a topic the guest was
    not given each fail their transform (every partition, the guest's words shown) while
    an identity transform beside them keeps running; resume retries from the committed
    offset and fails again the same way."""
    bootstrap = tbroker.bootstrap
    healthy_in, (healthy_out,) = topics(bootstrap, "healthy")
    healthy = unique("healthy")
    admin.deploy(healthy, guests.wasm("go", "identity"), healthy_in, [healthy_out])
    cases = [
        ("panic", {}, "boom at offset 5", "boom at offset 5"),
        ("loop", {}, "budget", "fuel"),
        ("alloc", {}, "memory", "memory"),
        ("route", {"ROUTE_TO": "not-given"}, "not-given", "not-given"),
    ]
    failing = []
    for guest, env, words, log_words in cases:
        source, outs = topics(bootstrap, guest, outputs=2 if guest == "route" else 1)
        inputs = records(30)
        inputs[15:18] = [replace(r, value=b"boom") for r in inputs[15:18]]  # offset 5 of each
        produce(bootstrap, source, inputs, PARTITIONS)
        transform = unique(guest)
        admin.deploy(transform, guests.wasm("go", guest), source, outs, env=env)
        failing.append((transform, words, log_words))
    produce(bootstrap, healthy_in, records(90), PARTITIONS)
    for transform, words, log_words in failing:
        states = admin.wait_state(transform, "failed", PARTITIONS, timeout=90)
        for state in states:
            assert words in state["error"], state
            assert state["committed_offset"] <= 5
        wait_logs(bootstrap, transform, log_words, PARTITIONS)
    admin.wait_caught_up(healthy, PARTITIONS)
    assert sum(map(len, read_all(bootstrap, healthy_out, PARTITIONS))) == 90

    transform, words, _ = failing[0]
    before = admin.partitions(transform)
    admin.resume(transform)
    after = admin.wait_state(transform, "failed", PARTITIONS)
    assert [p["committed_offset"] for p in after] == [p["committed_offset"] for p in before]
    assert all(words in p["error"] for p in after)


# ------------------------------------------------------------------ lifecycle


def test_pause_resume_redeploy_delete(
    tbroker: BrokerProcess, admin: TransformsAdmin, guests: Guests
) -> None:
    bootstrap = tbroker.bootstrap
    source, (out,) = topics(bootstrap, "lifecycle")
    transform = unique("lifecycle")
    admin.deploy(transform, guests.wasm("go", "identity"), source, [out])
    produce(bootstrap, source, records(60), PARTITIONS)
    admin.wait_caught_up(transform, PARTITIONS)
    assert sum(map(len, read_all(bootstrap, out, PARTITIONS))) == 60

    paused = admin.pause(transform)
    assert paused["paused"] is True
    produce(bootstrap, source, records(60), PARTITIONS)
    time.sleep(2)  # a running transform would have written them by now
    assert admin.partitions(transform) == []
    assert sum(map(len, read_all(bootstrap, out, PARTITIONS))) == 60

    admin.resume(transform)
    admin.wait_caught_up(transform, PARTITIONS)
    assert sum(map(len, read_all(bootstrap, out, PARTITIONS))) == 120

    # a new version continues from the committed offsets: only later records are uppercased
    redeployed = admin.deploy(transform, guests.wasm("go", "uppercase"), source, [out])
    assert redeployed["deployed"] == 2
    produce(bootstrap, source, records(60), PARTITIONS)
    admin.wait_caught_up(transform, PARTITIONS)
    inputs = read_all(bootstrap, source, PARTITIONS)
    old = expected(REFERENCE["identity"], [rows[:40] for rows in inputs], (out,))[out]
    new = expected(REFERENCE["uppercase"], [rows[40:] for rows in inputs], (out,))[out]
    assert read_all(bootstrap, out, PARTITIONS) == [a + b for a, b in zip(old, new, strict=True)]
    assert new != expected(REFERENCE["identity"], [rows[40:] for rows in inputs], (out,))[out]

    deleted = admin.delete(transform)
    assert deleted["name"] == transform
    with pytest.raises(TransformsError) as info:
        admin.describe(transform)
    assert info.value.code == ErrorCode.resource_not_found
    produce(bootstrap, source, records(30), PARTITIONS)
    time.sleep(2)
    assert len([r for p in read_all(bootstrap, out, PARTITIONS) for r in p]) == 180
    with pytest.raises(TransformsError) as info:
        admin.delete(transform)
    assert info.value.code == ErrorCode.resource_not_found
    assert "no transform named" in info.value.message


# ------------------------------------------------------------------ refusals


def _with_custom_section(module: bytes, size: int) -> bytes:
    """``module`` plus a custom section of ``size`` bytes (still valid WebAssembly)."""
    name = b"padding"
    body = bytes([len(name)]) + name + bytes(size)
    length = bytearray()
    n = len(body)
    while True:
        byte = n & 0x7F
        n >>= 7
        length.append(byte | (0x80 if n else 0))
        if not n:
            break
    return module + b"\x00" + bytes(length) + body


def test_refused_deploys_change_nothing(
    tbroker: BrokerProcess, admin: TransformsAdmin, guests: Guests
) -> None:
    bootstrap = tbroker.bootstrap
    source, (out,) = topics(bootstrap, "refused")
    identity = guests.wasm("go", "identity")
    kept = unique("kept")
    admin.deploy(kept, identity, source, [out])
    admin.wait_state(kept, "running", PARTITIONS)
    before = admin.describe(kept)[0]
    before.pop("partitions")
    big = _with_custom_section(identity, MODULE_LIMIT)
    refusals: list[tuple[str, bytes, str, list[str], ErrorCode, str]] = [
        (kept, b"not wasm at all", source, [out], ErrorCode.invalid_request, "WebAssembly"),
        (kept, big, source, [out], ErrorCode.invalid_request, "transforms.module.max.bytes"),
        (
            kept,
            identity,
            "no-such-topic",
            [out],
            ErrorCode.unknown_topic_or_partition,
            "no-such-topic",
        ),
        (
            kept,
            identity,
            source,
            ["no-such-out"],
            ErrorCode.unknown_topic_or_partition,
            "no-such-out",
        ),
        (kept, identity, source, [source], ErrorCode.invalid_request, "input"),
        (kept, identity, source, [f"o{i}" for i in range(9)], ErrorCode.invalid_request, "8"),
        ("bad\x01name", identity, source, [out], ErrorCode.invalid_request, "name"),
    ]
    refusals += [
        (kept, data, source, [out], ErrorCode.invalid_request, words) for data, _, words in CASES
    ]
    for name, module, input_topic, outputs, code, words in refusals:
        with pytest.raises(TransformsError) as info:
            admin.deploy(name, module, input_topic, outputs)
        assert info.value.code == code, (words, info.value)
        assert words in info.value.message, (words, info.value.message)
    after = admin.describe(kept)[0]
    assert after.pop("partitions")
    assert after == before
    assert [t["name"] for t in admin.describe()].count(kept) == 1
    assert all(t["name"] != "bad\x01name" for t in admin.describe())


def test_state_survives_a_restart(make_broker: object, guests: Guests) -> None:
    """Definition, module and progress are the cluster's: after a restart the transform runs
    again from its committed offsets (no output written twice without a crash)."""
    proc: BrokerProcess = make_broker()  # type: ignore[operator]
    bootstrap = proc.bootstrap
    admin = TransformsAdmin(bootstrap)
    source, (out,) = topics(bootstrap, "restart")
    transform = unique("restart")
    admin.deploy(transform, guests.wasm("c", "identity"), source, [out])
    produce(bootstrap, source, records(90), PARTITIONS)
    admin.wait_caught_up(transform, PARTITIONS)
    proc.stop()
    proc.start()
    produce(bootstrap, source, records(90), PARTITIONS)
    admin.wait_caught_up(transform, PARTITIONS)
    rows = wait_rows(bootstrap, out, PARTITIONS, 180)
    assert sum(map(len, rows)) == 180
    assert [p["committed_offset"] for p in admin.partitions(transform)] == [60, 60, 60]
