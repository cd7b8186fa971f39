"""A transform across leader failover: kill -9 the leader of an input partition while records
stream in; after failover, restart and catch-up, every input record has its output (at least
once) and no output is lost.

Three brokers; input and output topics of 3 partitions, RF 3, min.insync.replicas 2; the
identity transform built with Redpanda's Go SDK. An idempotent acks=all producer writes unique
sequential values at a steady rate while the leader of input partition 0, then of partition 1,
is SIGKILLed and restarted. The transform commits its progress only after its outputs are
acknowledged, so the new leader resumes from the last committed offset: outputs may repeat
(at least once, counted and printed), none may be missing.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.cluster_workload import (
    SteadyProducer,
    admin_client,
    create_topic,
    leader_of,
    read_partitions,
    wait_for,
    wait_in_isr,
    wait_out_of_isr,
)
from tests.support.sluice_cluster import SluiceCluster
from tests.support.transforms import TransformsAdmin
from tests.transforms.conftest import Guests

PARTITIONS = 3
REPLICATION = 3
RATE = 300
KILLED_PARTITIONS = (0, 1)
NAME = "failover-identity"
INPUT, OUTPUT = "tf-in", "tf-out"


@pytest.mark.slow
def test_failover_loses_no_output(
    guests: Guests, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wasm = guests.wasm("go", "identity")
    cluster = SluiceCluster(tmp_path / "sluice", brokers=3)
    try:
        cluster.start()
        run_scenario(cluster, wasm, capsys)
    except BaseException as exc:
        exc.add_note(cluster.all_logs(40))
        raise
    finally:
        cluster.stop()


def run_scenario(cluster: SluiceCluster, wasm: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    admin = admin_client(cluster.bootstrap)
    for topic in (INPUT, OUTPUT):
        create_topic(
            cluster.bootstrap,
            topic,
            partitions=PARTITIONS,
            replication=REPLICATION,
            config={"min.insync.replicas": "2"},
        )
    addresses = [cluster.broker(i).bootstrap for i in range(cluster.size)]
    transforms = TransformsAdmin(addresses)
    transforms.deploy(NAME, wasm, INPUT, [OUTPUT])
    transforms.wait_state(NAME, "running", partitions=PARTITIONS)

    producer = SteadyProducer(cluster.bootstrap, INPUT, PARTITIONS, rate=RATE).start()
    kills: list[str] = []
    try:
        wait_for(lambda: len(producer.acks) >= RATE, 60, "the first second of acknowledgements")
        for partition in KILLED_PARTITIONS:
            leader = leader_of(admin, INPUT, partition)
            killed_at = time.monotonic()
            cluster.kill(leader)
            ack = producer.wait_ack_after(partition, killed_at, 90)
            wait_out_of_isr(admin, INPUT, partition, leader, 30)
            cluster.start(leader)
            wait_in_isr(admin, INPUT, leader, 120)
            kills.append(
                f"node {leader} (leader of input partition {partition}): new leader acknowledged "
                f"{(ack.acked - killed_at) * 1000:.0f} ms after the kill"
            )
            # the stream keeps flowing for a while after the restart
            more = len(producer.acks) + RATE
            wait_for(lambda n=more: len(producer.acks) >= n, 60, "more acknowledgements")
    finally:
        undelivered = producer.stop()
    assert undelivered == 0, f"{undelivered} records not delivered after flush"
    assert not producer.fatal, producer.fatal
    assert not producer.failed, f"{len(producer.failed)} failed: {producer.failed[:5]}"

    transforms.wait_caught_up(NAME, PARTITIONS, timeout=180)
    inputs, _ = read_partitions(cluster.bootstrap, INPUT, PARTITIONS)
    outputs, _ = read_partitions(cluster.bootstrap, OUTPUT, PARTITIONS)

    acked = {a.seq for a in producer.acks}
    duplicates = 0
    for p in range(PARTITIONS):
        written = [int(v) for _, v in inputs[p]]
        produced = Counter(int(v) for _, v in outputs[p])
        assert acked.issuperset(v for v in written if v in acked)
        missing = [v for v in written if produced[v] == 0]
        assert not missing, (
            f"partition {p}: {len(missing)} of {len(written)} input records have no output, "
            f"first {missing[:5]}"
        )
        extra = set(produced) - set(written)
        assert not extra, f"partition {p}: outputs of records never written: {sorted(extra)[:5]}"
        duplicates += sum(n - 1 for n in produced.values())
    assert acked <= {int(v) for p in range(PARTITIONS) for _, v in inputs[p]}
    # leadership may still move back to the restarted brokers (preferred leaders): their
    # runners start from the committed offsets, which must reach the end of the input
    ends = [len(inputs[p]) for p in range(PARTITIONS)]
    seen: list[dict[str, object]] = []

    def committed_to_end() -> bool:
        nonlocal seen
        seen = transforms.partitions(NAME)
        return [s["committed_offset"] for s in seen] == ends

    try:
        wait_for(committed_to_end, 60, f"committed offsets {ends}")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last seen {seen}") from None

    with capsys.disabled():
        total = sum(ends)
        print(f"\n[transform failover] {total} input records, {len(acked)} acknowledged")
        for line in kills:
            print(f"[transform failover] killed {line}")
        print(
            f"[transform failover] every input record has its output; {duplicates} outputs "
            f"repeated after failover (at least once)"
        )
