"""The provider through real Terraform (or OpenTofu) against a real control plane: every
resource created, planned again without a diff, updated in place, refused at plan time,
drifted by cloudctl, imported, replaced on a new name, and destroyed.

One control plane and one working directory (``main``) for the module; the tests run in
order, each from where the previous one left the cluster (a cluster costs seconds, so one
is shared): one broker, then two; modes none and scram; a topic, a second topic for the
transform's output, a topic that is renamed; a SCRAM user with an ACL; a private endpoint; a
WebAssembly transform (Sluice's WAT identity guest, compiled here). Each test has its own
Terraform HOME and CLI configuration (dev_overrides to the venv's console script).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import endpoints_pb2 as epb
from proto.sluice.v1 import endpoints_pb2_grpc, security_pb2_grpc
from proto.sluice.v1 import security_pb2 as spb
from proto.sluice.v1 import topics_pb2 as tpb
from proto.sluice.v1 import transforms_pb2 as xpb
from sluice_client.client import ApiError, Client
from tests.conftest import REPO
from tests.controlplane.harness import ControlPlaneProcess
from tests.support.scram_login import logs_in
from tests.terraform.harness import Terraform, write

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")
PASSWORD = "tf-Secret-Word-6731"
NEW_PASSWORD = "tf-Other-Word-9054"
"""Distinctive, so that a search of the logs for them means something."""
WAT = REPO / "transforms" / "examples" / "wat"


@dataclass(frozen=True)
class Spec:
    """What the ``main`` configuration asks for."""

    cluster: str = "tf-main"
    brokers: int = 1
    cluster_config: dict[str, str] = field(default_factory=lambda: {"log.retention.ms": "7200000"})
    partitions: int = 2
    topic_config: dict[str, str] = field(default_factory=lambda: {"retention.ms": "3600000"})
    scratch: str = "scratch"
    module: str = "identity.wasm"


def hcl_map(values: dict[str, str]) -> str:
    return "{ " + ", ".join(f'"{k}" = "{v}"' for k, v in sorted(values.items())) + " }"


def render(spec: Spec) -> str:
    return f"""
terraform {{
  required_providers {{
    sluice = {{ source = "sluice/sluice" }}
  }}
}}

variable "endpoint" {{
  type    = string
  default = null
}}
variable "token" {{
  type      = string
  default   = null
  sensitive = true
}}
variable "password" {{
  type      = string
  sensitive = true
}}

provider "sluice" {{
  endpoint = var.endpoint
  token    = var.token
}}

resource "sluice_cluster" "main" {{
  name                  = "{spec.cluster}"
  broker_count          = {spec.brokers}
  client_authentication = ["none", "scram"]
  kafka_config          = {hcl_map(spec.cluster_config)}
}}

resource "sluice_topic" "orders" {{
  cluster    = sluice_cluster.main.name
  name       = "orders"
  partitions = {spec.partitions}
  config     = {hcl_map(spec.topic_config)}
}}

resource "sluice_topic" "copies" {{
  cluster    = sluice_cluster.main.name
  name       = "copies"
  partitions = 1
}}

resource "sluice_topic" "scratch" {{
  cluster    = sluice_cluster.main.name
  name       = "{spec.scratch}"
  partitions = 1
}}

resource "sluice_user" "alice" {{
  cluster  = sluice_cluster.main.name
  name     = "alice"
  password = var.password
}}

resource "sluice_acl" "alice_reads" {{
  cluster       = sluice_cluster.main.name
  resource_type = "TOPIC"
  resource_name = sluice_topic.orders.name
  principal     = "User:${{sluice_user.alice.name}}"
  operation     = "READ"
}}

resource "sluice_private_endpoint" "analytics" {{
  cluster               = sluice_cluster.main.name
  name                  = "analytics"
  client_authentication = "scram"
  allowed_principals    = ["User:alice"]
}}

resource "sluice_transform" "copy" {{
  cluster       = sluice_cluster.main.name
  name          = "copy"
  module_file   = "${{path.module}}/{spec.module}"
  input_topic   = sluice_topic.orders.name
  output_topics = [sluice_topic.copies.name]
  env           = {{ "MODE" = "copy" }}
}}

data "sluice_cluster" "main" {{
  name       = sluice_cluster.main.name
  depends_on = [sluice_private_endpoint.analytics] # its creation makes the cluster UPDATING
}}
data "sluice_bootstrap_brokers" "main" {{
  cluster = sluice_cluster.main.name
}}
data "sluice_topic" "orders" {{
  cluster = sluice_cluster.main.name
  name    = sluice_topic.orders.name
}}

output "arn" {{ value = sluice_cluster.main.arn }}
output "bootstrap_brokers" {{ value = sluice_cluster.main.bootstrap_brokers }}
output "bootstrap_brokers_sasl_scram" {{ value = sluice_cluster.main.bootstrap_brokers_sasl_scram }}
output "endpoint_bootstrap" {{ value = sluice_private_endpoint.analytics.bootstrap_brokers }}
output "data_state" {{ value = data.sluice_cluster.main.state }}
output "data_sasl_scram" {{
  value = data.sluice_bootstrap_brokers.main.bootstrap_brokers_sasl_scram
}}
output "data_partitions" {{ value = data.sluice_topic.orders.partitions }}
"""


ADDRESSES = {
    "sluice_cluster.main": "{cluster}",
    "sluice_topic.orders": "{cluster}/orders",
    "sluice_topic.copies": "{cluster}/copies",
    "sluice_topic.scratch": "{cluster}/{scratch}",
    "sluice_user.alice": "{cluster}/alice",
    "sluice_acl.alice_reads": "{cluster}/TOPIC/LITERAL/orders/User:alice/*/READ/ALLOW",
    "sluice_private_endpoint.analytics": "{cluster}/analytics",
    "sluice_transform.copy": "{cluster}/copy",
}
"""Every resource of the configuration and its import id."""


@dataclass
class Main:
    """The module's working directory and what its configuration asks for now."""

    workdir: Path
    spec: Spec

    def write(self, spec: Spec) -> None:
        self.spec = spec
        write(self.workdir, render(spec))

    def env(self, password: str = PASSWORD) -> dict[str, str]:
        return {"TF_VAR_password": password}


@pytest.fixture(scope="module")
def main(tmp_path_factory: pytest.TempPathFactory) -> Main:
    workdir = tmp_path_factory.mktemp("tf-main")
    for name in ("identity", "rp_meta"):
        (workdir / f"{name}.wasm").write_bytes(wasmtime.wat2wasm((WAT / f"{name}.wat").read_text()))
    state = Main(workdir, Spec())
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


def cluster_of(api: Client, name: str) -> cpb.Cluster:
    found: cpb.Cluster = api.call(api.clusters.GetCluster, cpb.GetClusterRequest(name=name))
    return found


def topic_of(api: Client, cluster: str, name: str) -> tpb.Topic | None:
    try:
        found: tpb.Topic = api.call(
            api.topics.DescribeTopic, tpb.DescribeTopicRequest(cluster=cluster, name=name)
        )
    except ApiError as exc:
        if exc.reason_name == "TOPIC_NOT_FOUND":
            return None
        raise
    return found


def acls_of(api: Client, cluster: str) -> list[dict[str, Any]]:
    stub = security_pb2_grpc.AclsStub(api.channel)
    reply = api.call(stub.ListAcls, spb.ListAclsRequest(cluster=cluster, filter=spb.AclFilter()))
    return [
        {
            "resource": (spb.ResourceType.Name(a.resource_type), a.resource_name),
            "principal": a.principal,
            "operation": spb.AclOperation.Name(a.operation),
        }
        for a in reply.acls
    ]


def endpoint_of(api: Client, cluster: str, name: str) -> epb.PrivateEndpoint:
    stub = endpoints_pb2_grpc.EndpointsStub(api.channel)
    found: epb.PrivateEndpoint = api.call(
        stub.GetPrivateEndpoint, epb.GetPrivateEndpointRequest(cluster=cluster, name=name)
    )
    return found


def scram_conf(api: Client, tmp: Path, bootstrap: str, password: str) -> dict[str, str]:
    ca = api.call(api.clusters.GetCaCert, cpb.GetCaCertRequest(name="tf-main"))
    (tmp / "ca.pem").write_text(ca.pem)
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": password,
        "ssl.ca.location": str(tmp / "ca.pem"),
    }


# ---------------------------------------------------------------------- the tests, in order


def test_apply_creates_every_resource(tf: Terraform, main: Main, api: Client) -> None:
    planned = tf.changes(main.workdir, env=main.env())
    assert planned == {address: ["create"] for address in ADDRESSES}
    tf.apply(main.workdir, env=main.env()).ok()

    cluster = cluster_of(api, "tf-main")
    assert cluster.state == cpb.CLUSTER_STATE_ACTIVE
    assert (cluster.broker_count, list(cluster.client_auth)) == (
        1,
        [cpb.CLIENT_AUTH_NONE, cpb.CLIENT_AUTH_SCRAM],
    )
    assert dict(cluster.config) == {"log.retention.ms": "7200000"}
    orders = topic_of(api, "tf-main", "orders")
    assert orders is not None
    assert (orders.partitions, dict(orders.config)) == (2, {"retention.ms": "3600000"})
    users = security_pb2_grpc.UsersStub(api.channel)
    listed = api.call(users.ListUsers, spb.ListUsersRequest(cluster="tf-main")).users
    assert [(u.name, [c.mechanism for c in u.credentials]) for u in listed] == [
        ("alice", [spb.SCRAM_SHA_512]),
        ("sluice-internal", [spb.SCRAM_SHA_512]),  # the brokers' own (a secured cluster)
    ]
    assert acls_of(api, "tf-main") == [
        {
            "resource": ("RESOURCE_TYPE_TOPIC", "orders"),
            "principal": "User:alice",
            "operation": "ACL_OPERATION_READ",
        }
    ]
    endpoint = endpoint_of(api, "tf-main", "analytics")
    assert endpoint.state == epb.PRIVATE_ENDPOINT_STATE_ACTIVE
    assert list(endpoint.allowed_principals) == ["User:alice"]
    transforms = api.call(
        api.transforms.ListTransforms, xpb.ListTransformsRequest(cluster="tf-main")
    ).transforms
    module = (main.workdir / "identity.wasm").read_bytes()
    assert [(t.name, t.input_topic, list(t.output_topics), dict(t.env)) for t in transforms] == [
        ("copy", "orders", ["copies"], {"MODE": "copy"})
    ]
    assert transforms[0].module_sha256 == hashlib.sha256(module).hexdigest()

    out = tf.outputs(main.workdir)
    assert out["arn"] == f"arn:sluice:kafka:local:cluster/tf-main/{cluster.cluster_id}"
    assert out["bootstrap_brokers"] == cluster.bootstrap_brokers
    assert out["bootstrap_brokers_sasl_scram"] == out["data_sasl_scram"] != ""
    assert out["endpoint_bootstrap"] == endpoint.bootstrap_brokers
    assert (out["data_state"], out["data_partitions"]) == ("ACTIVE", 2)


def test_a_plan_after_apply_shows_no_changes(tf: Terraform, main: Main) -> None:
    plan = tf.plan(main.workdir, "-detailed-exitcode", env=main.env())
    assert plan.returncode == 0, plan.output
    assert "No changes." in plan.stdout


def test_broker_count_partitions_and_settings_change_in_place(
    tf: Terraform, main: Main, api: Client
) -> None:
    main.write(
        replace(
            main.spec,
            brokers=2,
            partitions=3,
            cluster_config={"log.retention.ms": "3600000"},
            topic_config={"retention.ms": "7200000", "cleanup.policy": "delete"},
        )
    )
    planned = tf.changes(main.workdir, env=main.env())
    assert planned == {"sluice_cluster.main": ["update"], "sluice_topic.orders": ["update"]}
    tf.apply(main.workdir, env=main.env()).ok()

    cluster = cluster_of(api, "tf-main")
    assert (cluster.state, len(cluster.brokers), dict(cluster.config)) == (
        cpb.CLUSTER_STATE_ACTIVE,
        2,
        {"log.retention.ms": "3600000"},
    )
    orders = topic_of(api, "tf-main", "orders")
    assert orders is not None
    assert (orders.partitions, dict(orders.config)) == (
        3,
        {"retention.ms": "7200000", "cleanup.policy": "delete"},
    )
    assert tf.outputs(main.workdir)["bootstrap_brokers"] == cluster.bootstrap_brokers
    assert len(cluster.bootstrap_brokers.split(",")) == 2
    # nothing to change; the endpoint's bootstrap string (a listener on the new broker too)
    # is refreshed from the API, as a change made outside Terraform
    assert tf.changes(main.workdir, env=main.env()) == {}
    endpoint = endpoint_of(api, "tf-main", "analytics")
    assert len(endpoint.bootstrap_brokers.split(",")) == 2
    tf.apply(main.workdir, "-refresh-only", env=main.env()).ok()
    assert tf.outputs(main.workdir)["endpoint_bootstrap"] == endpoint.bootstrap_brokers
    assert tf.plan(main.workdir, "-detailed-exitcode", env=main.env()).returncode == 0


def test_fewer_partitions_are_refused_when_planning(tf: Terraform, main: Main, api: Client) -> None:
    applied = main.spec
    main.write(replace(applied, partitions=2))
    try:
        plan = tf.plan(main.workdir, env=main.env())
        assert plan.returncode == 1, plan.output
        assert "partitions cannot shrink from 3 to 2" in plan.stderr
        assert "Kafka cannot remove partitions" in plan.stderr
        orders = topic_of(api, "tf-main", "orders")
        assert orders is not None
        assert orders.partitions == 3
    finally:
        main.write(applied)


def test_changes_made_with_cloudctl_show_as_drift(
    tf: Terraform, main: Main, plane: ControlPlaneProcess, api: Client
) -> None:
    cloudctl(plane, "alter-topic-config", "--cluster", "tf-main", "orders", "--config",
             "retention.ms=1000")  # fmt: skip
    cloudctl(plane, "update-cluster-config", "tf-main", "--config", "log.retention.ms=1000",
             "--wait")  # fmt: skip
    cloudctl(plane, "delete-acl", "--cluster", "tf-main", "--topic", "orders", "--principal",
             "User:alice", "--operation", "read", "--yes")  # fmt: skip
    cloudctl(plane, "delete-topic", "--cluster", "tf-main", "scratch", "--yes")

    planned = tf.changes(main.workdir, env=main.env())
    assert planned == {
        "sluice_cluster.main": ["update"],
        "sluice_topic.orders": ["update"],
        "sluice_acl.alice_reads": ["create"],
        "sluice_topic.scratch": ["create"],
    }
    tf.apply(main.workdir, env=main.env()).ok()
    assert dict(cluster_of(api, "tf-main").config) == {"log.retention.ms": "3600000"}
    orders = topic_of(api, "tf-main", "orders")
    assert orders is not None
    assert orders.config["retention.ms"] == "7200000"
    assert len(acls_of(api, "tf-main")) == 1
    assert topic_of(api, "tf-main", "scratch") is not None
    assert tf.plan(main.workdir, "-detailed-exitcode", env=main.env()).returncode == 0


def test_every_resource_imports(tf: Terraform, main: Main, tmp_path: Path) -> None:
    """Into a second working directory with the same configuration: the imported state is
    the one Terraform made, but for what the API cannot give back: the user's password (set
    again by an update) and the transform's module path (recorded by an update that deploys
    nothing, the module's hash being the same)."""
    other = write(tmp_path / "imported", render(main.spec))
    for name in ("identity.wasm", "rp_meta.wasm"):
        (other / name).write_bytes((main.workdir / name).read_bytes())
    fields = {"cluster": main.spec.cluster, "scratch": main.spec.scratch}
    for address, id_ in ADDRESSES.items():
        tf.run(other, "import", "-no-color", address, id_.format(**fields), env=main.env()).ok()

    assert tf.changes(other, env=main.env()) == {
        "sluice_user.alice": ["update"],
        "sluice_transform.copy": ["update"],
    }
    made, imported = tf.state(main.workdir), tf.state(other)
    unread = ("timeouts", "password", "module_file", "state")
    for address in ADDRESSES:
        expected = {k: v for k, v in made[address].items() if k not in unread}
        got = {k: v for k, v in imported[address].items() if k not in unread}
        assert got == expected, address
    tf.apply(other, env=main.env()).ok()
    assert tf.plan(other, "-detailed-exitcode", env=main.env()).returncode == 0


def test_a_new_topic_name_replaces_the_topic(tf: Terraform, main: Main, api: Client) -> None:
    main.write(replace(main.spec, scratch="scratch-2"))
    assert tf.changes(main.workdir, env=main.env()) == {
        "sluice_topic.scratch": ["delete", "create"]
    }
    tf.apply(main.workdir, env=main.env()).ok()
    assert topic_of(api, "tf-main", "scratch") is None
    assert topic_of(api, "tf-main", "scratch-2") is not None


def test_a_new_module_redeploys_the_transform(tf: Terraform, main: Main, api: Client) -> None:
    """The module's hash is read at plan time: new bytes in the same file are an update."""
    (main.workdir / "identity.wasm").write_bytes((main.workdir / "rp_meta.wasm").read_bytes())
    assert tf.changes(main.workdir, env=main.env()) == {"sluice_transform.copy": ["update"]}
    tf.apply(main.workdir, env=main.env()).ok()
    transforms = api.call(
        api.transforms.ListTransforms, xpb.ListTransformsRequest(cluster="tf-main")
    ).transforms
    digest = hashlib.sha256((main.workdir / "rp_meta.wasm").read_bytes()).hexdigest()
    assert [(t.name, t.module_sha256, t.version) for t in transforms] == [("copy", digest, 2)]
    assert tf.plan(main.workdir, "-detailed-exitcode", env=main.env()).returncode == 0


def test_passwords_and_tokens_stay_out_of_plans_and_logs(
    tf: Terraform, main: Main, plane: ControlPlaneProcess, api: Client, tmp_path: Path
) -> None:
    """A new password, applied with the provider's endpoint and token given as variables
    (not SLUICE_HOME) and TF_LOG=TRACE: neither the password nor the token is in Terraform's
    output or its log; the user logs in with the new password only."""
    log = tmp_path / "trace.log"
    env = {
        **main.env(NEW_PASSWORD),
        "TF_VAR_endpoint": plane.endpoint,
        "TF_VAR_token": plane.token,
        "TF_LOG": "TRACE",
        "TF_LOG_PATH": str(log),
    }
    drop = ("SLUICE_HOME", "SLUICE_ENDPOINT")
    plan = tf.plan(main.workdir, env=env, drop=drop).ok()
    assert re.search(r"password\s+= \(sensitive value\)", plan.stdout), plan.stdout
    assert "1 to change" in plan.stdout
    applied = tf.apply(main.workdir, env=env, drop=drop).ok()
    logged = log.read_text()
    assert "sluice: sluice_user tf-main/alice: update" in logged, "the provider logs there"
    for secret in (PASSWORD, NEW_PASSWORD, plane.token):
        for text in (plan.output, applied.output, logged):
            assert secret not in text

    bootstrap = tf.outputs(main.workdir)["bootstrap_brokers_sasl_scram"]
    assert logs_in(scram_conf(api, tmp_path, bootstrap, NEW_PASSWORD))
    assert not logs_in(scram_conf(api, tmp_path, bootstrap, PASSWORD))
    main_env = main.env(NEW_PASSWORD)
    assert tf.plan(main.workdir, "-detailed-exitcode", env=main_env).returncode == 0


def test_timeouts_bound_the_wait_for_active(tf: Terraform, tmp_path: Path, api: Client) -> None:
    """A create deadline of 0s: the cluster is still CREATING when it passes; the error says
    so, the resource is kept (tainted) and destroy removes it."""
    workdir = write(
        tmp_path / "slow",
        """
terraform {
  required_providers {
    sluice = { source = "sluice/sluice" }
  }
}
resource "sluice_cluster" "slow" {
  name         = "tf-slow"
  broker_count = 1
  timeouts {
    create = "0s"
  }
}
""",
    )
    applied = tf.apply(workdir)
    assert applied.returncode == 1, applied.output
    assert "Cluster 'tf-slow': still CREATING after 0s (timeouts.create)" in applied.stderr
    state = json.loads((workdir / "terraform.tfstate").read_text())
    assert [i["status"] for r in state["resources"] for i in r["instances"]] == ["tainted"]
    tf.destroy(workdir).ok()
    with pytest.raises(ApiError) as gone:
        cluster_of(api, "tf-slow")
    assert gone.value.reason_name == "CLUSTER_NOT_FOUND"


def test_a_new_cluster_name_replaces_it_and_destroy_removes_everything(
    tf: Terraform, main: Main, api: Client
) -> None:
    old = cluster_of(api, "tf-main")
    main.write(replace(main.spec, cluster="tf-renamed"))
    planned = tf.changes(main.workdir, env=main.env(NEW_PASSWORD))
    assert planned == {address: ["delete", "create"] for address in ADDRESSES}
    tf.apply(main.workdir, env=main.env(NEW_PASSWORD)).ok()
    with pytest.raises(ApiError) as gone:
        cluster_of(api, "tf-main")
    assert gone.value.reason_name == "CLUSTER_NOT_FOUND"
    renamed = cluster_of(api, "tf-renamed")
    assert renamed.state == cpb.CLUSTER_STATE_ACTIVE
    assert renamed.cluster_id != old.cluster_id
    assert not any(Path(b.data_dir).exists() for b in old.brokers)

    tf.destroy(main.workdir, env=main.env(NEW_PASSWORD)).ok()
    listed = api.call(api.clusters.ListClusters, cpb.ListClustersRequest()).clusters
    assert [c.name for c in listed] == []
    assert not any(Path(b.data_dir).exists() for b in renamed.brokers)
    assert not any(_alive(b.pid) for b in renamed.brokers)
    assert tf.state(main.workdir) == {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
