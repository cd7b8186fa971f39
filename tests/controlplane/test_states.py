"""Cluster and broker states: Python enums with one mapping to and from the API's enums."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from controlplane.states import BrokerState, ClusterState, OperationState, OperationType
from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import operations_pb2 as opb
from tests.conftest import REPO


@pytest.mark.parametrize("value", pb.ClusterState.values())
def test_every_cluster_state_value_round_trips(value: int) -> None:
    if value == pb.CLUSTER_STATE_UNSPECIFIED:
        with pytest.raises(ValueError, match="no cluster state"):
            ClusterState.from_proto(value)
        return
    state = ClusterState.from_proto(value)
    assert state.to_proto() == value
    assert pb.ClusterState.Name(value) == "CLUSTER_STATE_" + state.value


@pytest.mark.parametrize("value", pb.BrokerState.values())
def test_every_broker_state_value_round_trips(value: int) -> None:
    if value == pb.BROKER_STATE_UNSPECIFIED:
        with pytest.raises(ValueError, match="no broker state"):
            BrokerState.from_proto(value)
        return
    state = BrokerState.from_proto(value)
    assert state.to_proto() == value
    assert pb.BrokerState.Name(value) == "BROKER_STATE_" + state.value


def test_every_state_has_a_proto_value() -> None:
    assert sorted(s.to_proto() for s in ClusterState) == sorted(
        v for v in pb.ClusterState.values() if v != pb.CLUSTER_STATE_UNSPECIFIED
    )
    assert sorted(s.to_proto() for s in BrokerState) == sorted(
        v for v in pb.BrokerState.values() if v != pb.BROKER_STATE_UNSPECIFIED
    )


def test_unknown_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="99"):
        ClusterState.from_proto(99)
    with pytest.raises(ValueError, match="99"):
        BrokerState.from_proto(99)


def test_states_read_as_their_names() -> None:
    """Messages and logs show "ACTIVE", as the strings did before the enums."""
    assert f"{ClusterState.ACTIVE}" == "ACTIVE"
    assert str(BrokerState.RUNNING) == "RUNNING"


def test_no_enum_name_is_built_from_a_string() -> None:
    """Nowhere in the control plane or its clients is a proto enum name made with an
    f-string or concatenation (``Value(f"CLUSTER_STATE_{...}")``)."""
    offenders = []
    for package in ("controlplane", "cli", "spark"):
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "Value"
                    and node.args
                    and isinstance(node.args[0], ast.JoinedStr | ast.BinOp)
                ):
                    offenders.append(f"{Path(path).relative_to(REPO)}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize(
    ("kind", "enum", "prefix"),
    [
        (OperationType, opb.OperationType, "OPERATION_TYPE_"),
        (OperationState, opb.OperationState, "OPERATION_STATE_"),
    ],
)
def test_operation_types_and_states_round_trip(kind: type, enum: object, prefix: str) -> None:
    values = [v for v in enum.values() if v != 0]  # type: ignore[attr-defined]
    assert sorted(member.to_proto() for member in kind) == sorted(values)  # type: ignore[attr-defined]
    for value in values:
        member = kind.from_proto(value)  # type: ignore[attr-defined]
        assert enum.Name(value) == prefix + member.value  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="no operation"):
        kind.from_proto(0)  # type: ignore[attr-defined]
