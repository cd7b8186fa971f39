"""WebAssembly transforms: validation, the wasmtime engine and its two ABIs (README.md)."""

from transforms.errors import FailureReason, ModuleRejected, RejectReason, TransformFailure
from transforms.limits import CONFIG_KEYS, Limits
from transforms.module import (
    Abi,
    ModuleInfo,
    TransformSpec,
    ValidatedModule,
    validate_module,
    validate_spec,
)
from transforms.records import (
    BatchHeader,
    InputBatch,
    InputRecord,
    LogLine,
    LogStream,
    OutputBatch,
    OutputRecord,
    TransformResult,
)
from transforms.runtime import CompiledModule, Instance, InstanceState, Runtime

__all__ = [
    "CONFIG_KEYS",
    "Abi",
    "BatchHeader",
    "CompiledModule",
    "FailureReason",
    "InputBatch",
    "InputRecord",
    "Instance",
    "InstanceState",
    "Limits",
    "LogLine",
    "LogStream",
    "ModuleInfo",
    "ModuleRejected",
    "OutputBatch",
    "OutputRecord",
    "RejectReason",
    "Runtime",
    "TransformFailure",
    "TransformResult",
    "TransformSpec",
    "ValidatedModule",
    "validate_module",
    "validate_spec",
]
