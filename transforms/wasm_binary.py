"""The few parts of the WebAssembly binary format the host reads and rewrites.

A core module (https://webassembly.github.io/spec/core/binary/modules.html)::

    magic       4 bytes   00 61 73 6d ("\\0asm")
    version     4 bytes   01 00 00 00 (a component has 0d 00 01 00: refused)
    sections    repeated: id u8 | size u32 LEB128 | contents (size bytes)

Sections read here (every other one is kept as it is)::

    1  type      vec(functype)   functype = 0x60 vec(valtype) vec(valtype)
    2  import    vec(import)     import = name(module) name(field) importdesc
                                 importdesc = 0x00 typeidx | 0x01 tabletype
                                            | 0x02 memtype | 0x03 globaltype | 0x04 tag
    3  function  vec(typeidx)    the type of each function the module defines
    5  memory    vec(memtype)    memtype = limits: 0x00 min | 0x01 min max
                                 (0x02/0x03 shared, 0x04-0x07 memory64: refused)
    7  export    vec(export)     export = name(field) kind u8 index u32

``name`` is vec(byte) (u32 LEB128 length, UTF-8). Integers are unsigned LEB128.
Validation of the code itself is wasmtime's (``wasmtime.Module.validate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MAGIC = b"\x00asm"
CORE_VERSION = b"\x01\x00\x00\x00"
PAGE = 65536

SECTION_TYPE = 1
SECTION_IMPORT = 2
SECTION_FUNCTION = 3
SECTION_MEMORY = 5
SECTION_EXPORT = 7


_VALTYPES = {0x7F: "i32", 0x7E: "i64", 0x7D: "f32", 0x7C: "f64", 0x7B: "v128"}


class WasmFormatError(ValueError):
    """The bytes are not a well-formed core WebAssembly module (as far as read here)."""


class ExternKind(StrEnum):
    FUNC = "func"
    TABLE = "table"
    MEMORY = "memory"
    GLOBAL = "global"
    TAG = "tag"


_KINDS = {
    0: ExternKind.FUNC,
    1: ExternKind.TABLE,
    2: ExternKind.MEMORY,
    3: ExternKind.GLOBAL,
    4: ExternKind.TAG,
}


@dataclass(frozen=True, slots=True)
class Signature:
    """A function type in core value types, e.g. ``(i32, i32) -> (i32)``."""

    params: tuple[str, ...]
    results: tuple[str, ...]

    def __str__(self) -> str:
        return f"({', '.join(self.params)}) -> ({', '.join(self.results)})"


@dataclass(frozen=True, slots=True)
class Import:
    module: str
    name: str
    kind: ExternKind
    signature: Signature | None
    """For a function: its type (None when the type section uses forms not read here)."""


@dataclass(frozen=True, slots=True)
class Export:
    name: str
    kind: ExternKind
    signature: Signature | None


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """Of the module's own memory, in 64 KiB pages."""

    minimum: int
    maximum: int | None
    shared: bool
    memory64: bool


@dataclass(frozen=True, slots=True)
class ModuleShape:
    """What the host needs to know of a module before compiling it."""

    imports: tuple[Import, ...]
    exports: tuple[Export, ...]
    memories: tuple[MemoryLimits, ...]
    """Memories the module defines (not imported ones)."""


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise WasmFormatError("unexpected end of section")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def u32(self) -> int:
        result = 0
        shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise WasmFormatError("integer too long")

    def u64(self) -> int:
        result = 0
        shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise WasmFormatError("integer too long")

    def name(self) -> str:
        n = self.u32()
        if self.pos + n > self.end:
            raise WasmFormatError("name runs past its section")
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise WasmFormatError("a name is not UTF-8") from exc

    def limits(self) -> MemoryLimits:
        flags = self.byte()
        if flags > 0x07:
            raise WasmFormatError(f"unknown limits flags {flags:#x}")
        memory64 = bool(flags & 0x04)
        minimum = self.u64() if memory64 else self.u32()
        maximum = (self.u64() if memory64 else self.u32()) if flags & 0x01 else None
        return MemoryLimits(minimum, maximum, bool(flags & 0x02), memory64)

    def skip_valtype(self) -> None:
        b = self.byte()
        if b in (0x63, 0x64):  # (ref null ht) / (ref ht): a heap type follows
            self.skip_heaptype()

    def skip_heaptype(self) -> None:
        b = self.buf[self.pos] if self.pos < self.end else 0
        if b & 0x40 and b >= 0x40:  # abstract heap types are single negative bytes
            self.pos += 1
        else:
            self.u64()


def _sections(data: bytes | memoryview) -> list[tuple[int, int, int, int]]:
    """(id, start of header, start of contents, end) for every section."""
    if len(data) < 8 or bytes(data[:4]) != MAGIC:
        raise WasmFormatError("not a WebAssembly module (no \\0asm magic)")
    if bytes(data[4:8]) != CORE_VERSION:
        raise WasmFormatError(
            f"unsupported WebAssembly binary version {bytes(data[4:8]).hex()} "
            "(a component? only core modules, version 1, run as transforms)"
        )
    out = []
    r = _Reader(data, 8, len(data))
    while r.pos < len(data):
        header = r.pos
        section_id = r.byte()
        size = r.u32()
        start = r.pos
        if start + size > len(data):
            raise WasmFormatError(f"section {section_id} runs past the end of the module")
        out.append((section_id, header, start, start + size))
        r.pos = start + size
    return out


def _read_types(data: bytes | memoryview, start: int, end: int) -> list[Signature | None]:
    r = _Reader(data, start, end)
    types: list[Signature | None] = []
    for _ in range(r.u32()):
        form = r.byte()
        if form != 0x60:  # rec / sub types (GC proposal): not read; later types are unknown
            return types
        params = tuple(_VALTYPES.get(r.byte(), "ref") for _ in range(r.u32()))
        results = tuple(_VALTYPES.get(r.byte(), "ref") for _ in range(r.u32()))
        types.append(Signature(params, results))
    return types


def _type(types: list[Signature | None], index: int) -> Signature | None:
    return types[index] if index < len(types) else None


def _read_import(r: _Reader, types: list[Signature | None]) -> Import:
    module, name = r.name(), r.name()
    kind = _KINDS.get(r.byte())
    signature: Signature | None = None
    if kind is ExternKind.FUNC:
        signature = _type(types, r.u32())
    elif kind is ExternKind.TABLE:
        r.skip_valtype()
        r.limits()
    elif kind is ExternKind.MEMORY:
        r.limits()
    elif kind is ExternKind.GLOBAL:
        r.skip_valtype()
        r.byte()
    elif kind is ExternKind.TAG:
        r.byte()
        r.u32()
    else:
        raise WasmFormatError(f"import {module}.{name} has an unknown kind")
    return Import(module, name, kind, signature)


def parse(data: bytes | memoryview) -> ModuleShape:  # noqa: PLR0912 - one branch per section
    """Imports, exports (with function types) and defined memories of a core module."""
    types: list[Signature | None] = []
    imports: list[Import] = []
    imported_funcs: list[Signature | None] = []
    defined_funcs: list[int] = []
    memories: list[MemoryLimits] = []
    raw_exports: list[tuple[str, ExternKind, int]] = []
    for section_id, _, start, end in _sections(data):
        r = _Reader(data, start, end)
        if section_id == SECTION_TYPE:
            types = _read_types(data, start, end)
        elif section_id == SECTION_IMPORT:
            for _ in range(r.u32()):
                imp = _read_import(r, types)
                if imp.kind is ExternKind.FUNC:
                    imported_funcs.append(imp.signature)
                imports.append(imp)
        elif section_id == SECTION_FUNCTION:
            defined_funcs = [r.u32() for _ in range(r.u32())]
        elif section_id == SECTION_MEMORY:
            memories = [r.limits() for _ in range(r.u32())]
        elif section_id == SECTION_EXPORT:
            for _ in range(r.u32()):
                name = r.name()
                kind = _KINDS.get(r.byte())
                if kind is None:
                    raise WasmFormatError(f"export {name} has an unknown kind")
                raw_exports.append((name, kind, r.u32()))
    exports = []
    for name, kind, index in raw_exports:
        signature = None
        if kind is ExternKind.FUNC:
            if index < len(imported_funcs):
                signature = imported_funcs[index]
            elif index - len(imported_funcs) < len(defined_funcs):
                signature = _type(types, defined_funcs[index - len(imported_funcs)])
        exports.append(Export(name, kind, signature))
    return ModuleShape(tuple(imports), tuple(exports), tuple(memories))
