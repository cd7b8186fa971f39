"""Fixtures of the transforms tests: guests built once per session, one runtime, modules
compiled once and shared; plus the Python reference of each guest's logic."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.broker import REPO
from transforms.limits import Limits
from transforms.module import TransformSpec, validate_module, validate_spec
from transforms.records import InputRecord, OutputRecord
from transforms.runtime import CompiledModule, Instance, Runtime

BUILD = REPO / "tools" / "build-transform-guests.sh"
GUESTS = REPO / ".cache" / "transforms"


class Guests:
    """The built modules, by family (go, c, as, wat) and name."""

    def __init__(self, status: dict[str, str]) -> None:
        self.status = status

    def path(self, family: str, name: str) -> Path:
        state = self.status.get(family, "missing: not built")
        if state != "ok":
            pytest.skip(f"{family} guests cannot be built here: {state}")
        path = GUESTS / family / f"{name}.wasm"
        assert path.exists(), f"{path} was not built"
        return path

    def wasm(self, family: str, name: str) -> bytes:
        return self.path(family, name).read_bytes()


@pytest.fixture(scope="session")
def guests() -> Guests:
    """Runs tools/build-transform-guests.sh once (a no-op when everything is built)."""
    proc = subprocess.run(
        [str(BUILD)], capture_output=True, text=True, timeout=1500, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        pytest.fail(f"building the transform guests failed:\n{proc.stdout}\n{proc.stderr}")
    status = {}
    for line in (GUESTS / "STATUS").read_text().splitlines():
        family, _, state = line.partition(" ")
        status[family] = state
    return Guests(status)


@pytest.fixture(scope="session")
def runtime() -> Runtime:
    return Runtime()


Compile = Callable[[str, str], CompiledModule]


@pytest.fixture(scope="session")
def compiled(runtime: Runtime, guests: Guests) -> Compile:
    """``compiled(family, name)``: each module validated and compiled once per session."""
    cache: dict[tuple[str, str], CompiledModule] = {}

    def get(family: str, name: str) -> CompiledModule:
        if (family, name) not in cache:
            cache[(family, name)] = runtime.compile(validate_module(guests.wasm(family, name)))
        return cache[(family, name)]

    return get


Start = Callable[..., Instance]


@pytest.fixture
def start(runtime: Runtime, compiled: Compile) -> Iterator[Start]:
    """``start(family, name, outputs=..., env=..., limits=...)``: an instance, closed after."""
    made: list[Instance] = []

    def make(
        family: str,
        name: str,
        *,
        outputs: tuple[str, ...] = ("out",),
        env: dict[str, str] | None = None,
        limits: Limits | None = None,
        transform: str = "t",
    ) -> Instance:
        spec = validate_spec(transform, "in", outputs, env or {})
        instance = runtime.instantiate(compiled(family, name), spec, limits)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        instance.close()


def spec(outputs: tuple[str, ...] = ("out",)) -> TransformSpec:
    return validate_spec("t", "in", outputs)


# ------------------------------------------------------------------ reference logic


def ref_identity(r: InputRecord, topics: tuple[str, ...]) -> list[OutputRecord]:
    return [OutputRecord(topics[0], r.key, r.value, r.headers)]


def ref_uppercase(r: InputRecord, topics: tuple[str, ...]) -> list[OutputRecord]:
    value = None if r.value is None else r.value.upper()  # bytes.upper: ASCII only
    return [OutputRecord(topics[0], r.key, value, r.headers)]


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def json_keeps(value: bytes | None) -> bool:
    """Go's encoding/json semantics: any byte >= 0x20 is allowed inside strings."""
    if value is None:
        return False
    try:
        doc = json.loads(value.decode("utf-8", "surrogateescape"), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("level") == "error"


def ref_jsonfilter(r: InputRecord, topics: tuple[str, ...]) -> list[OutputRecord]:
    return [OutputRecord(topics[0], r.key, r.value, r.headers)] if json_keeps(r.value) else []


def ref_route(r: InputRecord, topics: tuple[str, ...]) -> list[OutputRecord]:
    out = [OutputRecord(topics[0], r.key, r.value, r.headers)]
    if r.key and r.key.startswith(b"b"):
        out.append(OutputRecord(topics[1], r.key, r.value, r.headers))
    return out


REFERENCE = {
    "identity": ref_identity,
    "uppercase": ref_uppercase,
    "jsonfilter": ref_jsonfilter,
    "route": ref_route,
}
