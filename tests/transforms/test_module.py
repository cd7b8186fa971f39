"""Deploy-time validation: every built guest passes with its ABI; every refusal is typed and
says what to do; transform definitions are checked as Redpanda's controller checks them."""

from __future__ import annotations

import pytest
import wasmtime

from tests.transforms.conftest import Guests
from transforms.errors import ModuleRejected, RejectReason
from transforms.limits import CONFIG_KEYS, MIB, Limits
from transforms.module import Abi, validate_module, validate_spec

RP = '(import "redpanda_transform" "check_abi_version_2" (func))'
BATCH = '(import "sluice_batch" "check_abi_version_1" (func))'
START = '(func (export "_start"))'
MEMORY = '(memory (export "memory") 1)'
BATCH_EXPORTS = (
    '(func (export "sluice_batch_input") (param i32) (result i32) (i32.const 0))'
    '(func (export "sluice_batch_process") (param i32) (result i32) (i32.const 0))'
)


def wasm(*parts: str) -> bytes:
    return bytes(wasmtime.wat2wasm("(module " + " ".join(parts) + ")"))


def rejected(data: bytes, **kwargs: int) -> ModuleRejected:
    with pytest.raises(ModuleRejected) as info:
        validate_module(data, **kwargs)
    return info.value


@pytest.mark.parametrize(
    ("family", "name", "abi", "version"),
    [
        ("go", "identity", Abi.REDPANDA, 2),
        ("go", "route", Abi.REDPANDA, 2),
        ("c", "jsonfilter", Abi.BATCH, 1),
        ("as", "uppercase", Abi.BATCH, 1),
        ("wat", "identity", Abi.BATCH, 1),
        ("wat", "rp_meta", Abi.REDPANDA, 2),
    ],
)
def test_built_guests_pass(guests: Guests, family: str, name: str, abi: Abi, version: int) -> None:
    data = guests.wasm(family, name)
    info = validate_module(data).info
    assert (info.abi, info.abi_version, info.size) == (abi, version, len(data))
    assert not info.uses_schema_registry


def test_redpanda_abi_version_1_and_schema_registry() -> None:
    data = wasm(
        '(import "redpanda_transform" "check_abi_version_1" (func))',
        '(import "redpanda_schema_registry" "check_abi_version_0" (func))',
        '(import "redpanda_schema_registry" "get_schema_definition_len"'
        " (func (param i32 i32) (result i32)))",
        MEMORY,
        START,
    )
    info = validate_module(data).info
    assert (info.abi, info.abi_version, info.uses_schema_registry) == (Abi.REDPANDA, 1, True)


CASES = [
    (b"hello", RejectReason.NOT_WASM, "not a WebAssembly module"),
    (b"\x00asm\x0d\x00\x01\x00", RejectReason.NOT_WASM, "component"),
    (wasm(RP, MEMORY, START)[:-3], RejectReason.NOT_WASM, "not a WebAssembly module"),
    (wasm(RP, MEMORY), RejectReason.MISSING_START, "_start"),
    (
        wasm(RP, MEMORY, '(func (export "_start") (param i32))'),
        RejectReason.MISSING_START,
        "_start",
    ),
    (wasm(RP, "(memory 1)", START), RejectReason.MISSING_MEMORY, "memory"),
    (wasm(RP, '(memory (export "mem") 1)', START), RejectReason.MISSING_MEMORY, "memory"),
    (wasm(RP, '(import "env" "f" (func))', MEMORY, START), RejectReason.UNKNOWN_IMPORT, "env.f"),
    (
        wasm(
            RP,
            '(import "wasi_snapshot_preview1" "fd_fdstat_set_rights"'
            " (func (param i32 i64 i64) (result i32)))",
            MEMORY,
            START,
        ),
        RejectReason.UNKNOWN_IMPORT,
        "fd_fdstat_set_rights",
    ),
    (
        wasm(
            RP,
            '(import "redpanda_transform" "write_record" (func (param i32) (result i32)))',
            MEMORY,
            START,
        ),
        RejectReason.UNKNOWN_IMPORT,
        "type (i32) -> (i32)",
    ),
    (
        wasm(
            '(import "redpanda_transform" "memory" (memory 1))',
            RP,
            START,
            '(export "memory" (memory 0))',
        ),
        RejectReason.UNKNOWN_IMPORT,
        "memory",
    ),
    (
        wasm(
            '(import "wasi_snapshot_preview1" "fd_write"'
            " (func (param i32 i32 i32 i32) (result i32)))",
            MEMORY,
            START,
        ),
        RejectReason.MISSING_ABI,
        "SDK",
    ),
    (
        wasm('(import "redpanda_transform" "check_abi_version_3" (func))', MEMORY, START),
        RejectReason.UNSUPPORTED_ABI,
        "version 3",
    ),
    (
        wasm('(import "sluice_batch" "check_abi_version_2" (func))', MEMORY, START, BATCH_EXPORTS),
        RejectReason.UNSUPPORTED_ABI,
        "version 2",
    ),
    (
        wasm(RP, '(import "redpanda_schema_registry" "check_abi_version_1" (func))', MEMORY, START),
        RejectReason.UNSUPPORTED_ABI,
        "redpanda_schema_registry",
    ),
    (wasm(RP, BATCH, MEMORY, START, BATCH_EXPORTS), RejectReason.UNSUPPORTED_ABI, "both"),
    (wasm(BATCH, MEMORY, START), RejectReason.MISSING_EXPORT, "sluice_batch_input"),
    (
        wasm(RP, MEMORY, '(func (export "_start") (drop (i32.add (i32.const 1) (i64.const 2))))'),
        RejectReason.NOT_WASM,
        "does not validate",
    ),
]


@pytest.mark.parametrize(
    ("data", "reason", "words"), CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_rejections(data: bytes, reason: RejectReason, words: str) -> None:
    error = rejected(data)
    assert error.reason is reason
    assert words in str(error)


def test_size_limit(guests: Guests) -> None:
    data = guests.wasm("go", "identity")
    error = rejected(data, max_bytes=1 * MIB)
    assert error.reason is RejectReason.TOO_LARGE
    assert "transforms.module.max.bytes" in str(error)
    assert validate_module(data).info.size < Limits().module_max_bytes


def test_spec_is_checked_as_redpanda_checks_it() -> None:
    spec = validate_spec("t", "in", ["a", "b"], {"K": "v"})
    assert spec.guest_environment() == [
        ("K", "v"),
        ("REDPANDA_INPUT_TOPIC", "in"),
        ("REDPANDA_OUTPUT_TOPIC_0", "a"),
        ("REDPANDA_OUTPUT_TOPIC_1", "b"),
    ]
    bad = [
        (("t", "in", [f"o{i}" for i in range(9)], {}), RejectReason.TOO_MANY_OUTPUTS),
        (("t", "in", [], {}), RejectReason.TOO_MANY_OUTPUTS),
        (("t", "in", ["in"], {}), RejectReason.INVALID_TOPICS),
        (("t", "in", ["a", "a"], {}), RejectReason.INVALID_TOPICS),
        (("", "in", ["a"], {}), RejectReason.INVALID_NAME),
        (("t", "in", ["a"], {"REDPANDA_X": "1"}), RejectReason.INVALID_ENVIRONMENT),
        (("t", "in", ["a"], {"A=B": "1"}), RejectReason.INVALID_ENVIRONMENT),
        (("t", "in", ["a"], {"A": ""}), RejectReason.INVALID_ENVIRONMENT),
        (("t", "in", ["a"], {"A": "x\ny"}), RejectReason.INVALID_ENVIRONMENT),
        (("t", "in", ["a"], {f"K{i}": "v" for i in range(129)}), RejectReason.INVALID_ENVIRONMENT),
    ]
    for args, reason in bad:
        with pytest.raises(ModuleRejected) as info:
            validate_spec(*args)
        assert info.value.reason is reason, args


def test_limits_keys_and_values() -> None:
    limits = Limits.from_config({"transforms.memory.max.bytes": 128 * MIB, "other.key": 1})
    assert limits.memory_max_bytes == 128 * MIB
    assert limits.module_max_bytes == 10 * MIB
    assert set(CONFIG_KEYS.values()) == {
        k for k in CONFIG_KEYS.values() if k.startswith("transforms.")
    }
    with pytest.raises(ValueError, match="unknown transforms settings"):
        Limits.from_config({"transforms.nope": 1})
    with pytest.raises(ValueError, match=r"transforms\.cpu\.fuel\.per\.record"):
        Limits(fuel_per_record=0)
    with pytest.raises(ValueError, match="twice"):
        Limits(memory_max_bytes=8 * MIB, output_max_bytes=8 * MIB)
    assert limits.batch_fuel(0) == limits.fuel_per_record + limits.fuel_per_batch
