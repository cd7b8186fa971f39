"""WASI preview1 for guests, as Redpanda's host provides it, and the guest's log lines.

The functions a guest calls per record (clocks, ``sched_yield``) and the one that must not
return (``proc_exit``) are WebAssembly, in the shim (``host_wat``); the rest are here, in
Python: arguments and environment (read once at start), ``fd_write`` to stdout/stderr (log
lines), ``random_get`` (the OS's randomness), ``poll_oneoff`` (clock subscriptions only:
a sleep returns at once, as in Redpanda). Files, directories and sockets do not exist:
those calls answer ENOSYS (preopened directories: EBADF, so a WASI libc finds none).

No callback here raises: an exception inside a wasmtime-py callback is kept in a
process-wide variable that another thread's call could pick up, so a callback that
cannot do its work answers an errno instead (EFAULT for a pointer outside memory).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable, Sequence

import wasmtime

from transforms.module import WASI_FUNCS, WASI_MODULE
from transforms.records import LogLine, LogStream

ERRNO_SUCCESS = 0
ERRNO_BADF = 8
ERRNO_FAULT = 21
ERRNO_INVAL = 28
ERRNO_NOSYS = 52

SHIM_WASI = ("clock_time_get", "clock_res_get", "sched_yield", "proc_exit")
"""WASI functions the shim implements (the rest are defined here)."""

_I32 = wasmtime.ValType.i32()
_I64 = wasmtime.ValType.i64()
_U32 = struct.Struct("<I")
_IOVEC = struct.Struct("<II")
_EVENT = struct.Struct("<QHBxxxxxQHxxxxxx")  # userdata, error, type, (fd_readwrite)
TEXT_HEAD = 2048
TEXT_TAIL = 2048
SUBSCRIPTION_SIZE = 48
EVENT_SIZE = 32
EVENTTYPE_CLOCK = 0


class OutOfBounds(Exception):
    """A guest pointer outside its memory."""


class GuestMemory:
    """Bounds-checked copies in and out of one linear memory (used on the store's thread)."""

    __slots__ = ("_memory", "_store")

    def __init__(self, memory: wasmtime.Memory, store: wasmtime.Store) -> None:
        self._memory = memory
        self._store = store

    @property
    def size(self) -> int:
        return self._memory.data_len(self._store)

    @property
    def pages(self) -> int:
        return self._memory.size(self._store)

    def _base(self, ptr: int, n: int) -> int:
        if ptr < 0 or n < 0 or ptr + n > self._memory.data_len(self._store):
            raise OutOfBounds(f"{n} bytes at {ptr} are outside the guest's memory")
        return ctypes.addressof(self._memory.data_ptr(self._store).contents) + ptr

    def read(self, ptr: int, n: int) -> bytes:
        if n == 0:
            return b""
        return ctypes.string_at(self._base(ptr, n), n)

    def write(self, ptr: int, data: bytes) -> None:
        if data:
            ctypes.memmove(self._base(ptr, len(data)), data, len(data))

    def u32(self, ptr: int) -> int:
        value: int = _U32.unpack(self.read(ptr, 4))[0]
        return value

    def put_u32(self, ptr: int, value: int) -> None:
        self.write(ptr, _U32.pack(value & 0xFFFFFFFF))

    def grow_to(self, size: int) -> None:
        """Grows the memory (a host-owned one) to at least ``size`` bytes."""
        have = self._memory.data_len(self._store)
        if size > have:
            self._memory.grow(self._store, (size - have + 65535) // 65536)


class LogSink:
    """The guest's output, cut into lines; what one call wrote is taken after it."""

    def __init__(self, line_max: int, call_max: int) -> None:
        self._line_max = line_max
        self._call_max = call_max
        self._pending: dict[LogStream, bytearray] = {s: bytearray() for s in LogStream}
        self._lines: list[LogLine] = []
        self._kept = 0
        self._dropped = 0
        self._stderr_head = bytearray()
        self._stderr_tail = bytearray()

    def write(self, stream: LogStream, data: bytes) -> None:
        if stream is LogStream.STDERR:
            room = TEXT_HEAD - len(self._stderr_head)
            if room > 0:
                self._stderr_head += data[:room]
                data_rest = data[room:]
            else:
                data_rest = data
            self._stderr_tail += data_rest
            del self._stderr_tail[:-TEXT_TAIL]
        pending = self._pending[stream]
        pending += data
        while True:
            cut = pending.find(b"\n")
            if cut < 0:
                break
            self._line(stream, bytes(pending[:cut]))
            del pending[: cut + 1]
        if len(pending) > self._line_max:
            self._line(stream, bytes(pending))
            pending.clear()

    def _line(self, stream: LogStream, raw: bytes) -> None:
        raw = raw[: self._line_max]
        if self._kept + len(raw) > self._call_max:
            self._dropped += len(raw)
            return
        self._kept += len(raw)
        self._lines.append(LogLine(stream, raw.decode("utf-8", "replace")))

    def take(self) -> tuple[LogLine, ...]:
        """The lines since the last take (partial lines included)."""
        for stream, pending in self._pending.items():
            if pending:
                self._line(stream, bytes(pending))
                pending.clear()
        if self._dropped:
            self._lines.append(
                LogLine(
                    LogStream.STDERR,
                    f"[sluice: {self._dropped} bytes of log output dropped (over "
                    "transforms.logging.max.bytes.per.call)]",
                )
            )
        lines = tuple(self._lines)
        self._lines = []
        self._kept = self._dropped = 0
        return lines

    def take_stderr_text(self) -> str:
        """What the guest wrote to stderr since the last call of this: its first 2 KiB (a Go
        panic's message comes first, its goroutine dump after) and its last 2 KiB."""
        head = self._stderr_head.decode("utf-8", "replace")
        tail = self._stderr_tail.decode("utf-8", "replace")
        text = head + ("\n[...]\n" if tail else "") + tail
        self._stderr_head.clear()
        self._stderr_tail.clear()
        return text.strip()


class Wasi:
    """The Python half of WASI preview1 for one instance."""

    def __init__(
        self,
        memory: GuestMemory | None,
        args: Sequence[str],
        env: Sequence[tuple[str, str]],
        logs: LogSink,
    ) -> None:
        self._memory = memory
        self.logs = logs
        self._args = [a.encode() + b"\x00" for a in args]
        self._env = [f"{k}={v}".encode() + b"\x00" for k, v in env]

    @property
    def memory(self) -> GuestMemory:
        """The guest's memory (set once the guest is instantiated)."""
        if self._memory is None:
            raise OutOfBounds("the guest's memory is not there yet")
        return self._memory

    @memory.setter
    def memory(self, memory: GuestMemory) -> None:
        self._memory = memory

    def define(self, linker: wasmtime.Linker) -> None:
        """Every WASI function but the shim's, on ``linker``."""
        own: dict[str, Callable[..., int]] = {
            "args_sizes_get": lambda count, size: self._sizes(self._args, count, size),
            "args_get": lambda ptrs, buf: self._strings(self._args, ptrs, buf),
            "environ_sizes_get": lambda count, size: self._sizes(self._env, count, size),
            "environ_get": lambda ptrs, buf: self._strings(self._env, ptrs, buf),
            "fd_write": self._fd_write,
            "random_get": self._random_get,
            "poll_oneoff": self._poll_oneoff,
            "fd_prestat_get": lambda fd, _ptr: ERRNO_NOSYS if fd <= 2 else ERRNO_BADF,
        }
        for name, sig in WASI_FUNCS.items():
            if name in SHIM_WASI:
                continue
            ty = wasmtime.FuncType(
                [_I64 if p == "i64" else _I32 for p in sig.params],
                [_I32 for _ in sig.results],
            )
            linker.define_func(WASI_MODULE, name, ty, own.get(name, _nosys))

    def _sizes(self, items: list[bytes], count_ptr: int, size_ptr: int) -> int:
        try:
            self.memory.put_u32(count_ptr, len(items))
            self.memory.put_u32(size_ptr, sum(len(i) for i in items))
        except OutOfBounds:
            return ERRNO_FAULT
        return ERRNO_SUCCESS

    def _strings(self, items: list[bytes], ptrs: int, buf: int) -> int:
        try:
            pos = buf
            for i, item in enumerate(items):
                self.memory.put_u32(ptrs + 4 * i, pos)
                self.memory.write(pos, item)
                pos += len(item)
        except OutOfBounds:
            return ERRNO_FAULT
        return ERRNO_SUCCESS

    def _fd_write(self, fd: int, iovs: int, iovs_len: int, written_ptr: int) -> int:
        if fd not in (1, 2):
            return ERRNO_BADF
        try:
            raw = self.memory.read(iovs, 8 * iovs_len)
            data = b"".join(
                self.memory.read(p, n)
                for p, n in (_IOVEC.unpack_from(raw, 8 * i) for i in range(iovs_len))
            )
            self.memory.put_u32(written_ptr, len(data))
        except OutOfBounds:
            return ERRNO_FAULT
        self.logs.write(LogStream.STDOUT if fd == 1 else LogStream.STDERR, data)
        return ERRNO_SUCCESS

    def _random_get(self, buf: int, n: int) -> int:
        try:
            self.memory.write(buf, os.urandom(n))
        except OutOfBounds:
            return ERRNO_FAULT
        return ERRNO_SUCCESS

    def _poll_oneoff(self, subs: int, events: int, count: int, out_ptr: int) -> int:
        try:
            raw = self.memory.read(subs, SUBSCRIPTION_SIZE * count)
            for i in range(count):
                userdata, tag = struct.unpack_from("<QB", raw, SUBSCRIPTION_SIZE * i)
                error = ERRNO_SUCCESS if tag == EVENTTYPE_CLOCK else ERRNO_NOSYS
                self.memory.write(events + EVENT_SIZE * i, _EVENT.pack(userdata, error, tag, 0, 0))
            self.memory.put_u32(out_ptr, count)
        except OutOfBounds:
            return ERRNO_FAULT
        return ERRNO_SUCCESS


def _nosys(*_args: int) -> int:
    return ERRNO_NOSYS
