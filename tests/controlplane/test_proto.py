"""The committed generated stubs match their .proto sources."""

from __future__ import annotations

import importlib

import pytest

from proto import generate


def test_generated_code_is_fresh() -> None:
    assert generate.main(["--check"]) == 0, "run `python -m proto.generate` and commit the result"


@pytest.mark.parametrize(
    "module",
    ["clusters", "topics", "controlplane", "errors", "groups", "operations", "logs", "transforms"],
)
def test_stubs_import(module: str) -> None:
    importlib.import_module(f"proto.sluice.v1.{module}_pb2")
    importlib.import_module(f"proto.sluice.v1.{module}_pb2_grpc")
