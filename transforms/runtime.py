"""The engine: compile validated modules once, run one instance per (transform, partition).

``Runtime`` holds the wasmtime engine (fuel metering on) and the compiled shim;
``Runtime.compile`` turns a ``ValidatedModule`` into a ``CompiledModule`` (shared by every
instance of it); ``Runtime.instantiate`` starts an ``Instance``.

An instance owns one thread, and its wasmtime store is touched by that thread only.
``process`` (blocking) and ``aprocess`` (awaitable, without an executor) hand one batch to
that thread and wait for its result; wasmtime releases the GIL while guest code runs, so
the event loop keeps running. For Redpanda's ABI the thread is the guest's own
``_start``, blocked in ``read_batch_header`` between batches; for the batch ABI it is a
loop that calls the shim's ``run`` once per batch. See README.md for why (measured).

A failed call raises ``TransformFailure`` and leaves the instance ``FAILED``: every later
call raises the same failure; ``close`` and a new instance are the way on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import wasmtime

from transforms import host_wat
from transforms.errors import FailureReason, TransformFailure
from transforms.host_wat import Ctl, ShimFailure
from transforms.limits import Limits
from transforms.module import (
    BATCH_FUNCS,
    BATCH_INPUT_EXPORT,
    BATCH_MODULE,
    BATCH_PROCESS_EXPORT,
    REDPANDA_FUNCS,
    REDPANDA_MODULE,
    SCHEMA_REGISTRY_FUNCS,
    SCHEMA_REGISTRY_MODULE,
    WASI_FUNCS,
    WASI_MODULE,
    Abi,
    ModuleInfo,
    TransformSpec,
    ValidatedModule,
)
from transforms.records import InputBatch, LogStream, OutputBatch, TransformResult
from transforms.wasi import SHIM_WASI, GuestMemory, LogSink, OutOfBounds, Wasi
from transforms.wasm_binary import Signature

_I32 = wasmtime.ValType.i32()
_HEADER = struct.Struct("<qiihxxiqqqhxxi")  # the ten header fields, shim and batch-ABI layout
_BATCH_INPUT = struct.Struct("<qiihxxiqqqhxxiii")  # + records_len, topic_count (64 bytes)
_SECTIONS = struct.Struct("<" + "iii" * 8)
_SR_NAMES = {
    "check_abi_version_0": "sr_check_abi_version_0",
    "get_schema_definition_len": "sr_schema_len",
    "get_schema_definition": "sr_schema",
    "get_subject_schema_len": "sr_subject_len",
    "get_subject_schema": "sr_subject",
    "create_subject_schema": "sr_create",
}
_LINKS: list[tuple[str, str, str, Signature]] = [
    *((REDPANDA_MODULE, n, n, sig) for n, sig in REDPANDA_FUNCS.items()),
    *((SCHEMA_REGISTRY_MODULE, n, _SR_NAMES[n], sig) for n, sig in SCHEMA_REGISTRY_FUNCS.items()),
    *((WASI_MODULE, n, n, WASI_FUNCS[n]) for n in SHIM_WASI),
    (
        BATCH_MODULE,
        "check_abi_version_1",
        "batch_check_abi_version_1",
        BATCH_FUNCS["check_abi_version_1"],
    ),
    (BATCH_MODULE, "fail", "batch_fail", BATCH_FUNCS["fail"]),
]
"""(guest's import module, name, shim export, type): the calls the shim answers."""
GO_ARENA = 4 * 1024 * 1024
"""Go's heap grows in 4 MiB arenas on wasm: a failure with less than that left is OOM."""


class InstanceState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class CompiledModule:
    """A module compiled for one ``Runtime``; instances share it (thread-safe)."""

    info: ModuleInfo
    module: wasmtime.Module


class Runtime:
    """One per process: the engine, its compiled shim, and what compiles modules."""

    def __init__(self) -> None:
        config = wasmtime.Config()
        config.consume_fuel = True
        self.engine = wasmtime.Engine(config)
        self._shim = wasmtime.Module(self.engine, host_wat.WAT)
        self._trampolines = wasmtime.Module(
            self.engine,
            host_wat.trampolines(
                [(f"{m}.{n}", sig.params, sig.results) for m, n, _, sig in _LINKS]
            ),
        )

    def compile(self, validated: ValidatedModule) -> CompiledModule:
        """Compiles (CPU-bound, ~1 s for a 2 MB Go module; releases the GIL): call it in a
        worker thread and keep the result for every instance of the module."""
        return CompiledModule(validated.info, wasmtime.Module(self.engine, validated.wasm))

    def instantiate(
        self, compiled: CompiledModule, spec: TransformSpec, limits: Limits | None = None
    ) -> Instance:
        """Starts an instance and waits until the guest is ready for its first batch
        (raises ``TransformFailure(STARTUP, ...)`` when it does not get there)."""
        instance = Instance(self, compiled, spec, limits or Limits())
        instance.wait_ready()
        return instance

    async def ainstantiate(
        self, compiled: CompiledModule, spec: TransformSpec, limits: Limits | None = None
    ) -> Instance:
        instance = Instance(self, compiled, spec, limits or Limits())
        await asyncio.wrap_future(instance.ready_future)
        return instance


_STOP = object()


class _Job:
    __slots__ = ("batch", "future")

    def __init__(self, batch: InputBatch) -> None:
        self.batch = batch
        self.future: concurrent.futures.Future[TransformResult] = concurrent.futures.Future()


class Instance:
    """One transform on one input partition; see the module docstring."""

    def __init__(
        self, runtime: Runtime, compiled: CompiledModule, spec: TransformSpec, limits: Limits
    ) -> None:
        self.spec = spec
        self.info = compiled.info
        self.limits = limits
        self.state = InstanceState.STARTING
        self.failure: TransformFailure | None = None
        self.ready_future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._runtime = runtime
        self._compiled = compiled
        self._jobs: queue.SimpleQueue[_Job | object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(
            target=self._run, name=f"transform-{spec.name}-{spec.input_topic}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ public

    def wait_ready(self, timeout: float | None = None) -> None:
        self.ready_future.result(timeout)

    def process(self, batch: InputBatch, timeout: float | None = None) -> TransformResult:
        """Runs one batch; blocks the calling thread (see ``aprocess``)."""
        return self._submit(batch).result(timeout)

    async def aprocess(self, batch: InputBatch) -> TransformResult:
        """Runs one batch on the instance's thread; the event loop only awaits."""
        return await asyncio.wrap_future(self._submit(batch))

    def close(self, timeout: float | None = 10.0) -> None:
        """Stops the guest and its thread (idempotent)."""
        with self._lock:
            self._closing = True
            if self.state is not InstanceState.FAILED:
                self.state = InstanceState.CLOSED
        self._jobs.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ plumbing

    def _submit(self, batch: InputBatch) -> concurrent.futures.Future[TransformResult]:
        job = _Job(batch)
        with self._lock:
            if self.failure is not None:
                job.future.set_exception(self.failure)
                return job.future
            if self._closing:
                job.future.set_exception(
                    TransformFailure(FailureReason.CLOSED, "the instance is closed")
                )
                return job.future
            self._jobs.put(job)
        return job.future

    def _fail(self, failure: TransformFailure, job: _Job | None) -> None:
        with self._lock:
            if self.failure is None and not self._closing:
                self.failure = failure
                self.state = InstanceState.FAILED
        if not self.ready_future.done():
            self.ready_future.set_exception(failure)
        if job is not None and not job.future.done():
            job.future.set_exception(failure)
        self._drain(failure)

    def _drain(self, failure: TransformFailure) -> None:
        """Fails every job still queued (after a failure or close)."""
        while True:
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Job) and not item.future.done():
                item.future.set_exception(self.failure or failure)

    def _ready(self) -> None:
        with self._lock:
            if self.state is InstanceState.STARTING:
                self.state = InstanceState.READY
        if not self.ready_future.done():
            self.ready_future.set_result(None)

    def _next_job(self) -> _Job | None:
        item = self._jobs.get()
        return item if isinstance(item, _Job) else None

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        closed = TransformFailure(FailureReason.CLOSED, "the instance was closed")
        try:
            driver = _Driver(self)
        except TransformFailure as exc:
            self._fail(exc, None)
            return
        except Exception as exc:
            self._fail(TransformFailure(FailureReason.STARTUP, f"cannot start: {exc}"), None)
            return
        try:
            if self.info.abi is Abi.REDPANDA:
                driver.run_redpanda()
            else:
                driver.run_batch()
        finally:
            if not self.ready_future.done():
                self.ready_future.set_exception(self.failure or closed)
            self._drain(closed)


class _Driver:
    """Everything that touches the store, on the instance's thread."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        rt = inst._runtime
        compiled = inst._compiled
        limits = inst.limits
        info = compiled.info
        self.store = wasmtime.Store(rt.engine)
        # memory_size bounds each memory: the guest's, and the shim's input and output ones
        self.store.set_limits(
            memory_size=limits.memory_max_bytes,
            table_elements=1_000_000,
            instances=4,
            tables=8,
            memories=8,
        )
        self.store.set_fuel(limits.fuel_startup)  # instantiation runs (data, elements)
        self.memory_limit = limits.memory_max_bytes
        if info.memory_max_bytes is not None:
            self.memory_limit = min(self.memory_limit, info.memory_max_bytes)
        if info.memory_min_bytes > limits.memory_max_bytes:
            raise TransformFailure(
                FailureReason.MEMORY_LIMIT,
                f"the module needs {info.memory_min_bytes:,} bytes of memory to start; "
                f"transforms.memory.max.bytes is {limits.memory_max_bytes:,}",
            )
        self.logs = LogSink(limits.log_line_max_bytes, limits.log_max_bytes_per_call)
        linker = wasmtime.Linker(rt.engine)
        trampolines = linker.instantiate(self.store, rt._trampolines).exports(self.store)
        for module, name, _, _ in _LINKS:
            linker.define(self.store, module, name, _func(trampolines[f"{module}.{name}"]))
        linker.define_func(
            BATCH_MODULE, "log", wasmtime.FuncType([_I32, _I32, _I32], []), self._log
        )
        spec = inst.spec
        self.wasi = Wasi(None, [spec.name], spec.guest_environment(), self.logs)
        self.wasi.define(linker)
        self.instance = linker.instantiate(self.store, compiled.module)
        self.exports = self.instance.exports(self.store)
        memory = self.exports["memory"]
        assert isinstance(memory, wasmtime.Memory)
        self.guest = GuestMemory(memory, self.store)
        self.wasi.memory = self.guest
        linker.define(self.store, host_wat.MEMORY_MODULE, "memory", memory)
        linker.define_func(
            host_wat.MEMORY_MODULE, "next_batch", wasmtime.FuncType([], [_I32]), self._next_batch
        )
        shim = linker.instantiate(self.store, rt._shim).exports(self.store)
        self.shim = shim
        table = trampolines["t"]
        assert isinstance(table, wasmtime.Table)
        for i, (_, _, shim_name, _) in enumerate(_LINKS):
            table.set(self.store, i, _func(shim[shim_name]))
        ctl = shim["ctl"]
        out = shim["out"]
        assert isinstance(ctl, wasmtime.Memory)
        assert isinstance(out, wasmtime.Memory)
        self.ctl = GuestMemory(ctl, self.store)
        self.out = GuestMemory(out, self.store)
        self._write_topics(spec)
        self.job: _Job | None = None
        self.budget = 0
        self.started = False
        self.input_ptr = 0
        self.input_cap = 0

    def _write_topics(self, spec: TransformSpec) -> None:
        ctl = self.ctl
        ctl.put_u32(Ctl.TOPIC_COUNT, len(spec.output_topics))
        ctl.put_u32(Ctl.OUT_LIMIT, self.inst.limits.output_max_bytes)
        for i, topic in enumerate(spec.output_topics):
            raw = topic.encode()[: host_wat.TOPIC_NAME_MAX]
            ptr = Ctl.TOPIC_NAMES + i * host_wat.TOPIC_NAME_MAX
            ctl.write(ptr, raw)
            ctl.put_u32(Ctl.TOPIC_TABLE + 8 * i, ptr)
            ctl.put_u32(Ctl.TOPIC_TABLE + 8 * i + 4, len(raw))

    def _log(self, stream: int, ptr: int, n: int) -> None:
        try:
            data = self.guest.read(ptr, n)
        except OutOfBounds:
            data = b"[sluice: log() with a buffer outside memory]"
        self.logs.write(LogStream.STDOUT if stream == 1 else LogStream.STDERR, data)

    # ------------------------------------------------------------------ Redpanda ABI

    def run_redpanda(self) -> None:
        inst = self.inst
        start = self.exports["_start"]
        assert isinstance(start, wasmtime.Func)
        self.store.set_fuel(inst.limits.fuel_startup)
        try:
            start(self.store)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            if not inst._closing:
                inst._fail(self._classify(exc), self.job)
            return
        if not inst._closing:
            inst._fail(
                self._failure(FailureReason.EXIT, "the guest returned from _start", ""), self.job
            )

    def _next_batch(self) -> int:
        """The shim's call when the guest asks for a batch (its previous one is done)."""
        try:
            if self.job is not None:
                job, self.job = self.job, None
                failure = self._shim_failure_after_batch()
                if failure is not None:
                    self.inst._fail(failure, job)
                    return 0
                job.future.set_result(self._result(job, self.out))
            if not self.started:
                self.started = True
                self.inst._ready()
            upcoming = self.inst._next_job()
            if upcoming is None:
                return 0
            self.job = upcoming
            self._load_redpanda(upcoming.batch)
        except Exception as exc:
            self.inst._fail(TransformFailure(FailureReason.TRAP, f"host error: {exc!r}"), self.job)
            return 0
        return 1

    def _load_redpanda(self, batch: InputBatch) -> None:
        h = batch.header
        ctl = self.ctl
        ctl.grow_to(Ctl.INPUT + len(batch.records))
        ctl.write(Ctl.INPUT, batch.records)
        ctl.write(
            Ctl.IN_POS,
            struct.pack("<ii", Ctl.INPUT, Ctl.INPUT + len(batch.records)),
        )
        ctl.write(
            Ctl.BASE_OFFSET,
            struct.pack(
                "<qqqi", h.base_offset, h.base_timestamp, h.max_timestamp, h.log_append_time
            ),
        )
        ctl.write(Ctl.HEADER, _header(batch))
        self.budget = self.inst.limits.batch_fuel(h.record_count)
        self.store.set_fuel(self.budget)

    def _shim_failure_after_batch(self) -> TransformFailure | None:
        code = self.ctl.u32(Ctl.FAILURE)
        if code == ShimFailure.UNKNOWN_TOPIC:
            return self._failure(FailureReason.UNKNOWN_TOPIC, self._unknown_topic(), "")
        return None

    # ------------------------------------------------------------------ batch ABI

    def run_batch(self) -> None:
        inst = self.inst
        start = self.exports["_start"]
        run = self.shim["run"]
        table = self.shim["fns"]
        assert isinstance(start, wasmtime.Func)
        assert isinstance(run, wasmtime.Func)
        assert isinstance(table, wasmtime.Table)
        table.set(self.store, 0, self.exports[BATCH_INPUT_EXPORT])
        table.set(self.store, 1, self.exports[BATCH_PROCESS_EXPORT])
        self.store.set_fuel(inst.limits.fuel_startup)
        try:
            start(self.store)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            inst._fail(self._classify(exc, startup=True), None)
            return
        self.started = True
        inst._ready()
        while True:
            job = inst._next_job()
            if job is None:
                return
            self.job = job
            try:
                result = self._run_batch(job.batch, run)
            except TransformFailure as failure:
                inst._fail(failure, job)
                return
            except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
                inst._fail(self._classify(exc), job)
                return
            self.job = None
            job.future.set_result(result)

    def _run_batch(self, batch: InputBatch, run: wasmtime.Func) -> TransformResult:
        h = batch.header
        data = (
            _BATCH_INPUT.pack(
                *_fields(batch), len(batch.records), len(self.inst.spec.output_topics)
            )
            + batch.records
        )
        if len(data) > self.input_cap:
            reserve = self.exports[BATCH_INPUT_EXPORT]
            assert isinstance(reserve, wasmtime.Func)
            self.store.set_fuel(self.inst.limits.fuel_per_batch)
            ptr = reserve(self.store, len(data))
            if not isinstance(ptr, int) or ptr <= 0:
                raise self._failure(
                    FailureReason.MEMORY_LIMIT,
                    f"{BATCH_INPUT_EXPORT}({len(data)}) found no room for the batch",
                    "",
                )
            self.input_ptr, self.input_cap = ptr, len(data)
        try:
            self.guest.write(self.input_ptr, data)
        except OutOfBounds as exc:
            raise self._failure(
                FailureReason.INVALID_OUTPUT, f"{BATCH_INPUT_EXPORT} returned a bad buffer", ""
            ) from exc
        wall = h.max_timestamp if h.log_append_time else h.base_timestamp
        self.ctl.write(Ctl.WALL_MS, struct.pack("<q", wall))
        self.budget = self.inst.limits.batch_fuel(h.record_count)
        self.store.set_fuel(self.budget)
        rc = run(self.store, len(data))
        if rc == ShimFailure.UNKNOWN_TOPIC:
            index = self.ctl.u32(Ctl.FAILURE_DETAIL)
            raise self._failure(
                FailureReason.UNKNOWN_TOPIC,
                f"the guest wrote to output topic index {index}; it has "
                f"{len(self.inst.spec.output_topics)} output topics "
                f"({', '.join(self.inst.spec.output_topics)})",
                "",
            )
        if rc == ShimFailure.OUTPUT_TOO_LARGE:
            raise self._too_large()
        if rc == ShimFailure.INVALID_OUTPUT:
            raise self._failure(
                FailureReason.INVALID_OUTPUT,
                "the guest's output descriptor or records are malformed (see transforms/ABI.md)",
                "",
            )
        if rc == ShimFailure.NO_OUTPUT:
            raise self._failure(
                FailureReason.PANIC,
                f"{BATCH_PROCESS_EXPORT} returned 0 without calling sluice_batch.fail",
                self.logs.take_stderr_text(),
            )
        return self._result(self.job or _Job(batch), self.guest)

    # ------------------------------------------------------------------ results

    def _result(self, job: _Job, memory: GuestMemory) -> TransformResult:
        sections = _SECTIONS.unpack(self.ctl.read(Ctl.SECTIONS, _SECTIONS.size))
        topics = self.inst.spec.output_topics
        outputs = []
        for i, topic in enumerate(topics):
            ptr, n, count = sections[3 * i : 3 * i + 3]
            if count:
                outputs.append(OutputBatch(i, topic, count, memory.read(ptr, n)))
        self.logs.take_stderr_text()
        return TransformResult(
            last_offset=job.batch.header.last_offset,
            outputs=tuple(outputs),
            logs=self.logs.take(),
            fuel_used=self.budget - self.store.get_fuel(),
            memory_bytes=self.guest.size,
            memory_limit=self.memory_limit,
        )

    def _failure(self, reason: FailureReason, message: str, guest_text: str) -> TransformFailure:
        return TransformFailure(reason, message, guest_text=guest_text, logs=self.logs.take())

    def _unknown_topic(self) -> str:
        n = self.ctl.u32(Ctl.TEXT)
        name = self.ctl.read(Ctl.TEXT + 4, n).decode("utf-8", "replace")
        return (
            f"the guest wrote to topic {name!r}, which is not one of its output topics "
            f"({', '.join(self.inst.spec.output_topics)})"
        )

    def _too_large(self) -> TransformFailure:
        return self._failure(
            FailureReason.OUTPUT_TOO_LARGE,
            f"the output of one input batch passed transforms.output.max.bytes "
            f"({self.inst.limits.output_max_bytes:,} bytes)",
            "",
        )

    def _near_memory_limit(self) -> bool:
        limit = self.memory_limit
        return limit - self.guest.size < max(GO_ARENA, limit // 16)

    def _classify(self, exc: Exception, *, startup: bool = False) -> TransformFailure:
        """The failure a trap (or an error of wasmtime's) stands for."""
        detail = str(exc).strip() or repr(exc)
        lines = [line.strip() for line in detail.splitlines() if line.strip()]
        summary = lines[-1] if lines else detail  # wasmtime's cause, after the backtrace
        code = self.ctl.u32(Ctl.FAILURE)
        stderr = self.logs.take_stderr_text()
        startup = startup or not self.started
        exit_code: int | None = None
        if code == ShimFailure.OUTPUT_TOO_LARGE:
            failure = self._too_large()
        elif code == ShimFailure.UNKNOWN_TOPIC:
            failure = self._failure(FailureReason.UNKNOWN_TOPIC, self._unknown_topic(), stderr)
        elif isinstance(exc, wasmtime.Trap) and exc.trap_code == wasmtime.TrapCode.OUT_OF_FUEL:
            what = "starting" if startup else "one batch"
            failure = self._failure(
                FailureReason.BUDGET_EXHAUSTED,
                f"the guest used its whole CPU budget for {what} "
                f"({self.budget if not startup else self.inst.limits.fuel_startup:,} fuel: "
                "transforms.cpu.fuel.per.record / .per.batch / .startup); an endless loop?",
                stderr,
            )
        elif code == ShimFailure.GUEST_FAIL:
            n = self.ctl.u32(Ctl.TEXT)
            text = self.ctl.read(Ctl.TEXT + 4, n).decode("utf-8", "replace")
            failure = self._failure(FailureReason.PANIC, "the guest failed", text or stderr)
        else:
            reason = FailureReason.TRAP
            message = f"the guest trapped: {summary}"
            if code == ShimFailure.EXIT:
                exit_code = self.ctl.u32(Ctl.FAILURE_DETAIL)
                panicked = "panic:" in stderr or "fatal error:" in stderr
                reason = FailureReason.PANIC if panicked else FailureReason.EXIT
                message = f"the guest exited with code {exit_code}"
            if "out of memory" in stderr or (
                reason is not FailureReason.EXIT and self._near_memory_limit()
            ):
                reason = FailureReason.MEMORY_LIMIT
                message = (
                    f"{message}, with its memory at {self.guest.size:,} of "
                    f"{self.memory_limit:,} bytes (transforms.memory.max.bytes)"
                )
            elif self.ctl.u32(Ctl.INVALID_WRITE) and not startup:
                reason = FailureReason.INVALID_OUTPUT
                message = f"{message}, after a write the host refused as malformed (-2)"
            failure = self._failure(reason, message, stderr)
        if startup and failure.reason not in (FailureReason.MEMORY_LIMIT,):
            failure = TransformFailure(
                FailureReason.STARTUP,
                f"the guest did not reach its first batch: {failure.message}",
                guest_text=failure.guest_text,
                logs=failure.logs,
            )
        failure.detail = detail
        failure.exit_code = exit_code
        return failure


def _func(item: object) -> wasmtime.Func:
    assert isinstance(item, wasmtime.Func)
    return item


def _fields(batch: InputBatch) -> tuple[int, ...]:
    h = batch.header
    return (
        h.base_offset,
        h.record_count,
        h.partition_leader_epoch,
        h.attributes,
        h.last_offset_delta,
        h.base_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
    )


def _header(batch: InputBatch) -> bytes:
    return _HEADER.pack(*_fields(batch))


Callback = Callable[..., object]
