"""Configurations, tags and storage mode through real Terraform (or OpenTofu) against a real
control plane: a ``sluice_configuration`` (server_properties as an AWS-style heredoc) and a
LOCAL 1-broker cluster that starts with its revision and carries tags; tags changed in place
with no restart and drifted by ``cloudctl tag-cluster``; a new storage mode planned as a
replacement; new settings making the next revision, to which the cluster moves in place (its
broker reports the setting through Kafka's DescribeConfigs); import of both; a configuration
still used that destroy refuses; the configuration_info block that cannot be removed; a new
configuration name (create_before_destroy) that the cluster follows.

One control plane, one cluster and one working directory (``work``) for the module: the
tests run in order, each from where the previous one left them. Every apply is followed by
a plan that shows no changes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import configurations_pb2 as fpb
from proto.sluice.v1 import configurations_pb2_grpc
from sluice_client.client import ApiError, Client
from tests.controlplane.harness import ControlPlaneProcess
from tests.terraform.harness import Terraform, write

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")
CLUSTER = "tf-local"
CONFIGURATION = "tf-retention"
FIRST = "# kept short: this is a test\nlog.retention.ms = 3600000\nmessage.max.bytes = 2000000\n"
SECOND = "log.retention.ms = 7200000\nmessage.max.bytes = 2000000\n"
SECOND_AGAIN = "message.max.bytes=2000000\n\n  log.retention.ms : 7200000\n"
"""The settings of SECOND, written otherwise: no new revision."""


@dataclass(frozen=True)
class Spec:
    properties: str = FIRST
    description: str = "one hour"
    storage_mode: str = "LOCAL"
    tags: dict[str, str] = field(default_factory=lambda: {"team": "data", "env": "test"})
    with_info: bool = True
    configuration: str = CONFIGURATION


def hcl_map(values: dict[str, str]) -> str:
    return "{ " + ", ".join(f'"{k}" = "{v}"' for k, v in sorted(values.items())) + " }"


def render(spec: Spec) -> str:
    info = (
        """
  configuration_info {
    arn      = sluice_configuration.retention.arn
    revision = sluice_configuration.retention.latest_revision
  }"""
        if spec.with_info
        else ""
    )
    return f"""
terraform {{
  required_providers {{
    sluice = {{ source = "sluice/sluice" }}
  }}
}}

resource "sluice_configuration" "retention" {{
  name              = "{spec.configuration}"
  description       = "{spec.description}"
  server_properties = <<PROPERTIES
{spec.properties}PROPERTIES

  lifecycle {{
    create_before_destroy = true # a new name: the cluster moves before the old one goes
  }}
}}

resource "sluice_cluster" "local" {{
  name         = "{CLUSTER}"
  broker_count = 1
  storage_mode = "{spec.storage_mode}"
  tags         = {hcl_map(spec.tags)}
{info}
}}

data "sluice_configuration" "retention" {{
  name       = sluice_configuration.retention.name
  depends_on = [sluice_configuration.retention]
}}
data "sluice_cluster" "local" {{
  name       = sluice_cluster.local.name
  depends_on = [sluice_cluster.local]
}}

output "latest_revision" {{ value = data.sluice_configuration.retention.latest_revision }}
output "data_properties" {{ value = data.sluice_configuration.retention.server_properties }}
output "data_tags" {{ value = data.sluice_cluster.local.tags }}
output "data_storage_mode" {{ value = data.sluice_cluster.local.storage_mode }}
output "bootstrap_brokers" {{ value = sluice_cluster.local.bootstrap_brokers }}
"""


@dataclass
class Work:
    workdir: Path
    spec: Spec

    def write(self, spec: Spec) -> None:
        self.spec = spec
        write(self.workdir, render(spec))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Work:
    state = Work(tmp_path_factory.mktemp("tf-configurations"), Spec())
    state.write(Spec())
    return state


def cloudctl(plane: ControlPlaneProcess, *args: str) -> str:
    done = subprocess.run(
        [CLOUDCTL, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "SLUICE_HOME": str(plane.home), "SLUICE_ENDPOINT": plane.endpoint},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return done.stdout


def cluster_of(api: Client) -> cpb.Cluster:
    found: cpb.Cluster = api.call(api.clusters.GetCluster, cpb.GetClusterRequest(name=CLUSTER))
    return found


def configuration_of(
    api: Client, name: str = CONFIGURATION, revision: int = 0
) -> fpb.Configuration:
    stub = configurations_pb2_grpc.ConfigurationsStub(api.channel)
    request = fpb.GetConfigurationRequest(name=name, revision=revision)
    found: fpb.Configuration = api.call(stub.GetConfiguration, request)
    return found


def broker_setting(bootstrap: str, key: str) -> str:
    """The value broker 0 reports for ``key`` (Kafka's DescribeConfigs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return str(entries[key].value)


def pids(api: Client) -> list[int]:
    return [b.pid for b in cluster_of(api).brokers]


def no_changes(tf: Terraform, workdir: Path) -> None:
    plan = tf.plan(workdir, "-detailed-exitcode")
    assert plan.returncode == 0, plan.output
    assert "No changes." in plan.stdout


# ---------------------------------------------------------------------- the tests, in order


def test_a_local_cluster_starts_with_a_configuration_revision_and_tags(
    tf: Terraform, work: Work, api: Client
) -> None:
    assert tf.changes(work.workdir) == {
        "sluice_configuration.retention": ["create"],
        "sluice_cluster.local": ["create"],
    }
    tf.apply(work.workdir).ok()

    configuration = configuration_of(api)
    assert (configuration.latest_revision, configuration.description) == (1, "one hour")
    settings = {"log.retention.ms": "3600000", "message.max.bytes": "2000000"}
    assert dict(configuration.server_properties) == settings
    assert list(configuration.clusters) == [CLUSTER]
    cluster = cluster_of(api)
    assert cluster.storage_mode == cpb.STORAGE_MODE_LOCAL
    assert not cluster.object_store.bucket, "a LOCAL cluster has no bucket"
    assert dict(cluster.tags) == {"team": "data", "env": "test"}
    assert (cluster.configuration_info.name, cluster.configuration_info.revision) == (
        CONFIGURATION,
        1,
    )
    assert dict(cluster.config) == settings
    assert broker_setting(cluster.bootstrap_brokers, "log.retention.ms") == "3600000"

    state = tf.state(work.workdir)
    made = state["sluice_cluster.local"]
    assert made["configuration_info"] == {"arn": configuration.arn, "name": None, "revision": 1}
    assert made["kafka_config"] is None, "the revision's settings are not given apart"
    assert state["sluice_configuration.retention"]["server_properties"] == FIRST
    out = tf.outputs(work.workdir)
    assert out["latest_revision"] == 1
    assert out["data_properties"] == ("log.retention.ms = 3600000\nmessage.max.bytes = 2000000\n")
    assert (out["data_tags"], out["data_storage_mode"]) == (dict(cluster.tags), "LOCAL")
    no_changes(tf, work.workdir)


def test_tags_change_in_place_and_nothing_restarts(tf: Terraform, work: Work, api: Client) -> None:
    before = pids(api)
    work.write(replace(work.spec, tags={"team": "platform", "cost-center": "42"}))
    assert tf.changes(work.workdir) == {"sluice_cluster.local": ["update"]}
    tf.apply(work.workdir).ok()
    cluster = cluster_of(api)
    assert dict(cluster.tags) == {"team": "platform", "cost-center": "42"}
    assert pids(api) == before, "a broker restarted for a tag"
    assert cluster.state == cpb.CLUSTER_STATE_ACTIVE
    no_changes(tf, work.workdir)


def test_tags_changed_with_cloudctl_show_as_drift(
    tf: Terraform, work: Work, plane: ControlPlaneProcess, api: Client
) -> None:
    cloudctl(plane, "tag-cluster", CLUSTER, "--tag", "owner=someone", "--remove", "team")
    assert dict(cluster_of(api).tags) == {"cost-center": "42", "owner": "someone"}
    plan = tf.plan(work.workdir)
    assert plan.returncode == 0, plan.output
    assert re.search(r'"owner"\s+= "someone" -> null', plan.stdout), plan.stdout
    assert tf.changes(work.workdir) == {"sluice_cluster.local": ["update"]}
    tf.apply(work.workdir).ok()
    assert dict(cluster_of(api).tags) == {"team": "platform", "cost-center": "42"}
    no_changes(tf, work.workdir)


def test_a_new_storage_mode_is_planned_as_a_replacement(tf: Terraform, work: Work) -> None:
    applied = work.spec
    work.write(replace(applied, storage_mode="TIERED"))
    try:
        assert tf.changes(work.workdir) == {"sluice_cluster.local": ["delete", "create"]}
        plan = tf.plan(work.workdir)
        assert re.search(
            r'~ storage_mode\s+= "LOCAL" -> "TIERED" # forces replacement', plan.stdout
        ), plan.stdout
    finally:
        work.write(applied)
    work.write(replace(applied, storage_mode="FAST"))
    try:
        refused = tf.plan(work.workdir)
        assert refused.returncode == 1, refused.output
        assert "Unknown storage_mode 'FAST'" in refused.stderr
    finally:
        work.write(applied)
    no_changes(tf, work.workdir)


def test_new_settings_make_a_revision_the_cluster_moves_to_in_place(
    tf: Terraform, work: Work, api: Client
) -> None:
    cluster_id = cluster_of(api).cluster_id
    work.write(replace(work.spec, properties=SECOND, description="two hours"))
    assert tf.changes(work.workdir) == {
        "sluice_configuration.retention": ["update"],
        "sluice_cluster.local": ["update"],
    }
    tf.apply(work.workdir).ok()

    latest = configuration_of(api)
    assert (latest.latest_revision, latest.description) == (2, "two hours")
    first = configuration_of(api, revision=1)
    assert first.server_properties["log.retention.ms"] == "3600000", "revisions never change"
    cluster = cluster_of(api)
    assert cluster.cluster_id == cluster_id, "moved in place, not replaced"
    assert cluster.configuration_info.revision == 2
    assert dict(cluster.config) == {"log.retention.ms": "7200000", "message.max.bytes": "2000000"}
    assert broker_setting(cluster.bootstrap_brokers, "log.retention.ms") == "7200000"
    assert tf.outputs(work.workdir)["latest_revision"] == 2
    no_changes(tf, work.workdir)

    # the same settings written otherwise: the text is recorded, no revision is made
    work.write(replace(work.spec, properties=SECOND_AGAIN))
    assert tf.changes(work.workdir) == {"sluice_configuration.retention": ["update"]}
    tf.apply(work.workdir).ok()
    assert configuration_of(api).latest_revision == 2
    no_changes(tf, work.workdir)


def test_both_import(tf: Terraform, work: Work, tmp_path: Path) -> None:
    """By their names, into a second working directory whose text is the canonical one
    (`key = value` lines sorted): the state is the one Terraform made, and nothing changes."""
    other = write(tmp_path / "imported", render(replace(work.spec, properties=SECOND)))
    tf.run(other, "import", "-no-color", "sluice_configuration.retention", CONFIGURATION).ok()
    tf.run(other, "import", "-no-color", "sluice_cluster.local", CLUSTER).ok()
    assert tf.changes(other) == {}
    made, imported = tf.state(work.workdir), tf.state(other)
    for address in ("sluice_configuration.retention", "sluice_cluster.local"):
        expected = {k: v for k, v in made[address].items() if k not in ("server_properties",)}
        got = {k: v for k, v in imported[address].items() if k not in ("server_properties",)}
        assert got == expected, address
    assert imported["sluice_configuration.retention"]["server_properties"] == SECOND
    missing = tf.run(other, "import", "-no-color", "sluice_configuration.other", "nope")
    assert missing.returncode == 1


def test_a_configuration_in_use_is_not_destroyed_and_a_move_outside_is_drift(
    tf: Terraform, work: Work, plane: ControlPlaneProcess, api: Client, tmp_path: Path
) -> None:
    """A second configuration with the cluster's settings (a move to it restarts nothing):
    cloudctl moves the cluster to it; its destroy is refused, naming the cluster; the main
    plan moves the cluster back; then it is destroyed."""
    spare = write(
        tmp_path / "spare",
        """
terraform {
  required_providers {
    sluice = { source = "sluice/sluice" }
  }
}
resource "sluice_configuration" "spare" {
  name              = "tf-spare"
  server_properties = <<-PROPERTIES
    log.retention.ms = 7200000
    message.max.bytes = 2000000
  PROPERTIES
}
""",
    )
    tf.apply(spare).ok()
    no_changes(tf, spare)
    cloudctl(plane, "update-cluster-config", CLUSTER, "--configuration", "tf-spare:1", "--wait")

    refused = tf.destroy(spare)
    assert refused.returncode == 1, refused.output
    text = " ".join(refused.stderr.split())
    assert "Configuration 'tf-spare' cannot be deleted" in text
    assert CLUSTER in text
    assert "move those clusters to another configuration" in text
    assert configuration_of(api, "tf-spare").clusters == [CLUSTER]

    assert tf.changes(work.workdir) == {"sluice_cluster.local": ["update"]}
    tf.apply(work.workdir).ok()
    info = cluster_of(api).configuration_info
    assert (info.name, info.revision) == (CONFIGURATION, 2)
    no_changes(tf, work.workdir)
    tf.destroy(spare).ok()
    with pytest.raises(ApiError) as gone:
        configuration_of(api, "tf-spare")
    assert gone.value.reason_name == "CONFIGURATION_NOT_FOUND"


def test_the_configuration_info_block_cannot_be_removed(tf: Terraform, work: Work) -> None:
    applied = work.spec
    work.write(replace(applied, with_info=False))
    try:
        plan = tf.plan(work.workdir)
        assert plan.returncode == 1, plan.output
        text = " ".join(plan.stderr.split())
        assert f"Cluster '{CLUSTER}' cannot leave its configuration" in text
        assert "keep a `configuration_info` block" in text
    finally:
        work.write(applied)


def test_a_new_name_replaces_the_configuration_after_the_cluster_moved_to_it(
    tf: Terraform, work: Work, api: Client
) -> None:
    """With create_before_destroy, as for aws_msk_configuration: the new configuration is
    made, the cluster moves to it (the same settings: nothing restarts), then the old one is
    deleted."""
    before = pids(api)
    work.write(replace(work.spec, configuration="tf-retention-2"))
    assert tf.changes(work.workdir) == {
        "sluice_configuration.retention": ["create", "delete"],
        "sluice_cluster.local": ["update"],
    }
    tf.apply(work.workdir).ok()
    info = cluster_of(api).configuration_info
    assert (info.name, info.revision) == ("tf-retention-2", 1)
    assert pids(api) == before
    with pytest.raises(ApiError) as gone:
        configuration_of(api, CONFIGURATION)
    assert gone.value.reason_name == "CONFIGURATION_NOT_FOUND"
    no_changes(tf, work.workdir)


def test_destroy_removes_the_cluster_then_the_configuration(
    tf: Terraform, work: Work, api: Client
) -> None:
    tf.destroy(work.workdir).ok()
    with pytest.raises(ApiError) as gone:
        cluster_of(api)
    assert gone.value.reason_name == "CLUSTER_NOT_FOUND"
    stub = configurations_pb2_grpc.ConfigurationsStub(api.channel)
    listed = api.call(stub.ListConfigurations, fpb.ListConfigurationsRequest())
    assert list(listed.configurations) == []
    assert tf.state(work.workdir) == {}
