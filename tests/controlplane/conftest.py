"""Fixtures: one control-plane process per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controlplane.harness import ControlPlaneProcess, running_control_plane


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlaneProcess]:
    with running_control_plane(tmp_path_factory.mktemp("sluice-home")) as running:
        yield running
