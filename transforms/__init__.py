"""WebAssembly transforms: validation, the wasmtime engine and its two ABIs (README.md).

The engine (``transforms.runtime``, with wasmtime) is imported when first named: a broker
imports this package at start for its types and validation, and loads the engine only once
a transform is deployed (wasmtime and the engine are ~150 ms of CPU, of a broker's ~1.7 s).
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from transforms.runtime import CompiledModule, Instance, InstanceState, Runtime

_ENGINE = frozenset({"CompiledModule", "Instance", "InstanceState", "Runtime"})


def __getattr__(name: str) -> Any:
    if name in _ENGINE:
        from transforms import runtime  # noqa: PLC0415 - the engine, when first named

        return getattr(runtime, name)
    raise AttributeError(f"module 'transforms' has no attribute {name!r}")


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
