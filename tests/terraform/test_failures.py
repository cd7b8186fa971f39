"""Failures through real Terraform, as diagnostics that say what to do: a cluster whose
brokers cannot start (FAILED, with the control plane's message; kept tainted, then
destroyed), a refused token, no control plane, a TLS CA for a plaintext control plane, and
values refused before anything is asked of the API.

The module's control plane gives a broker 1 ms to answer and one attempt: every cluster it
creates turns FAILED.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from proto.sluice.v1 import clusters_pb2 as cpb
from sluice_client.client import ApiError, Client
from tests.controlplane.harness import ControlPlaneProcess, running_control_plane
from tests.support.tls import TestCA
from tests.terraform.harness import Terraform, write
from tests.terraform.tls_proxy import TlsProxy

HEADER = """
terraform {
  required_providers {
    sluice = { source = "sluice/sluice" }
  }
}
"""


@pytest.fixture(scope="module")
def plane(
    tmp_path_factory: pytest.TempPathFactory, terraform_bin: Path
) -> Iterator[ControlPlaneProcess]:
    settings = {"broker.ready.timeout.ms": "1", "broker.start.attempts": "1"}
    with running_control_plane(tmp_path_factory.mktemp("tf-failing"), settings) as running:
        yield running


def test_a_cluster_that_fails_to_start_is_an_error_with_the_control_planes_message(
    tf: Terraform, tmp_path: Path, api: Client
) -> None:
    workdir = write(
        tmp_path / "doomed",
        HEADER + 'resource "sluice_cluster" "doomed" {\n  name = "doomed"\n  broker_count = 1\n}\n',
    )
    applied = tf.apply(workdir)
    assert applied.returncode == 1, applied.output
    assert "Error: Cluster 'doomed' FAILED: broker 0 did not answer" in applied.stderr
    assert "within 1 ms" in applied.stderr
    assert "the next apply replaces it" in applied.stderr.replace("\n", " ")
    state = json.loads((workdir / "terraform.tfstate").read_text())
    instances = [i for r in state["resources"] for i in r["instances"]]
    assert [(i["status"], i["attributes"]["state"]) for i in instances] == [("tainted", "FAILED")]

    plan = tf.plan(workdir)
    # "so must be" (Terraform), "so it must be" (OpenTofu)
    assert re.search(r"doomed is tainted, so (it )?must be replaced", plan.stdout), plan.output
    tf.destroy(workdir).ok()
    with pytest.raises(ApiError) as gone:
        api.call(api.clusters.GetCluster, cpb.GetClusterRequest(name="doomed"))
    assert gone.value.reason_name == "CLUSTER_NOT_FOUND"


READ_CLUSTER = (
    HEADER
    + """
variable "endpoint" {
  type    = string
  default = null
}
variable "token" {
  type      = string
  default   = null
  sensitive = true
}
variable "ca_file" {
  type    = string
  default = null
}
provider "sluice" {
  endpoint = var.endpoint
  token    = var.token
  ca_file  = var.ca_file
}
data "sluice_cluster" "any" {
  name = "any"
}
"""
)


def test_a_refused_token_names_where_it_came_from(
    tf: Terraform, tmp_path: Path, plane: ControlPlaneProcess
) -> None:
    workdir = write(tmp_path / "token", READ_CLUSTER)
    plan = tf.plan(workdir, env={"TF_VAR_token": "not-the-token"})
    assert plan.returncode == 1, plan.output
    assert (
        f"The control plane at {plane.endpoint} refused the API token from the provider's "
        "`token` argument" in plan.stderr.replace("\n", " ")
    )
    assert "not-the-token" not in plan.output


def test_without_a_control_plane_the_error_says_how_to_start_one(
    tf: Terraform, tmp_path: Path
) -> None:
    workdir = write(tmp_path / "none", READ_CLUSTER)
    empty = tmp_path / "empty-home"
    empty.mkdir()
    plan = tf.plan(workdir, env={"SLUICE_HOME": str(empty)}, drop=("SLUICE_ENDPOINT",))
    assert plan.returncode == 1, plan.output
    text = plan.stderr.replace("\n", " ")
    assert f"The Sluice control plane is not running for SLUICE_HOME={empty}" in text
    assert "Start it with `cloudctl up`" in text


def test_a_ca_file_makes_the_provider_speak_tls(
    tf: Terraform, tmp_path: Path, plane: ControlPlaneProcess
) -> None:
    """Through a TLS-terminating proxy whose certificate the CA signed, the control plane
    answers (here: that it has no such cluster); the plaintext control plane itself refuses
    the handshake, and the error says to remove ca_file. A file without a certificate is
    refused before anything is sent."""
    workdir = write(tmp_path / "tls", READ_CLUSTER)
    authority = TestCA(tmp_path / "ca")
    with TlsProxy(authority.broker.cert, authority.broker.key, plane.endpoint) as proxy:
        env = {"TF_VAR_endpoint": proxy.address, "TF_VAR_ca_file": str(authority.ca)}
        plan = tf.plan(workdir, env=env)
        assert plan.returncode == 1, plan.output
        assert "No cluster named 'any'" in plan.stderr
        assert proxy.handshakes > 0

    plan = tf.plan(workdir, env={"TF_VAR_ca_file": str(authority.ca)})
    assert plan.returncode == 1, plan.output
    text = plan.stderr.replace("\n", " ")
    assert f"Cannot reach the Sluice control plane at {plane.endpoint}" in text
    assert "remove it for a plaintext control plane" in text

    (tmp_path / "not.pem").write_text("nothing\n")
    plan = tf.plan(workdir, env={"TF_VAR_ca_file": str(tmp_path / "not.pem")})
    assert plan.returncode == 1, plan.output
    assert "holds no PEM certificate" in plan.stderr


def test_bad_values_are_refused_before_the_api_is_asked(tf: Terraform, tmp_path: Path) -> None:
    workdir = write(
        tmp_path / "bad",
        HEADER
        + """
resource "sluice_cluster" "bad" {
  name                  = "bad"
  client_authentication = ["kerberos"]
  timeouts {
    create = "5 minutes"
  }
}
resource "sluice_acl" "bad" {
  cluster       = "bad"
  resource_type = "TABLE"
  resource_name = "t"
  principal     = "User:x"
  operation     = "READ"
}
resource "sluice_configuration" "bad" {
  name              = "bad"
  server_properties = <<PROPERTIES
log.retention.ms = 1000
log.retention.ms = 2000
PROPERTIES
}
resource "sluice_cluster" "misconfigured" {
  name         = "misconfigured"
  storage_mode = "tiered"
  configuration_info {
    arn      = "arn:sluice:kafka:local:cluster/bad/1"
    revision = 0
  }
}
""",
    )
    result = tf.run(workdir, "validate", "-no-color")
    assert result.returncode == 1, result.output
    text = " ".join(result.stderr.split())
    assert "Unknown client_authentication mode 'kerberos'" in text
    assert "Invalid timeouts.create" in text
    assert "Invalid resource_type 'TABLE'" in text
    assert "server_properties is not in the properties format: line 2: 'log.retention.ms' is " in (
        text
    )
    assert "Unknown storage_mode 'tiered'" in text
    assert "is not a configuration's ARN" in text
    assert "configuration_info.revision must be a whole number of at least 1, not 0" in text
