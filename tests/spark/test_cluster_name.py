"""format("sluice") given a Sluice cluster name and the control plane's endpoint instead of
``kafka.bootstrap.servers`` and ``sluice.s3.*``: the bootstrap servers and the cluster's
object store come from ``Clusters.GetCluster`` (a control plane started by `cloudctl up`,
its embedded S3, a 1-broker cluster), and tiered segments are still read from the store."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark.control_plane import with_cluster
from spark.options import OptionError, read_options
from spark.planning import TieredSplit, plan
from spark.remote_log import describe_remote_log
from tests.cli.conftest import Cloud
from tests.conftest import REPO, free_port
from tests.controlplane.harness import kill_everything_under, wait_until

CLUSTER = "spark-history"
TOPIC = "events"
PARTITIONS = 2
RECORDS = 3000


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    home = tmp_path_factory.mktemp("spark-cloud")
    running = Cloud(home, f"127.0.0.1:{free_port()}")
    up = running.run("up")
    assert up.returncode == 0, up.stderr
    try:
        yield running
    finally:
        running.run("down")
        assert kill_everything_under(home) == []


@pytest.fixture(scope="module")
def bootstrap(cloud: Cloud) -> str:
    made = cloud.run(
        "create-cluster",
        CLUSTER,
        "--brokers",
        "1",
        "--config",
        "remote.log.manager.task.interval.ms=200",
        "--config",
        "log.retention.check.interval.ms=200",
        "--wait",
    )
    assert made.returncode == 0, made.stderr
    topic = cloud.run(
        "create-topic",
        "--cluster",
        CLUSTER,
        TOPIC,
        "--partitions",
        str(PARTITIONS),
        "--config",
        "remote.storage.enable=true",
        "--config",
        "segment.bytes=20000",
        "--config",
        "local.retention.bytes=40000",
    )
    assert topic.returncode == 0, topic.stderr
    servers = cloud.run("get-bootstrap-brokers", CLUSTER).stdout.strip()
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "batch.size": 4000})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"%d" % i, value=b"%d|" % i + b"x" * 150, partition=i % 2)
        producer.poll(0)
    assert producer.flush(30) == 0

    def tiered() -> bool:
        remote = describe_remote_log(servers, [TOPIC])
        return all(
            (part := remote.of(TOPIC, p)) is not None and len(part.segments) >= 2
            for p in range(PARTITIONS)
        )

    wait_until(tiered, 90, "segments of every partition in the object store")
    return servers


def by_name(cloud: Cloud) -> dict[str, str]:
    return {
        "sluice.cluster": CLUSTER,
        "sluice.controlplane.endpoint": cloud.endpoint,
        "sluice.controlplane.token": (cloud.home / "token").read_text().strip(),
        "subscribe": TOPIC,
    }


def test_a_cluster_name_gives_brokers_and_object_store(
    session: Any, cloud: Cloud, bootstrap: str
) -> None:
    planned = plan(read_options(by_name(cloud), streaming=False))
    tiered = [s for s in planned.splits if isinstance(s, TieredSplit)]
    assert {s.partition for s in tiered} == set(range(PARTITIONS)), planned.splits

    df = session.read.format("sluice").options(**by_name(cloud)).load()
    rows = df.select("key", "value", "partition", "offset").collect()
    assert len(rows) == RECORDS
    for p in range(PARTITIONS):
        offsets = sorted(r["offset"] for r in rows if r["partition"] == p)
        assert offsets == list(range(RECORDS // PARTITIONS))
    assert {r["key"] for r in rows} == {b"%d" % i for i in range(RECORDS)}

    # and writes: rows produced to the cluster by name, read back through its brokers
    written = session.createDataFrame([("w", "written")], "key string, value string")
    target = {k: v for k, v in by_name(cloud).items() if k != "subscribe"}
    written.write.format("sluice").mode("append").options(**target).option("topic", TOPIC).save()
    assert session.read.format("sluice").options(**by_name(cloud)).load().count() == RECORDS + 1


def test_the_endpoint_and_token_default_to_sluice_home(
    cloud: Cloud, bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLUICE_ENDPOINT", raising=False)
    monkeypatch.delenv("SLUICE_TOKEN", raising=False)
    monkeypatch.setenv("SLUICE_HOME", str(cloud.home))
    resolved = with_cluster({"sluice.cluster": CLUSTER})
    assert resolved["kafka.bootstrap.servers"] == bootstrap
    assert resolved["sluice.s3.bucket"]
    assert resolved["sluice.s3.endpoint"].startswith("http://127.0.0.1:")
    # explicit options win
    mine = with_cluster({"sluice.cluster": CLUSTER, "kafka.bootstrap.servers": "10.1.2.3:9092"})
    assert mine["kafka.bootstrap.servers"] == "10.1.2.3:9092"


def test_unknown_cluster_and_unreachable_control_plane_say_what_to_do(cloud: Cloud) -> None:
    options = {**by_name(cloud), "sluice.cluster": "no-such-cluster"}
    with pytest.raises(OptionError, match=r"no cluster 'no-such-cluster'.*list-clusters"):
        read_options(options, streaming=False)
    gone = {
        **by_name(cloud),
        "sluice.controlplane.endpoint": f"127.0.0.1:{free_port()}",
        "sluice.controlplane.timeout.ms": "2000",
    }
    with pytest.raises(OptionError, match="cannot reach the control plane"):
        read_options(gone, streaming=False)


@pytest.mark.slow
def test_the_examples_run_against_a_cluster(cloud: Cloud, bootstrap: str, tmp_path: Path) -> None:
    """spark/examples/ as a user runs them (own Spark, the cluster by name from
    SLUICE_HOME): the backfill reads every record, the streaming job copies the topic and,
    run again, only what arrived in between."""

    def example(name: str, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(REPO / "spark" / "examples" / name), *args],
            env={**cloud.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    where = ("--cluster", CLUSTER, "--topic", TOPIC)
    out = example("backfill.py", *where, "--out", str(tmp_path / "history.parquet"))
    assert "tiered segments" in out
    counts = [int(line.split("|")[2]) for line in out.splitlines() if line.startswith("|0 ")]
    counts += [int(line.split("|")[2]) for line in out.splitlines() if line.startswith("|1 ")]
    assert sum(counts) >= RECORDS

    stream = ("--dir", str(tmp_path / "stream"))
    first = example("streaming.py", *where, *stream)
    total = int(first.split(" new rows")[0].rsplit(" ", 1)[1].replace(",", ""))
    assert total >= RECORDS
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(7):
        producer.produce(TOPIC, value=b"late %d" % i)
    assert producer.flush(30) == 0
    second = example("streaming.py", *where, *stream)
    assert f"{TOPIC}: 7 new rows" in second, second
