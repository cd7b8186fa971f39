from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StorageMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STORAGE_MODE_UNSPECIFIED: _ClassVar[StorageMode]
    STORAGE_MODE_LOCAL: _ClassVar[StorageMode]
    STORAGE_MODE_TIERED: _ClassVar[StorageMode]

class ClientAuth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLIENT_AUTH_UNSPECIFIED: _ClassVar[ClientAuth]
    CLIENT_AUTH_NONE: _ClassVar[ClientAuth]
    CLIENT_AUTH_SCRAM: _ClassVar[ClientAuth]
    CLIENT_AUTH_TLS: _ClassVar[ClientAuth]

class ClusterState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLUSTER_STATE_UNSPECIFIED: _ClassVar[ClusterState]
    CLUSTER_STATE_CREATING: _ClassVar[ClusterState]
    CLUSTER_STATE_ACTIVE: _ClassVar[ClusterState]
    CLUSTER_STATE_UPDATING: _ClassVar[ClusterState]
    CLUSTER_STATE_DELETING: _ClassVar[ClusterState]
    CLUSTER_STATE_FAILED: _ClassVar[ClusterState]
    CLUSTER_STATE_HEALING: _ClassVar[ClusterState]

class BrokerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BROKER_STATE_UNSPECIFIED: _ClassVar[BrokerState]
    BROKER_STATE_PENDING: _ClassVar[BrokerState]
    BROKER_STATE_STARTING: _ClassVar[BrokerState]
    BROKER_STATE_RUNNING: _ClassVar[BrokerState]
    BROKER_STATE_STOPPING: _ClassVar[BrokerState]
    BROKER_STATE_STOPPED: _ClassVar[BrokerState]
STORAGE_MODE_UNSPECIFIED: StorageMode
STORAGE_MODE_LOCAL: StorageMode
STORAGE_MODE_TIERED: StorageMode
CLIENT_AUTH_UNSPECIFIED: ClientAuth
CLIENT_AUTH_NONE: ClientAuth
CLIENT_AUTH_SCRAM: ClientAuth
CLIENT_AUTH_TLS: ClientAuth
CLUSTER_STATE_UNSPECIFIED: ClusterState
CLUSTER_STATE_CREATING: ClusterState
CLUSTER_STATE_ACTIVE: ClusterState
CLUSTER_STATE_UPDATING: ClusterState
CLUSTER_STATE_DELETING: ClusterState
CLUSTER_STATE_FAILED: ClusterState
CLUSTER_STATE_HEALING: ClusterState
BROKER_STATE_UNSPECIFIED: BrokerState
BROKER_STATE_PENDING: BrokerState
BROKER_STATE_STARTING: BrokerState
BROKER_STATE_RUNNING: BrokerState
BROKER_STATE_STOPPING: BrokerState
BROKER_STATE_STOPPED: BrokerState

class ConfigurationInfo(_message.Message):
    __slots__ = ("name", "revision")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    name: str
    revision: int
    def __init__(self, name: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class Listener(_message.Message):
    __slots__ = ("client_auth", "name", "security_protocol", "port")
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    client_auth: ClientAuth
    name: str
    security_protocol: str
    port: int
    def __init__(self, client_auth: _Optional[_Union[ClientAuth, str]] = ..., name: _Optional[str] = ..., security_protocol: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class Broker(_message.Message):
    __slots__ = ("id", "host", "port", "state", "pid", "data_dir", "restarts", "log_path", "listeners")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    DATA_DIR_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    id: int
    host: str
    port: int
    state: BrokerState
    pid: int
    data_dir: str
    restarts: int
    log_path: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    def __init__(self, id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., state: _Optional[_Union[BrokerState, str]] = ..., pid: _Optional[int] = ..., data_dir: _Optional[str] = ..., restarts: _Optional[int] = ..., log_path: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ...) -> None: ...

class Cluster(_message.Message):
    __slots__ = ("name", "cluster_id", "state", "state_message", "broker_count", "brokers", "bootstrap_brokers", "config", "operation", "created_at", "updated_at", "object_store", "log_dir", "operation_id", "client_auth", "broker_type", "tags", "storage_mode", "configuration_info", "schema_registry_url")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BROKER_COUNT_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    OBJECT_STORE_FIELD_NUMBER: _ClassVar[int]
    LOG_DIR_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    BROKER_TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_MODE_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_INFO_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_REGISTRY_URL_FIELD_NUMBER: _ClassVar[int]
    name: str
    cluster_id: str
    state: ClusterState
    state_message: str
    broker_count: int
    brokers: _containers.RepeatedCompositeFieldContainer[Broker]
    bootstrap_brokers: str
    config: _containers.ScalarMap[str, str]
    operation: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    object_store: ObjectStore
    log_dir: str
    operation_id: str
    client_auth: _containers.RepeatedScalarFieldContainer[ClientAuth]
    broker_type: str
    tags: _containers.ScalarMap[str, str]
    storage_mode: StorageMode
    configuration_info: ConfigurationInfo
    schema_registry_url: str
    def __init__(self, name: _Optional[str] = ..., cluster_id: _Optional[str] = ..., state: _Optional[_Union[ClusterState, str]] = ..., state_message: _Optional[str] = ..., broker_count: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[Broker, _Mapping]]] = ..., bootstrap_brokers: _Optional[str] = ..., config: _Optional[_Mapping[str, str]] = ..., operation: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., object_store: _Optional[_Union[ObjectStore, _Mapping]] = ..., log_dir: _Optional[str] = ..., operation_id: _Optional[str] = ..., client_auth: _Optional[_Iterable[_Union[ClientAuth, str]]] = ..., broker_type: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., storage_mode: _Optional[_Union[StorageMode, str]] = ..., configuration_info: _Optional[_Union[ConfigurationInfo, _Mapping]] = ..., schema_registry_url: _Optional[str] = ...) -> None: ...

class ObjectStore(_message.Message):
    __slots__ = ("endpoint", "bucket", "region", "embedded", "access_key_id", "secret_access_key")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDED_FIELD_NUMBER: _ClassVar[int]
    ACCESS_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    bucket: str
    region: str
    embedded: bool
    access_key_id: str
    secret_access_key: str
    def __init__(self, endpoint: _Optional[str] = ..., bucket: _Optional[str] = ..., region: _Optional[str] = ..., embedded: bool = ..., access_key_id: _Optional[str] = ..., secret_access_key: _Optional[str] = ...) -> None: ...

class CreateClusterRequest(_message.Message):
    __slots__ = ("name", "broker_count", "config", "client_auth", "broker_type", "tags", "storage_mode", "configuration_info")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    BROKER_TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_MODE_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_INFO_FIELD_NUMBER: _ClassVar[int]
    name: str
    broker_count: int
    config: _containers.ScalarMap[str, str]
    client_auth: _containers.RepeatedScalarFieldContainer[ClientAuth]
    broker_type: str
    tags: _containers.ScalarMap[str, str]
    storage_mode: StorageMode
    configuration_info: ConfigurationInfo
    def __init__(self, name: _Optional[str] = ..., broker_count: _Optional[int] = ..., config: _Optional[_Mapping[str, str]] = ..., client_auth: _Optional[_Iterable[_Union[ClientAuth, str]]] = ..., broker_type: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., storage_mode: _Optional[_Union[StorageMode, str]] = ..., configuration_info: _Optional[_Union[ConfigurationInfo, _Mapping]] = ...) -> None: ...

class UpdateClusterConfigurationRequest(_message.Message):
    __slots__ = ("name", "configuration_info")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_INFO_FIELD_NUMBER: _ClassVar[int]
    name: str
    configuration_info: ConfigurationInfo
    def __init__(self, name: _Optional[str] = ..., configuration_info: _Optional[_Union[ConfigurationInfo, _Mapping]] = ...) -> None: ...

class UpdateClusterTagsRequest(_message.Message):
    __slots__ = ("name", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    tags: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetClusterRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListClustersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListClustersResponse(_message.Message):
    __slots__ = ("clusters",)
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[Cluster]
    def __init__(self, clusters: _Optional[_Iterable[_Union[Cluster, _Mapping]]] = ...) -> None: ...

class DeleteClusterRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class UpdateBrokerCountRequest(_message.Message):
    __slots__ = ("name", "broker_count", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    broker_count: int
    config: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., broker_count: _Optional[int] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateClusterConfigRequest(_message.Message):
    __slots__ = ("name", "config", "remove")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    config: _containers.ScalarMap[str, str]
    remove: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., config: _Optional[_Mapping[str, str]] = ..., remove: _Optional[_Iterable[str]] = ...) -> None: ...

class RebootBrokerRequest(_message.Message):
    __slots__ = ("name", "broker_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    broker_id: int
    def __init__(self, name: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class GetBootstrapBrokersRequest(_message.Message):
    __slots__ = ("name", "client_auth", "endpoint")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    name: str
    client_auth: ClientAuth
    endpoint: str
    def __init__(self, name: _Optional[str] = ..., client_auth: _Optional[_Union[ClientAuth, str]] = ..., endpoint: _Optional[str] = ...) -> None: ...

class UpdateClusterSecurityRequest(_message.Message):
    __slots__ = ("name", "client_auth", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    client_auth: _containers.RepeatedScalarFieldContainer[ClientAuth]
    config: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., client_auth: _Optional[_Iterable[_Union[ClientAuth, str]]] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetCaCertRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetCaCertResponse(_message.Message):
    __slots__ = ("pem", "sha256_fingerprint")
    PEM_FIELD_NUMBER: _ClassVar[int]
    SHA256_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    pem: str
    sha256_fingerprint: str
    def __init__(self, pem: _Optional[str] = ..., sha256_fingerprint: _Optional[str] = ...) -> None: ...

class GetBootstrapBrokersResponse(_message.Message):
    __slots__ = ("bootstrap_brokers", "addresses", "client_auth", "bootstrap_broker_string", "bootstrap_broker_string_tls", "bootstrap_broker_string_sasl_scram", "endpoint")
    BOOTSTRAP_BROKERS_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_BROKER_STRING_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_BROKER_STRING_TLS_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_BROKER_STRING_SASL_SCRAM_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    bootstrap_brokers: str
    addresses: _containers.RepeatedScalarFieldContainer[str]
    client_auth: ClientAuth
    bootstrap_broker_string: str
    bootstrap_broker_string_tls: str
    bootstrap_broker_string_sasl_scram: str
    endpoint: str
    def __init__(self, bootstrap_brokers: _Optional[str] = ..., addresses: _Optional[_Iterable[str]] = ..., client_auth: _Optional[_Union[ClientAuth, str]] = ..., bootstrap_broker_string: _Optional[str] = ..., bootstrap_broker_string_tls: _Optional[str] = ..., bootstrap_broker_string_sasl_scram: _Optional[str] = ..., endpoint: _Optional[str] = ...) -> None: ...
