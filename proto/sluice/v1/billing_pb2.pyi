from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UsageGroupBy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    USAGE_GROUP_BY_UNSPECIFIED: _ClassVar[UsageGroupBy]
    USAGE_GROUP_BY_HOUR: _ClassVar[UsageGroupBy]
    USAGE_GROUP_BY_DAY: _ClassVar[UsageGroupBy]
    USAGE_GROUP_BY_TOPIC: _ClassVar[UsageGroupBy]
    USAGE_GROUP_BY_PRINCIPAL: _ClassVar[UsageGroupBy]
    USAGE_GROUP_BY_DIMENSION: _ClassVar[UsageGroupBy]

class BillingRunTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BILLING_RUN_TRIGGER_UNSPECIFIED: _ClassVar[BillingRunTrigger]
    BILLING_RUN_TRIGGER_SCHEDULED: _ClassVar[BillingRunTrigger]
    BILLING_RUN_TRIGGER_ON_DEMAND: _ClassVar[BillingRunTrigger]

class BillingRunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BILLING_RUN_STATE_UNSPECIFIED: _ClassVar[BillingRunState]
    BILLING_RUN_STATE_QUEUED: _ClassVar[BillingRunState]
    BILLING_RUN_STATE_RUNNING: _ClassVar[BillingRunState]
    BILLING_RUN_STATE_SUCCEEDED: _ClassVar[BillingRunState]
    BILLING_RUN_STATE_FAILED: _ClassVar[BillingRunState]
USAGE_GROUP_BY_UNSPECIFIED: UsageGroupBy
USAGE_GROUP_BY_HOUR: UsageGroupBy
USAGE_GROUP_BY_DAY: UsageGroupBy
USAGE_GROUP_BY_TOPIC: UsageGroupBy
USAGE_GROUP_BY_PRINCIPAL: UsageGroupBy
USAGE_GROUP_BY_DIMENSION: UsageGroupBy
BILLING_RUN_TRIGGER_UNSPECIFIED: BillingRunTrigger
BILLING_RUN_TRIGGER_SCHEDULED: BillingRunTrigger
BILLING_RUN_TRIGGER_ON_DEMAND: BillingRunTrigger
BILLING_RUN_STATE_UNSPECIFIED: BillingRunState
BILLING_RUN_STATE_QUEUED: BillingRunState
BILLING_RUN_STATE_RUNNING: BillingRunState
BILLING_RUN_STATE_SUCCEEDED: BillingRunState
BILLING_RUN_STATE_FAILED: BillingRunState

class GetUsageRequest(_message.Message):
    __slots__ = ("cluster", "from_time", "to_time", "by")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    FROM_TIME_FIELD_NUMBER: _ClassVar[int]
    TO_TIME_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    from_time: _timestamp_pb2.Timestamp
    to_time: _timestamp_pb2.Timestamp
    by: UsageGroupBy
    def __init__(self, cluster: _Optional[str] = ..., from_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., to_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., by: _Optional[_Union[UsageGroupBy, str]] = ...) -> None: ...

class UsageRow(_message.Message):
    __slots__ = ("period_start", "period_end", "cluster", "dimension", "resource", "topic", "principal", "quantity", "unit", "raw_quantity", "raw_unit")
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    PERIOD_END_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    RAW_QUANTITY_FIELD_NUMBER: _ClassVar[int]
    RAW_UNIT_FIELD_NUMBER: _ClassVar[int]
    period_start: _timestamp_pb2.Timestamp
    period_end: _timestamp_pb2.Timestamp
    cluster: str
    dimension: str
    resource: str
    topic: str
    principal: str
    quantity: str
    unit: str
    raw_quantity: str
    raw_unit: str
    def __init__(self, period_start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., period_end: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., cluster: _Optional[str] = ..., dimension: _Optional[str] = ..., resource: _Optional[str] = ..., topic: _Optional[str] = ..., principal: _Optional[str] = ..., quantity: _Optional[str] = ..., unit: _Optional[str] = ..., raw_quantity: _Optional[str] = ..., raw_unit: _Optional[str] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("rows", "from_time", "to_time", "by", "recent_events", "warnings")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    FROM_TIME_FIELD_NUMBER: _ClassVar[int]
    TO_TIME_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    RECENT_EVENTS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[UsageRow]
    from_time: _timestamp_pb2.Timestamp
    to_time: _timestamp_pb2.Timestamp
    by: UsageGroupBy
    recent_events: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rows: _Optional[_Iterable[_Union[UsageRow, _Mapping]]] = ..., from_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., to_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., by: _Optional[_Union[UsageGroupBy, str]] = ..., recent_events: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class ListInvoicesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InvoiceSummary(_message.Message):
    __slots__ = ("month", "total", "currency", "clusters", "open")
    MONTH_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    month: str
    total: str
    currency: str
    clusters: int
    open: bool
    def __init__(self, month: _Optional[str] = ..., total: _Optional[str] = ..., currency: _Optional[str] = ..., clusters: _Optional[int] = ..., open: bool = ...) -> None: ...

class ListInvoicesResponse(_message.Message):
    __slots__ = ("invoices",)
    INVOICES_FIELD_NUMBER: _ClassVar[int]
    invoices: _containers.RepeatedCompositeFieldContainer[InvoiceSummary]
    def __init__(self, invoices: _Optional[_Iterable[_Union[InvoiceSummary, _Mapping]]] = ...) -> None: ...

class GetInvoiceRequest(_message.Message):
    __slots__ = ("month", "cluster")
    MONTH_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    month: str
    cluster: str
    def __init__(self, month: _Optional[str] = ..., cluster: _Optional[str] = ...) -> None: ...

class InvoiceLine(_message.Message):
    __slots__ = ("cluster", "dimension", "resource", "quantity", "unit", "unit_price", "amount", "model")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    UNIT_PRICE_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    dimension: str
    resource: str
    quantity: str
    unit: str
    unit_price: str
    amount: str
    model: str
    def __init__(self, cluster: _Optional[str] = ..., dimension: _Optional[str] = ..., resource: _Optional[str] = ..., quantity: _Optional[str] = ..., unit: _Optional[str] = ..., unit_price: _Optional[str] = ..., amount: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class InvoiceSubtotal(_message.Message):
    __slots__ = ("cluster", "amount")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    amount: str
    def __init__(self, cluster: _Optional[str] = ..., amount: _Optional[str] = ...) -> None: ...

class Invoice(_message.Message):
    __slots__ = ("month", "cluster", "lines", "subtotals", "total", "currency", "rate_card", "rate_card_version", "open")
    MONTH_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    SUBTOTALS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_CARD_FIELD_NUMBER: _ClassVar[int]
    RATE_CARD_VERSION_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    month: str
    cluster: str
    lines: _containers.RepeatedCompositeFieldContainer[InvoiceLine]
    subtotals: _containers.RepeatedCompositeFieldContainer[InvoiceSubtotal]
    total: str
    currency: str
    rate_card: str
    rate_card_version: str
    open: bool
    def __init__(self, month: _Optional[str] = ..., cluster: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[InvoiceLine, _Mapping]]] = ..., subtotals: _Optional[_Iterable[_Union[InvoiceSubtotal, _Mapping]]] = ..., total: _Optional[str] = ..., currency: _Optional[str] = ..., rate_card: _Optional[str] = ..., rate_card_version: _Optional[str] = ..., open: bool = ...) -> None: ...

class GetCostRequest(_message.Message):
    __slots__ = ("cluster", "month")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    MONTH_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    month: str
    def __init__(self, cluster: _Optional[str] = ..., month: _Optional[str] = ...) -> None: ...

class CostRow(_message.Message):
    __slots__ = ("day", "cluster", "dimension", "amount")
    DAY_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    day: str
    cluster: str
    dimension: str
    amount: str
    def __init__(self, day: _Optional[str] = ..., cluster: _Optional[str] = ..., dimension: _Optional[str] = ..., amount: _Optional[str] = ...) -> None: ...

class GetCostResponse(_message.Message):
    __slots__ = ("month", "currency", "rows", "total", "rate_card", "rate_card_version", "warnings")
    MONTH_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    RATE_CARD_FIELD_NUMBER: _ClassVar[int]
    RATE_CARD_VERSION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    month: str
    currency: str
    rows: _containers.RepeatedCompositeFieldContainer[CostRow]
    total: str
    rate_card: str
    rate_card_version: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, month: _Optional[str] = ..., currency: _Optional[str] = ..., rows: _Optional[_Iterable[_Union[CostRow, _Mapping]]] = ..., total: _Optional[str] = ..., rate_card: _Optional[str] = ..., rate_card_version: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class BillingProgress(_message.Message):
    __slots__ = ("stage", "cluster", "done", "total", "message")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    stage: str
    cluster: str
    done: int
    total: int
    message: str
    def __init__(self, stage: _Optional[str] = ..., cluster: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class BillingRun(_message.Message):
    __slots__ = ("id", "trigger", "state", "requested_at", "started_at", "finished_at", "progress", "error", "log_path", "output", "clusters", "pid")
    ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    id: str
    trigger: BillingRunTrigger
    state: BillingRunState
    requested_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    progress: BillingProgress
    error: str
    log_path: str
    output: str
    clusters: _containers.RepeatedScalarFieldContainer[str]
    pid: int
    def __init__(self, id: _Optional[str] = ..., trigger: _Optional[_Union[BillingRunTrigger, str]] = ..., state: _Optional[_Union[BillingRunState, str]] = ..., requested_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., progress: _Optional[_Union[BillingProgress, _Mapping]] = ..., error: _Optional[str] = ..., log_path: _Optional[str] = ..., output: _Optional[str] = ..., clusters: _Optional[_Iterable[str]] = ..., pid: _Optional[int] = ...) -> None: ...

class RunBillingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunBillingResponse(_message.Message):
    __slots__ = ("run", "already_running")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RUNNING_FIELD_NUMBER: _ClassVar[int]
    run: BillingRun
    already_running: bool
    def __init__(self, run: _Optional[_Union[BillingRun, _Mapping]] = ..., already_running: bool = ...) -> None: ...

class GetBillingRunRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListBillingRunsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class ListBillingRunsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[BillingRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[BillingRun, _Mapping]]] = ...) -> None: ...
