"""The typed errors of the transforms package: one class per phase, one enum of reasons each.

``ModuleRejected`` is raised at deploy time (``transforms.module``) and changes nothing;
``TransformFailure`` is raised by a running instance, which is unusable afterwards
(the broker pauses the partition and creates a new instance on resume).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transforms.records import LogLine


class RejectReason(StrEnum):
    """Why a module or a transform definition is refused at deploy time."""

    NOT_WASM = "not_wasm"
    """Not a core WebAssembly module (bad magic, a component, or it does not validate)."""
    TOO_LARGE = "too_large"
    """Over ``transforms.module.max.bytes``."""
    MISSING_START = "missing_start"
    """No ``_start`` function export of type () -> ()."""
    MISSING_MEMORY = "missing_memory"
    """No ``memory`` export, more than one memory, a 64-bit or shared memory, or an
    imported one."""
    UNKNOWN_IMPORT = "unknown_import"
    """An import outside WASI preview1, ``redpanda_transform``,
    ``redpanda_schema_registry`` and ``sluice_batch``, or with the wrong type."""
    MISSING_ABI = "missing_abi"
    """Neither ABI's version check is imported (not built with an SDK)."""
    UNSUPPORTED_ABI = "unsupported_abi"
    """An ABI version this host does not implement, or both ABIs at once."""
    MISSING_EXPORT = "missing_export"
    """A batch-ABI module without ``sluice_batch_input`` / ``sluice_batch_process``."""
    TOO_MANY_OUTPUTS = "too_many_outputs"
    """More than 8 output topics (or none)."""
    INVALID_TOPICS = "invalid_topics"
    """An output topic equal to the input topic, a duplicate, or an empty name."""
    INVALID_NAME = "invalid_name"
    INVALID_ENVIRONMENT = "invalid_environment"
    """A variable Redpanda would refuse: empty, too long, with '=' or control characters,
    starting with ``REDPANDA_``, or more than 128 of them."""


class ModuleRejected(ValueError):
    """A deploy refused before anything changed; ``str()`` says what to do."""

    def __init__(self, reason: RejectReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class FailureReason(StrEnum):
    """Why a running transform stopped; the instance is unusable afterwards."""

    TRAP = "trap"
    """A WebAssembly trap: unreachable, out-of-bounds access, stack overflow, division by
    zero, a Rust panic, an AssemblyScript abort."""
    PANIC = "panic"
    """The guest reported an error: a Go panic (exit code 2 with "panic:" on stderr) or
    the batch ABI's ``fail``."""
    EXIT = "exit"
    """The guest called ``proc_exit`` (or returned from ``_start``) without a panic."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """It used its CPU budget (fuel) for the batch: an endless loop, or too slow."""
    MEMORY_LIMIT = "memory_limit"
    """It failed with its linear memory at the limit (``transforms.memory.max.bytes``)."""
    OUTPUT_TOO_LARGE = "output_too_large"
    """Its output for one input batch passed ``transforms.output.max.bytes``."""
    UNKNOWN_TOPIC = "unknown_topic"
    """It wrote to a topic that is not one of its output topics."""
    INVALID_OUTPUT = "invalid_output"
    """A malformed output record or descriptor."""
    STARTUP = "startup"
    """The guest did not reach its first batch (it returned, or its start failed)."""
    CLOSED = "closed"
    """The instance was closed while a call was waiting."""


class TransformFailure(RuntimeError):
    """A failed call; ``guest_text`` is what the guest said (stderr, panic, ``fail``)."""

    def __init__(
        self,
        reason: FailureReason,
        message: str,
        *,
        guest_text: str = "",
        detail: str = "",
        logs: Sequence[LogLine] = (),
        exit_code: int | None = None,
    ) -> None:
        text = message
        if guest_text:
            text += f"; the guest said: {guest_text}"
        super().__init__(text)
        self.reason = reason
        self.message = message
        self.guest_text = guest_text
        self.detail = detail
        """The runtime's own words (wasmtime's trap message), for the logs."""
        self.logs = tuple(logs)
        """The guest's log lines of the failed call, up to the failure."""
        self.exit_code = exit_code
