"""format("sluice") given a Sluice cluster name and the control plane's endpoint instead of
``kafka.bootstrap.servers`` and ``sluice.s3.*``: the bootstrap servers and the cluster's
object store come from ``Clusters.GetCluster`` (a control plane started by `cloudctl up`,
its embedded S3, a 1-broker cluster), and tiered segments are still read from the store."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from spark.control_plane import with_cluster
from spark.options import OptionError, read_options
from spark.planning import TieredSplit, plan
from spark.remote_log import describe_remote_log
from tests.cli.conftest import Cloud, running_cloud
from tests.conftest import REPO, free_port
from tests.controlplane.harness import wait_until

pytestmark = pytest.mark.timeout(600)  # a cluster with tiered history, then Spark

CLUSTER = "spark-history"
TOPIC = "events"
PARTITIONS = 2
RECORDS = 3000


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    with running_cloud(tmp_path_factory.mktemp("spark-cloud")) as running:
        yield running


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
    """The shared client's errors, told apart by their reason, become OptionErrors."""
    options = {**by_name(cloud), "sluice.cluster": "no-such-cluster"}
    with pytest.raises(OptionError) as unknown:
        read_options(options, streaming=False)
    assert str(unknown.value) == (
        f"sluice.cluster: no cluster 'no-such-cluster' at the control plane {cloud.endpoint} "
        "(`cloudctl list-clusters` lists them)"
    )
    gone_endpoint = f"127.0.0.1:{free_port()}"
    gone = {
        **by_name(cloud),
        "sluice.controlplane.endpoint": gone_endpoint,
        "sluice.controlplane.timeout.ms": "2000",
    }
    with pytest.raises(OptionError) as unreachable:
        read_options(gone, streaming=False)
    assert str(unreachable.value).startswith(
        f"sluice.cluster: cannot reach the control plane at {gone_endpoint} ("
    )
    assert str(unreachable.value).endswith(
        "is it running (`cloudctl status`)? sluice.controlplane.endpoint sets another address"
    )
    wrong = {**by_name(cloud), "sluice.controlplane.token": "not-the-token"}
    with pytest.raises(OptionError) as refused:
        read_options(wrong, streaming=False)
    assert str(refused.value) == (
        f"sluice.cluster: the control plane at {cloud.endpoint} refused the API token "
        "(sluice.controlplane.token, SLUICE_TOKEN or SLUICE_HOME/token)"
    )


def test_options_win_over_the_environment(
    cloud: Cloud, bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As cloudctl: given options first, then SLUICE_ENDPOINT / SLUICE_TOKEN, then the files
    of SLUICE_HOME (the shared client's lookup)."""
    monkeypatch.setenv("SLUICE_ENDPOINT", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("SLUICE_TOKEN", "not-the-token")
    resolved = with_cluster({k: v for k, v in by_name(cloud).items() if k.startswith("sluice.")})
    assert resolved["kafka.bootstrap.servers"] == bootstrap
    monkeypatch.setenv("SLUICE_HOME", str(cloud.home / "nowhere"))
    monkeypatch.delenv("SLUICE_ENDPOINT")
    monkeypatch.delenv("SLUICE_TOKEN")
    with pytest.raises(OptionError, match="no control plane endpoint"):
        with_cluster({"sluice.cluster": CLUSTER})
    token_only = {"sluice.cluster": CLUSTER, "sluice.controlplane.endpoint": cloud.endpoint}
    with pytest.raises(OptionError, match=r"no API token .*nowhere/token"):
        with_cluster(token_only)


def example(name: str) -> Any:
    """A module of spark/examples/ (scripts, not a package)."""
    path = REPO / "spark" / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sluice_example_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_examples_run_against_a_cluster(
    session: Any, cloud: Cloud, bootstrap: str, tmp_path: Path
) -> None:
    """spark/examples/'s jobs on this cluster (by name; the scripts' main() only adds a
    SparkSession and the SLUICE_HOME defaults tested above): the backfill reads every
    record, the streaming job copies the topic and, run again, only what arrived since."""
    rows = example("backfill").backfill(session, by_name(cloud), str(tmp_path / "history"))
    assert [r["partition"] for r in rows] == list(range(PARTITIONS))
    assert all(r["first_offset"] == 0 for r in rows)
    total = sum(r["records"] for r in rows)
    assert total >= RECORDS
    assert session.read.parquet(str(tmp_path / "history")).count() == total

    streaming = example("streaming")
    assert streaming.stream_once(session, by_name(cloud), tmp_path / "stream", 1000) == total
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(7):
        producer.produce(TOPIC, value=b"late %d" % i)
    assert producer.flush(30) == 0
    assert streaming.stream_once(session, by_name(cloud), tmp_path / "stream", 1000) == 7
