"""Fixtures: the Terraform binary, one control plane per module, and a Terraform of each
test's own (its HOME and CLI configuration)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice_client.client import Client
from tests.controlplane.harness import ControlPlaneProcess, running_control_plane
from tests.terraform.harness import Terraform, terraform_binary


@pytest.fixture(scope="session")
def terraform_bin() -> Path:
    binary = terraform_binary()
    if binary is None:
        pytest.skip("no terraform on PATH and no OpenTofu built: run `make terraform-bin`")
    return binary


@pytest.fixture(scope="module")
def plane(
    tmp_path_factory: pytest.TempPathFactory, terraform_bin: Path
) -> Iterator[ControlPlaneProcess]:
    """One control plane for the module's tests (they share its clusters)."""
    with running_control_plane(tmp_path_factory.mktemp("tf-plane")) as running:
        yield running


@pytest.fixture(scope="module")
def api(plane: ControlPlaneProcess) -> Iterator[Client]:
    """The control plane's API, to check what Terraform did."""
    with Client(plane.endpoint, plane.token) as client:
        yield client


@pytest.fixture
def tf(tmp_path: Path, terraform_bin: Path, plane: ControlPlaneProcess) -> Terraform:
    """Terraform with this test's own HOME and CLI configuration (dev_overrides)."""
    return Terraform.make(terraform_bin, tmp_path / "tf-home", plane.home, plane.endpoint)
