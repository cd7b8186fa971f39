"""The operation history (Operations service): a create, a scale-out, a reboot, a heal after a
broker's kill -9, a config update and a delete are each listed with the right type and state,
a delete that interrupts a create fails the create, the history survives a control-plane
kill -9 and stays after the cluster is gone; and the bearer scheme is case-insensitive."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest

from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import operations_pb2 as opb
from proto.sluice.v1 import operations_pb2_grpc
from sluice_client.client import ApiError
from tests.controlplane.harness import ControlPlaneProcess, kill_everything_under, wait_until


def reason_of(exc: grpc.RpcError) -> int:
    return ApiError.from_rpc(exc).reason


def operations(plane: ControlPlaneProcess, cluster: str = "") -> list[opb.Operation]:
    stub = operations_pb2_grpc.OperationsStub(plane.channel)
    reply = stub.ListOperations(
        opb.ListOperationsRequest(cluster=cluster), metadata=plane.metadata, timeout=10
    )
    return list(reply.operations)


def kinds(ops: list[opb.Operation]) -> list[tuple[str, str]]:
    return [
        (
            opb.OperationType.Name(o.type).removeprefix("OPERATION_TYPE_"),
            opb.OperationState.Name(o.state).removeprefix("OPERATION_STATE_"),
        )
        for o in ops
    ]


def settled(plane: ControlPlaneProcess, name: str, count: int) -> list[opb.Operation]:
    """The cluster is ACTIVE and idle and has ``count`` operations, all ended."""

    def done() -> list[opb.Operation] | None:
        ops = operations(plane, name)
        idle = plane.get(name)
        ended = all(o.state != opb.OPERATION_STATE_IN_PROGRESS for o in ops)
        ok = idle.state == cpb.CLUSTER_STATE_ACTIVE and not idle.operation and ended
        return ops if ok and len(ops) == count else None

    ops: list[opb.Operation] = wait_until(done, 60, f"{count} operations of {name} ended")
    return ops


def test_every_operation_is_recorded_and_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plane = ControlPlaneProcess(home).start()
    md = plane.metadata
    try:
        cluster = plane.create("ops", brokers=1)
        assert cluster.operation_id == ""
        (created,) = settled(plane, "ops", 1)
        assert kinds([created]) == [("CREATE", "COMPLETED")]
        assert created.detail == "1 broker(s)"
        assert created.ended_at.ToNanoseconds() >= created.started_at.ToNanoseconds()

        scaled = plane.clusters.UpdateBrokerCount(
            cpb.UpdateBrokerCountRequest(name="ops", broker_count=2), metadata=md, timeout=10
        )
        assert scaled.operation == "UPDATE_BROKER_COUNT"
        assert scaled.operation_id.startswith("op-")
        settled(plane, "ops", 2)

        plane.clusters.RebootBroker(
            cpb.RebootBrokerRequest(name="ops", broker_id=1), metadata=md, timeout=10
        )
        settled(plane, "ops", 3)

        victim = plane.get("ops").brokers[0].pid
        os.kill(victim, signal.SIGKILL)
        ops = settled(plane, "ops", 4)
        assert ops[3].detail == "broker(s) 0 after an unexpected exit"

        plane.clusters.UpdateClusterConfig(
            cpb.UpdateClusterConfigRequest(name="ops", config={"log.retention.ms": "3600000"}),
            metadata=md,
            timeout=10,
        )
        ops = settled(plane, "ops", 5)
        assert kinds(ops) == [
            ("CREATE", "COMPLETED"),
            ("UPDATE_BROKER_COUNT", "COMPLETED"),
            ("REBOOT_BROKER", "COMPLETED"),
            ("HEAL", "COMPLETED"),
            ("UPDATE_CONFIG", "COMPLETED"),
        ]
        assert [o.detail for o in ops[1:3]] == ["1 -> 2 brokers", "broker 1"]
        assert ops[4].detail == "set log.retention.ms=3600000"
        assert all(o.state_message for o in ops), "each kept its last progress message"

        with pytest.raises(grpc.RpcError) as missing:
            plane.clusters.RebootBroker(
                cpb.RebootBrokerRequest(name="ops", broker_id=7), metadata=md, timeout=10
            )
        assert reason_of(missing.value) == epb.BROKER_NOT_FOUND

        # a delete interrupts a create: the create fails, the delete completes
        plane.clusters.CreateCluster(
            cpb.CreateClusterRequest(name="brief", broker_count=1), metadata=md, timeout=10
        )
        plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="brief"), metadata=md)
        plane.wait_gone("brief")
        brief = operations(plane, "brief")
        assert kinds(brief) == [("CREATE", "FAILED"), ("DELETE", "COMPLETED")]
        assert brief[0].error.startswith("interrupted by DELETE (operation op-")

        # the history survives the control plane's kill -9
        plane.kill9()
        plane = ControlPlaneProcess(home, settings=None)
        plane.start()
        assert kinds(operations(plane, "ops"))[:5] == kinds(ops)

        plane.clusters.DeleteCluster(
            cpb.DeleteClusterRequest(name="ops"), metadata=plane.metadata, timeout=10
        )
        plane.wait_gone("ops")
        after = operations(plane, "ops")
        assert kinds(after)[-1] == ("DELETE", "COMPLETED"), "kept after the cluster is gone"
        assert {o.id for o in operations(plane)} >= {o.id for o in after + brief}
        stub = operations_pb2_grpc.OperationsStub(plane.channel)
        one = stub.GetOperation(
            opb.GetOperationRequest(id=after[-1].id), metadata=plane.metadata, timeout=10
        )
        assert one == after[-1]
        with pytest.raises(grpc.RpcError) as unknown:
            stub.GetOperation(opb.GetOperationRequest(id="op-x"), metadata=plane.metadata)
        assert reason_of(unknown.value) == epb.OPERATION_NOT_FOUND
        with pytest.raises(grpc.RpcError) as never:
            stub.ListOperations(opb.ListOperationsRequest(cluster="never"), metadata=plane.metadata)
        assert reason_of(never.value) == epb.CLUSTER_NOT_FOUND

        # the bearer scheme in any case (RFC 9110); another scheme is refused
        for scheme in ("bearer", "BEARER", "Bearer"):
            stub.ListOperations(
                opb.ListOperationsRequest(),
                metadata=(("authorization", f"{scheme} {plane.token}"),),
                timeout=10,
            )
        with pytest.raises(grpc.RpcError) as basic:
            stub.ListOperations(
                opb.ListOperationsRequest(), metadata=(("authorization", f"Basic {plane.token}"),)
            )
        assert reason_of(basic.value) == epb.TOKEN_INVALID
    finally:
        plane.stop()
        kill_everything_under(home)
