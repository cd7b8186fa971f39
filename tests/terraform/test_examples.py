"""terraform/examples/ applied as a user would (its own copy of the module, the password in
TF_VAR_app_password): its cluster runs the module's configuration, tiered and tagged; then
used: a Kafka client (confluent-kafka) bootstraps through the private endpoint the module
outputs, logs in as the module's user (SCRAM over TLS, trusting the cluster's CA) and
produces and consumes through the tiered topic; then the module is destroyed, its
configuration with it. One broker instead of the example's three, to keep it quick.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import configurations_pb2 as fpb
from proto.sluice.v1 import configurations_pb2_grpc
from proto.sluice.v1 import topics_pb2 as tpb
from sluice_client.client import Client
from tests.conftest import REPO
from tests.terraform.harness import Terraform

EXAMPLES = REPO / "terraform" / "examples"
PASSWORD = "example-Secret-4521"
CLUSTER = "tf-example"


def test_the_example_module_gives_a_working_bootstrap_string(
    tf: Terraform, tmp_path: Path, api: Client
) -> None:
    workdir = tmp_path / "example"
    workdir.mkdir()
    for source in EXAMPLES.glob("*.tf"):
        shutil.copy(source, workdir / source.name)
    env = {
        "TF_VAR_cluster_name": CLUSTER,
        "TF_VAR_broker_count": "1",
        "TF_VAR_app_password": PASSWORD,
    }
    applied = tf.apply(workdir, env=env).ok()
    assert PASSWORD not in applied.output
    out = tf.outputs(workdir)
    topic = api.call(
        api.topics.DescribeTopic, tpb.DescribeTopicRequest(cluster=CLUSTER, name="orders")
    )
    assert topic.config["remote.storage.enable"] == "true"
    assert topic.partitions == 6
    cluster = api.call(api.clusters.GetCluster, cpb.GetClusterRequest(name=CLUSTER))
    assert out["cluster_arn"].endswith(f"/{CLUSTER}/{cluster.cluster_id}")
    assert cluster.broker_type == "kafka.m7g.large"
    assert cluster.storage_mode == cpb.STORAGE_MODE_TIERED
    assert dict(cluster.tags) == {"team": "orders", "env": "test"}
    info = cluster.configuration_info
    assert (info.name, info.revision) == (f"{CLUSTER}-brokers", 1)
    assert out["configuration_arn"].startswith(
        f"arn:sluice:kafka:local:configuration/{CLUSTER}-brokers/"
    )
    assert dict(cluster.config) == {
        "auto.create.topics.enable": "false",
        "log.retention.ms": "604800000",
    }

    ca = api.call(api.clusters.GetCaCert, cpb.GetCaCertRequest(name=CLUSTER))
    (tmp_path / "ca.pem").write_text(ca.pem)
    settings = {
        "bootstrap.servers": out["private_endpoint_bootstrap_brokers"],
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": out["app_user"],
        "sasl.password": PASSWORD,
        "ssl.ca.location": str(tmp_path / "ca.pem"),
    }
    values = [f"order-{i}" for i in range(30)]
    producer = Producer({**settings, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(out["topic"], value.encode())
    assert producer.flush(60) == 0
    consumer = Consumer({**settings, "group.id": "orders-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(out["topic"], p, OFFSET_BEGINNING) for p in range(6)])
    got: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                got.append((message.value() or b"").decode())
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)

    assert tf.plan(workdir, "-detailed-exitcode", env=env).returncode == 0
    tf.destroy(workdir, env=env).ok()
    listed = api.call(api.clusters.ListClusters, cpb.ListClustersRequest()).clusters
    assert CLUSTER not in [c.name for c in listed]
    configurations = configurations_pb2_grpc.ConfigurationsStub(api.channel)
    made = api.call(configurations.ListConfigurations, fpb.ListConfigurationsRequest())
    assert [c.name for c in made.configurations] == []
