"""Deploy-time validation: a module's bytes and a transform's definition, or a typed refusal.

Nothing here compiles or runs code: ``validate_module`` reads the module's sections
(``wasm_binary``), checks them against what the host provides, and lets wasmtime validate
the code (no compilation); ``validate_spec`` checks the name, topics and variables as
Redpanda's controller does. Which ABI a module uses is decided by its imports:

* ``redpanda_transform`` (+ optional ``redpanda_schema_registry``): Redpanda's ABI, version
  1 or 2 (``check_abi_version_1`` / ``_2``; Redpanda's Go and Rust SDKs import ``_2``);
* ``sluice_batch``: Sluice's batch ABI (``ABI.md``), version 1.

Both may import WASI preview1 functions (the 44 Redpanda's host provides).
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from transforms import wasm_binary
from transforms.errors import ModuleRejected, RejectReason
from transforms.limits import MAX_OUTPUT_TOPICS, Limits
from transforms.wasm_binary import ExternKind, Import, Signature, WasmFormatError

if TYPE_CHECKING:
    import wasmtime

REDPANDA_MODULE = "redpanda_transform"
SCHEMA_REGISTRY_MODULE = "redpanda_schema_registry"
BATCH_MODULE = "sluice_batch"
WASI_MODULE = "wasi_snapshot_preview1"

BATCH_INPUT_EXPORT = "sluice_batch_input"
BATCH_PROCESS_EXPORT = "sluice_batch_process"

MAX_NAME_BYTES = 128
MAX_TOPIC_NAME_BYTES = 249
MAX_ENV_VARS = 128
MAX_ENV_KEY_BYTES = 128
MAX_ENV_VALUE_BYTES = 2048


class Abi(StrEnum):
    REDPANDA = "redpanda"
    """Redpanda's data-transforms ABI (the guest loops in ``_start``, one record per call)."""
    BATCH = "batch"
    """Sluice's batch ABI (one call per batch; ``ABI.md``)."""


def _sig(params: str, results: str = "i") -> Signature:
    names = {"i": "i32", "I": "i64"}
    return Signature(tuple(names[c] for c in params), tuple(names[c] for c in results))


VOID = Signature((), ())

REDPANDA_FUNCS: dict[str, Signature] = {
    "check_abi_version_1": VOID,
    "check_abi_version_2": VOID,
    "read_batch_header": _sig("i" * 10),
    "read_next_record": _sig("iiiii"),
    "write_record": _sig("ii"),
    "write_record_with_options": _sig("iiii"),
}
REDPANDA_VERSIONS = (1, 2)

SCHEMA_REGISTRY_FUNCS: dict[str, Signature] = {
    "check_abi_version_0": VOID,
    "get_schema_definition_len": _sig("ii"),
    "get_schema_definition": _sig("iii"),
    "get_subject_schema_len": _sig("iiii"),
    "get_subject_schema": _sig("iiiii"),
    "create_subject_schema": _sig("iiiii"),
}

BATCH_FUNCS: dict[str, Signature] = {
    "check_abi_version_1": VOID,
    "fail": _sig("ii", ""),
    "log": _sig("iii", ""),
}
BATCH_VERSIONS = (1,)

WASI_FUNCS: dict[str, Signature] = {
    "args_get": _sig("ii"),
    "args_sizes_get": _sig("ii"),
    "environ_get": _sig("ii"),
    "environ_sizes_get": _sig("ii"),
    "clock_res_get": _sig("ii"),
    "clock_time_get": _sig("iIi"),
    "fd_advise": _sig("iIIi"),
    "fd_allocate": _sig("iII"),
    "fd_close": _sig("i"),
    "fd_datasync": _sig("i"),
    "fd_fdstat_get": _sig("ii"),
    "fd_fdstat_set_flags": _sig("ii"),
    "fd_filestat_get": _sig("ii"),
    "fd_filestat_set_size": _sig("iI"),
    "fd_filestat_set_times": _sig("iIIi"),
    "fd_pread": _sig("iiiIi"),
    "fd_prestat_get": _sig("ii"),
    "fd_prestat_dir_name": _sig("iii"),
    "fd_pwrite": _sig("iiiIi"),
    "fd_read": _sig("iiii"),
    "fd_readdir": _sig("iiiIi"),
    "fd_renumber": _sig("ii"),
    "fd_seek": _sig("iIii"),
    "fd_sync": _sig("i"),
    "fd_tell": _sig("ii"),
    "fd_write": _sig("iiii"),
    "path_create_directory": _sig("iii"),
    "path_filestat_get": _sig("iiiii"),
    "path_filestat_set_times": _sig("iiiiIIi"),
    "path_link": _sig("iiiiiii"),
    "path_open": _sig("iiiiiIIii"),
    "path_readlink": _sig("iiiiii"),
    "path_remove_directory": _sig("iii"),
    "path_rename": _sig("iiiiii"),
    "path_symlink": _sig("iiiii"),
    "path_unlink_file": _sig("iii"),
    "poll_oneoff": _sig("iiii"),
    "proc_exit": _sig("i", ""),
    "sched_yield": _sig(""),
    "random_get": _sig("ii"),
    "sock_accept": _sig("iii"),
    "sock_recv": _sig("iiiiii"),
    "sock_send": _sig("iiiii"),
    "sock_shutdown": _sig("ii"),
}
"""WASI preview1 as Redpanda's host provides it (everything but fd_fdstat_set_rights and
proc_raise); filesystem and sockets answer ENOSYS/EBADF."""

KNOWN_IMPORTS: dict[str, dict[str, Signature]] = {
    WASI_MODULE: WASI_FUNCS,
    REDPANDA_MODULE: REDPANDA_FUNCS,
    SCHEMA_REGISTRY_MODULE: SCHEMA_REGISTRY_FUNCS,
    BATCH_MODULE: BATCH_FUNCS,
}


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    """What validation learnt about a module (what ``describe-transform`` can show)."""

    abi: Abi
    abi_version: int
    size: int
    sha256: str
    imports: tuple[str, ...]
    """``module.name`` of every import, in the module's order."""
    memory_min_bytes: int
    memory_max_bytes: int | None
    """The module's own declared maximum, if any (the host's limit applies as well)."""
    uses_schema_registry: bool


@dataclass(frozen=True, slots=True)
class ValidatedModule:
    """A module that passed ``validate_module``: what the runtime compiles."""

    info: ModuleInfo
    wasm: bytes


@dataclass(frozen=True, slots=True)
class TransformSpec:
    """A transform's definition as the guest sees it (argv, environment, topics)."""

    name: str
    input_topic: str
    output_topics: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = ()
    """The user's variables, in the order given."""

    def guest_environment(self) -> list[tuple[str, str]]:
        """User variables + REDPANDA_INPUT_TOPIC + REDPANDA_OUTPUT_TOPIC_0..N-1."""
        env = list(self.environment)
        env.append(("REDPANDA_INPUT_TOPIC", self.input_topic))
        env.extend((f"REDPANDA_OUTPUT_TOPIC_{i}", t) for i, t in enumerate(self.output_topics))
        return env


def _reject(reason: RejectReason, message: str) -> ModuleRejected:
    return ModuleRejected(reason, message)


@functools.cache
def _validator() -> wasmtime.Engine:
    import wasmtime  # noqa: PLC0415 - loaded when a module is first validated (see __init__)

    return wasmtime.Engine()


def _check_import(imp: Import) -> None:
    where = f"{imp.module}.{imp.name}"
    funcs = KNOWN_IMPORTS.get(imp.module)
    if funcs is None:
        raise _reject(
            RejectReason.UNKNOWN_IMPORT,
            f"the module imports {where}, and the host provides no module {imp.module!r}: "
            f"transforms may import only {', '.join(KNOWN_IMPORTS)} (build it with Redpanda's "
            "transform SDK or Sluice's batch SDK, without other host modules)",
        )
    if imp.kind is not ExternKind.FUNC:
        raise _reject(
            RejectReason.UNKNOWN_IMPORT,
            f"the module imports a {imp.kind} {where}; the host provides only functions"
            + (
                " (the guest must define and export its own memory)" if imp.kind == "memory" else ""
            ),
        )
    expected = funcs.get(imp.name)
    versioned = imp.name.startswith("check_abi_version_")
    if expected is None and not versioned:
        raise _reject(
            RejectReason.UNKNOWN_IMPORT,
            f"the module imports {where}, which the host does not provide "
            f"({imp.module} has {', '.join(sorted(funcs))})",
        )
    if expected is not None and imp.signature != expected:
        raise _reject(
            RejectReason.UNKNOWN_IMPORT,
            f"the module imports {where} with type {imp.signature}; the host's has type "
            f"{expected} (an SDK of another version?)",
        )


def _abi_versions(imports: Iterable[Import], module: str) -> list[int]:
    out = []
    for imp in imports:
        if imp.module == module and imp.name.startswith("check_abi_version_"):
            suffix = imp.name.removeprefix("check_abi_version_")
            out.append(int(suffix) if suffix.isdigit() else -1)
    return out


def _detect_abi(imports: tuple[Import, ...]) -> tuple[Abi, int]:
    modules = {imp.module for imp in imports}
    redpanda = modules & {REDPANDA_MODULE, SCHEMA_REGISTRY_MODULE}
    if redpanda and BATCH_MODULE in modules:
        raise _reject(
            RejectReason.UNSUPPORTED_ABI,
            f"the module imports both {REDPANDA_MODULE} and {BATCH_MODULE}: a transform uses "
            "one ABI; build it with one SDK",
        )
    for version in _abi_versions(imports, SCHEMA_REGISTRY_MODULE):
        if version != 0:
            raise _reject(
                RejectReason.UNSUPPORTED_ABI,
                f"the module needs {SCHEMA_REGISTRY_MODULE} ABI version {version}; this host "
                "implements version 0 (use Redpanda's SDK v1.x)",
            )
    supported: tuple[int, ...]
    if BATCH_MODULE in modules:
        module, supported, abi = BATCH_MODULE, BATCH_VERSIONS, Abi.BATCH
    else:
        module, supported, abi = REDPANDA_MODULE, REDPANDA_VERSIONS, Abi.REDPANDA
    versions = _abi_versions(imports, module)
    unsupported = [v for v in versions if v not in supported]
    if unsupported:
        raise _reject(
            RejectReason.UNSUPPORTED_ABI,
            f"the module needs {module} ABI version {unsupported[0]}; this host implements "
            f"version {' and '.join(map(str, supported))} (rebuild it with a supported SDK)",
        )
    if not versions:
        raise _reject(
            RejectReason.MISSING_ABI,
            f"the module imports no ABI version check ({REDPANDA_MODULE}.check_abi_version_2 "
            f"or {BATCH_MODULE}.check_abi_version_1): build it with Redpanda's transform SDK "
            "(Go, Rust, C++) or Sluice's batch SDK (C, AssemblyScript)",
        )
    return abi, max(versions)


def validate_module(data: bytes, *, max_bytes: int | None = None) -> ValidatedModule:
    """The module's description, or ``ModuleRejected`` saying why and what to do.

    ``max_bytes`` is ``transforms.module.max.bytes`` (default: ``Limits().module_max_bytes``).
    """
    limit = Limits().module_max_bytes if max_bytes is None else max_bytes
    if len(data) > limit:
        raise _reject(
            RejectReason.TOO_LARGE,
            f"the module is {len(data):,} bytes; transforms.module.max.bytes is {limit:,} "
            "(build it smaller, e.g. strip debug info, or raise the setting)",
        )
    try:
        shape = wasm_binary.parse(data)
    except WasmFormatError as exc:
        raise _reject(
            RejectReason.NOT_WASM, f"the file is not a WebAssembly module: {exc}"
        ) from exc
    exports = {e.name: e for e in shape.exports}
    start = exports.get("_start")
    if start is None or start.kind is not ExternKind.FUNC or start.signature != VOID:
        raise _reject(
            RejectReason.MISSING_START,
            "the module has no _start function export of type () -> (): build a WASI "
            "command (GOOS=wasip1, wasm32-wasip1) or, with the batch SDK, export _start",
        )
    memory = exports.get("memory")
    if memory is None or memory.kind is not ExternKind.MEMORY:
        raise _reject(
            RejectReason.MISSING_MEMORY,
            "the module exports no memory named 'memory' (the host reads and writes records "
            "there): export it (clang: it is the default; AssemblyScript: --exportRuntime is "
            "not needed, memory is exported by default)",
        )
    for imp in shape.imports:
        _check_import(imp)
    if len(shape.memories) != 1:
        raise _reject(
            RejectReason.MISSING_MEMORY,
            f"the module defines {len(shape.memories)} memories; a transform defines exactly "
            "one (and imports none)",
        )
    mem = shape.memories[0]
    if mem.memory64 or mem.shared:
        raise _reject(
            RejectReason.MISSING_MEMORY,
            "the module's memory is 64-bit or shared; transforms use one 32-bit memory",
        )
    abi, version = _detect_abi(shape.imports)
    if abi is Abi.BATCH:
        for name, sig in ((BATCH_INPUT_EXPORT, _sig("i")), (BATCH_PROCESS_EXPORT, _sig("i"))):
            export = exports.get(name)
            if export is None or export.kind is not ExternKind.FUNC or export.signature != sig:
                raise _reject(
                    RejectReason.MISSING_EXPORT,
                    f"a {BATCH_MODULE} module must export {name} of type {sig} "
                    "(see transforms/ABI.md; the C and AssemblyScript SDKs do)",
                )
    import wasmtime  # noqa: PLC0415 - loaded when a module is first validated (see __init__)

    try:
        wasmtime.Module.validate(_validator(), data)
    except wasmtime.WasmtimeError as exc:
        first = str(exc).strip().splitlines()[-1]
        raise _reject(
            RejectReason.NOT_WASM, f"the module does not validate as WebAssembly: {first}"
        ) from exc
    info = ModuleInfo(
        abi=abi,
        abi_version=version,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        imports=tuple(f"{i.module}.{i.name}" for i in shape.imports),
        memory_min_bytes=mem.minimum * wasm_binary.PAGE,
        memory_max_bytes=None if mem.maximum is None else mem.maximum * wasm_binary.PAGE,
        uses_schema_registry=any(i.module == SCHEMA_REGISTRY_MODULE for i in shape.imports),
    )
    return ValidatedModule(info, bytes(data))


def _bad_text(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


def _check_environment(env: list[tuple[str, str]]) -> None:
    def bad(message: str) -> ModuleRejected:
        return _reject(RejectReason.INVALID_ENVIRONMENT, message)

    if len(env) > MAX_ENV_VARS:
        raise bad(f"{len(env)} variables; at most {MAX_ENV_VARS}")
    seen: set[str] = set()
    for key, value in env:
        if not key:
            raise bad("a variable has an empty name")
        if key in seen:
            raise bad(f"variable {key} is given twice")
        seen.add(key)
        if len(key.encode()) > MAX_ENV_KEY_BYTES:
            raise bad(f"variable name {key[:32]}... is over {MAX_ENV_KEY_BYTES} bytes")
        if "=" in key or _bad_text(key):
            raise bad(f"variable name {key!r} contains '=' or a control character")
        if key.startswith("REDPANDA_"):
            raise bad(f"variable {key}: names starting with REDPANDA_ are reserved")
        if not value:
            raise bad(f"variable {key} has an empty value")
        if len(value.encode()) > MAX_ENV_VALUE_BYTES:
            raise bad(f"variable {key}'s value is over {MAX_ENV_VALUE_BYTES} bytes")
        if _bad_text(value):
            raise bad(f"variable {key}'s value contains a control character")


def validate_spec(
    name: str,
    input_topic: str,
    output_topics: Iterable[str],
    environment: Mapping[str, str] | Iterable[tuple[str, str]] = (),
) -> TransformSpec:
    """A transform's definition, or ``ModuleRejected`` (the topics' existence is the
    caller's to check: it knows the cluster)."""
    if not name or len(name.encode()) > MAX_NAME_BYTES or _bad_text(name):
        raise _reject(
            RejectReason.INVALID_NAME,
            f"transform name {name!r}: 1 to {MAX_NAME_BYTES} bytes, no control characters",
        )
    outputs = tuple(output_topics)
    if not outputs or len(outputs) > MAX_OUTPUT_TOPICS:
        raise _reject(
            RejectReason.TOO_MANY_OUTPUTS,
            f"{len(outputs)} output topics: a transform writes to 1 to {MAX_OUTPUT_TOPICS}",
        )
    for topic in (input_topic, *outputs):
        if not topic or len(topic.encode()) > MAX_TOPIC_NAME_BYTES:
            raise _reject(RejectReason.INVALID_TOPICS, f"invalid topic name {topic!r}")
    if input_topic in outputs:
        raise _reject(
            RejectReason.INVALID_TOPICS,
            f"output topic {input_topic} is the input topic: a transform may not write to "
            "its own input (it would loop)",
        )
    if len(set(outputs)) != len(outputs):
        raise _reject(RejectReason.INVALID_TOPICS, "an output topic is named twice")
    env = list(environment.items() if isinstance(environment, Mapping) else environment)
    _check_environment(env)
    return TransformSpec(name, input_topic, outputs, tuple(env))
