"""Cluster, broker and operation states, and their one mapping to and from the API's enums.

The state store keeps a cluster's state as its name (``"ACTIVE"``: ``state.db`` files written
before these enums open unchanged); the reconciler keeps a broker's in memory. Everything in
the control plane uses these enums; ``to_proto`` / ``from_proto`` are the only way between
them and ``sluice.v1.ClusterState`` / ``sluice.v1.BrokerState`` (explicit tables, checked
against the proto's values by tests/controlplane/test_states.py). Operations (the history of
``operations.proto``) have a type and a state, ``OperationType`` / ``OperationState``, stored
by name as well. How a cluster's clients authenticate (``ClientAuth``, MSK's
client_authentication) is mapped the same way to ``sluice.v1.ClientAuth``.
"""

from __future__ import annotations

import enum

from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import operations_pb2 as opb


class ClusterState(enum.StrEnum):
    """A cluster's state, as AWS MSK names them (controlplane/README.md has the machine)."""

    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    UPDATING = "UPDATING"
    DELETING = "DELETING"
    FAILED = "FAILED"
    HEALING = "HEALING"

    def to_proto(self) -> pb.ClusterState:
        return _CLUSTER_TO_PROTO[self]

    @classmethod
    def from_proto(cls, value: int) -> ClusterState:
        """The state of a proto value; ValueError for UNSPECIFIED or an unknown number."""
        try:
            return _CLUSTER_FROM_PROTO[value]
        except KeyError:
            raise ValueError(f"no cluster state for sluice.v1.ClusterState {value}") from None


class BrokerState(enum.StrEnum):
    """A broker process's state, as the reconciler sees it."""

    PENDING = "PENDING"
    """Recorded, no process yet."""
    STARTING = "STARTING"
    """Started (or adopted), not answering ApiVersions yet."""
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"

    def to_proto(self) -> pb.BrokerState:
        return _BROKER_TO_PROTO[self]

    @classmethod
    def from_proto(cls, value: int) -> BrokerState:
        """The state of a proto value; ValueError for UNSPECIFIED or an unknown number."""
        try:
            return _BROKER_FROM_PROTO[value]
        except KeyError:
            raise ValueError(f"no broker state for sluice.v1.BrokerState {value}") from None


class OperationType(enum.StrEnum):
    """What an operation does; also the cluster's ``operation`` while it runs."""

    CREATE = "CREATE"
    UPDATE_BROKER_COUNT = "UPDATE_BROKER_COUNT"
    UPDATE_CONFIG = "UPDATE_CONFIG"
    REBOOT_BROKER = "REBOOT_BROKER"
    HEAL = "HEAL"
    DELETE = "DELETE"
    UPDATE_SECURITY = "UPDATE_SECURITY"
    UPDATE_CONNECTIVITY = "UPDATE_CONNECTIVITY"
    """A private endpoint created or deleted (``endpoints.py``)."""

    def to_proto(self) -> opb.OperationType:
        return _OPERATION_TYPE_TO_PROTO[self]

    @classmethod
    def from_proto(cls, value: int) -> OperationType:
        try:
            return _OPERATION_TYPE_FROM_PROTO[value]
        except KeyError:
            raise ValueError(f"no operation type for sluice.v1.OperationType {value}") from None


class OperationState(enum.StrEnum):
    """Where an operation is: running, done, or given up (with an error)."""

    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"

    def to_proto(self) -> opb.OperationState:
        return _OPERATION_STATE_TO_PROTO[self]

    @classmethod
    def from_proto(cls, value: int) -> OperationState:
        try:
            return _OPERATION_STATE_FROM_PROTO[value]
        except KeyError:
            raise ValueError(f"no operation state for sluice.v1.OperationState {value}") from None


class ClientAuth(enum.StrEnum):
    """How clients authenticate on a listener (MSK's client_authentication); each mode a
    cluster has is its own listener on every broker (``cluster_security.py``)."""

    NONE = "NONE"
    """PLAINTEXT: no authentication."""
    SCRAM = "SCRAM"
    """SASL_SSL with SCRAM-SHA-512."""
    TLS = "TLS"
    """SSL with a client certificate required (mutual TLS)."""

    @property
    def option(self) -> str:
        """The name on the command line and in messages: ``none``, ``scram``, ``tls``."""
        return self.value.lower()

    def to_proto(self) -> pb.ClientAuth:
        return _CLIENT_AUTH_TO_PROTO[self]

    @classmethod
    def from_proto(cls, value: int) -> ClientAuth:
        try:
            return _CLIENT_AUTH_FROM_PROTO[value]
        except KeyError:
            raise ValueError(f"no client auth mode for sluice.v1.ClientAuth {value}") from None


class StorageMode(enum.StrEnum):
    """Where a cluster's topics may keep their data (MSK's storage_mode). A TIERED cluster
    has a bucket in the control plane's object store; a LOCAL one has none (so a cluster's
    mode is whether it has a bucket: ``ClusterRecord.storage_mode``)."""

    LOCAL = "LOCAL"
    TIERED = "TIERED"

    def to_proto(self) -> pb.StorageMode:
        return pb.STORAGE_MODE_TIERED if self is StorageMode.TIERED else pb.STORAGE_MODE_LOCAL

    @classmethod
    def from_proto(cls, value: int) -> StorageMode | None:
        """None for UNSPECIFIED (the control plane's default)."""
        return {pb.STORAGE_MODE_LOCAL: cls.LOCAL, pb.STORAGE_MODE_TIERED: cls.TIERED}.get(
            pb.StorageMode.ValueType(value)
        )


_CLIENT_AUTH_TO_PROTO: dict[ClientAuth, pb.ClientAuth] = {
    ClientAuth.NONE: pb.CLIENT_AUTH_NONE,
    ClientAuth.SCRAM: pb.CLIENT_AUTH_SCRAM,
    ClientAuth.TLS: pb.CLIENT_AUTH_TLS,
}
_CLIENT_AUTH_FROM_PROTO: dict[int, ClientAuth] = {v: k for k, v in _CLIENT_AUTH_TO_PROTO.items()}

_CLUSTER_TO_PROTO: dict[ClusterState, pb.ClusterState] = {
    ClusterState.CREATING: pb.CLUSTER_STATE_CREATING,
    ClusterState.ACTIVE: pb.CLUSTER_STATE_ACTIVE,
    ClusterState.UPDATING: pb.CLUSTER_STATE_UPDATING,
    ClusterState.DELETING: pb.CLUSTER_STATE_DELETING,
    ClusterState.FAILED: pb.CLUSTER_STATE_FAILED,
    ClusterState.HEALING: pb.CLUSTER_STATE_HEALING,
}
_CLUSTER_FROM_PROTO: dict[int, ClusterState] = {v: k for k, v in _CLUSTER_TO_PROTO.items()}

_BROKER_TO_PROTO: dict[BrokerState, pb.BrokerState] = {
    BrokerState.PENDING: pb.BROKER_STATE_PENDING,
    BrokerState.STARTING: pb.BROKER_STATE_STARTING,
    BrokerState.RUNNING: pb.BROKER_STATE_RUNNING,
    BrokerState.STOPPING: pb.BROKER_STATE_STOPPING,
    BrokerState.STOPPED: pb.BROKER_STATE_STOPPED,
}
_BROKER_FROM_PROTO: dict[int, BrokerState] = {v: k for k, v in _BROKER_TO_PROTO.items()}

_OPERATION_TYPE_TO_PROTO: dict[OperationType, opb.OperationType] = {
    OperationType.CREATE: opb.OPERATION_TYPE_CREATE,
    OperationType.UPDATE_BROKER_COUNT: opb.OPERATION_TYPE_UPDATE_BROKER_COUNT,
    OperationType.UPDATE_CONFIG: opb.OPERATION_TYPE_UPDATE_CONFIG,
    OperationType.REBOOT_BROKER: opb.OPERATION_TYPE_REBOOT_BROKER,
    OperationType.HEAL: opb.OPERATION_TYPE_HEAL,
    OperationType.DELETE: opb.OPERATION_TYPE_DELETE,
    OperationType.UPDATE_SECURITY: opb.OPERATION_TYPE_UPDATE_SECURITY,
    OperationType.UPDATE_CONNECTIVITY: opb.OPERATION_TYPE_UPDATE_CONNECTIVITY,
}
_OPERATION_TYPE_FROM_PROTO: dict[int, OperationType] = {
    v: k for k, v in _OPERATION_TYPE_TO_PROTO.items()
}

_OPERATION_STATE_TO_PROTO: dict[OperationState, opb.OperationState] = {
    OperationState.IN_PROGRESS: opb.OPERATION_STATE_IN_PROGRESS,
    OperationState.COMPLETED: opb.OPERATION_STATE_COMPLETED,
    OperationState.FAILED: opb.OPERATION_STATE_FAILED,
}
_OPERATION_STATE_FROM_PROTO: dict[int, OperationState] = {
    v: k for k, v in _OPERATION_STATE_TO_PROTO.items()
}
