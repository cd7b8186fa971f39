from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    CONTROL_PLANE_UNAVAILABLE: _ClassVar[ErrorReason]
    TOKEN_INVALID: _ClassVar[ErrorReason]
    INVALID_ARGUMENT: _ClassVar[ErrorReason]
    INVALID_NAME: _ClassVar[ErrorReason]
    INVALID_BROKER_COUNT: _ClassVar[ErrorReason]
    INVALID_CONFIG: _ClassVar[ErrorReason]
    CLUSTER_ALREADY_EXISTS: _ClassVar[ErrorReason]
    TOPIC_ALREADY_EXISTS: _ClassVar[ErrorReason]
    CLUSTER_NOT_FOUND: _ClassVar[ErrorReason]
    TOPIC_NOT_FOUND: _ClassVar[ErrorReason]
    FAILED_PRECONDITION: _ClassVar[ErrorReason]
    OPERATION_IN_PROGRESS: _ClassVar[ErrorReason]
    CLUSTER_NOT_READY: _ClassVar[ErrorReason]
    SCALE_IN_NOT_SUPPORTED: _ClassVar[ErrorReason]
    BROKER_UNAVAILABLE: _ClassVar[ErrorReason]
    OBJECT_STORE_UNAVAILABLE: _ClassVar[ErrorReason]
    KAFKA_ERROR: _ClassVar[ErrorReason]
    INTERNAL: _ClassVar[ErrorReason]
    GROUP_NOT_FOUND: _ClassVar[ErrorReason]
    GROUP_NOT_EMPTY: _ClassVar[ErrorReason]
    BROKER_NOT_FOUND: _ClassVar[ErrorReason]
    OPERATION_NOT_FOUND: _ClassVar[ErrorReason]
    TRANSFORM_NOT_FOUND: _ClassVar[ErrorReason]
    INVALID_TRANSFORM: _ClassVar[ErrorReason]
    USER_NOT_FOUND: _ClassVar[ErrorReason]
    USER_ALREADY_EXISTS: _ClassVar[ErrorReason]
    ENDPOINT_NOT_FOUND: _ClassVar[ErrorReason]
    ENDPOINT_ALREADY_EXISTS: _ClassVar[ErrorReason]
    BILLING_RUN_NOT_FOUND: _ClassVar[ErrorReason]
    INVOICE_NOT_FOUND: _ClassVar[ErrorReason]
    CONFIGURATION_NOT_FOUND: _ClassVar[ErrorReason]
    CONFIGURATION_ALREADY_EXISTS: _ClassVar[ErrorReason]
    REPLICATOR_NOT_FOUND: _ClassVar[ErrorReason]
    REPLICATOR_ALREADY_EXISTS: _ClassVar[ErrorReason]
ERROR_REASON_UNSPECIFIED: ErrorReason
CONTROL_PLANE_UNAVAILABLE: ErrorReason
TOKEN_INVALID: ErrorReason
INVALID_ARGUMENT: ErrorReason
INVALID_NAME: ErrorReason
INVALID_BROKER_COUNT: ErrorReason
INVALID_CONFIG: ErrorReason
CLUSTER_ALREADY_EXISTS: ErrorReason
TOPIC_ALREADY_EXISTS: ErrorReason
CLUSTER_NOT_FOUND: ErrorReason
TOPIC_NOT_FOUND: ErrorReason
FAILED_PRECONDITION: ErrorReason
OPERATION_IN_PROGRESS: ErrorReason
CLUSTER_NOT_READY: ErrorReason
SCALE_IN_NOT_SUPPORTED: ErrorReason
BROKER_UNAVAILABLE: ErrorReason
OBJECT_STORE_UNAVAILABLE: ErrorReason
KAFKA_ERROR: ErrorReason
INTERNAL: ErrorReason
GROUP_NOT_FOUND: ErrorReason
GROUP_NOT_EMPTY: ErrorReason
BROKER_NOT_FOUND: ErrorReason
OPERATION_NOT_FOUND: ErrorReason
TRANSFORM_NOT_FOUND: ErrorReason
INVALID_TRANSFORM: ErrorReason
USER_NOT_FOUND: ErrorReason
USER_ALREADY_EXISTS: ErrorReason
ENDPOINT_NOT_FOUND: ErrorReason
ENDPOINT_ALREADY_EXISTS: ErrorReason
BILLING_RUN_NOT_FOUND: ErrorReason
INVOICE_NOT_FOUND: ErrorReason
CONFIGURATION_NOT_FOUND: ErrorReason
CONFIGURATION_ALREADY_EXISTS: ErrorReason
REPLICATOR_NOT_FOUND: ErrorReason
REPLICATOR_ALREADY_EXISTS: ErrorReason
