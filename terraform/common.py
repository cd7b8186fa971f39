"""What every resource and data source of the provider shares.

- The ``timeouts`` block (create / update / delete as Go durations, ``"30m"``, ``"1h30m"``),
  a single nested block as the AWS provider's.
- State built from the schema: every attribute and block present (null when unset), maps
  that stay null when the configuration leaves them out and the API has nothing.
- :class:`ResourceBase` and :class:`DataSourceBase`: ``tf``'s callbacks wrapped so that every
  failure becomes a Terraform diagnostic (a :class:`ProviderError`, a control-plane
  :class:`ApiError` explained by :func:`terraform.api.explain`, or a bug, reported as one);
  ``upgrade()`` that does not print (``tf``'s default warns on every run).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeGuard, TypeVar

from msgpack import ExtType
from tf.iface import DataSource, Resource
from tf.schema import Attribute, Block, NestedBlock, NestMode, Schema
from tf.types import List, Map, Set, String, Unknown
from tf.utils import Diagnostics

from sluice_client.client import ApiError
from terraform.api import Api, ProviderError, Settings, explain

log = logging.getLogger("sluice")

T = TypeVar("T")
State = dict[str, Any]

POLL_INTERVAL = 0.5
"""Seconds between two looks at an operation in progress."""

DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``"45s"``, ``"30m"``, ``"1h30m"``, ``"0s"``); ValueError
    for anything else."""
    text = text.strip()
    if not text or DURATION.sub("", text):
        raise ValueError(f"{text!r} is not a duration such as 30s, 10m or 1h30m")
    return sum(float(n) * UNITS[u] for n, u in DURATION.findall(text))


def known(value: object) -> TypeGuard[Any]:
    """Neither null nor unknown: ``tf``'s Unknown, or an unknown value that Terraform
    refined (msgpack extension 12: "not null", a string prefix, ...), which ``tf`` passes
    on as a raw extension value."""
    return value is not None and value is not Unknown and not isinstance(value, ExtType)


def given(state: Mapping[str, Any], key: str) -> Any:
    """``state[key]`` when known, else None (a computed value still Unknown in a plan)."""
    value = state.get(key)
    return value if known(value) else None


class _PassUnknown:
    """A collection type that passes a refined unknown (a raw msgpack extension) through:
    ``tf``'s own collections would iterate it and fail to decode the plan."""

    def encode(self, value: Any) -> Any:
        return value if isinstance(value, ExtType) else super().encode(value)  # type: ignore[misc]

    def decode(self, value: Any) -> Any:
        return value if isinstance(value, ExtType) else super().decode(value)  # type: ignore[misc]


class MapOf(_PassUnknown, Map):  # tf ships no types: Map is Any
    """``map(...)``."""


class ListOf(_PassUnknown, List):  # tf ships no types: List is Any
    """``list(...)``."""


class SetOf(_PassUnknown, Set):  # tf ships no types: Set is Any
    """``set(...)``."""


class Connected(Protocol):
    """The provider as resources see it."""

    def api(self) -> Api: ...

    def settings(self) -> Settings: ...


# ---------------------------------------------------------------------- timeouts


class SingleBlock(NestedBlock):  # tf ships no types: the base is Any
    """A nested block that appears at most once (``tf`` 1.2 has Set blocks only): its value
    is null or an object of its attributes."""

    def __init__(self, type_name: str, block: Block) -> None:
        super().__init__(type_name, NestMode.Single, block)

    def encode(self, value: Any) -> Any:
        if value is None or value is Unknown:
            return value
        return {a.name: a.type.encode(value.get(a.name)) for a in self.block.attributes}

    def decode(self, value: Any) -> Any:
        if value is None or value is Unknown:
            return value
        return {a.name: a.type.decode(value.get(a.name)) for a in self.block.attributes}

    def semantically_equal(self, a_decoded: Any, b_decoded: Any) -> bool:
        return bool(a_decoded == b_decoded)


@dataclass(frozen=True)
class Timeouts:
    """Default deadlines of a resource's operations, in seconds (the ``timeouts`` block
    overrides them)."""

    create: float
    update: float
    delete: float

    def block(self) -> SingleBlock:
        def attribute(name: str, seconds: float) -> Attribute:
            return Attribute(
                name,
                String(),
                description=f"How long {name} may take (a Go duration, e.g. `30m`; default "
                f"`{_duration_text(seconds)}`).",
                optional=True,
            )

        return SingleBlock(
            "timeouts",
            Block(
                attributes=[
                    attribute("create", self.create),
                    attribute("update", self.update),
                    attribute("delete", self.delete),
                ],
                description="Deadlines of the operations that wait (`timeouts { create = "
                '"45m" }`); on a deadline the operation goes on in the control plane.',
            ),
        )

    def of(self, state: Mapping[str, Any] | None, operation: str) -> float:
        """The deadline of ``operation`` in the state's ``timeouts`` block, else the default."""
        block = (state or {}).get("timeouts")
        value = block.get(operation) if isinstance(block, dict) else None
        if known(value):
            return parse_duration(str(value))
        seconds: float = getattr(self, operation)
        return seconds


def _duration_text(seconds: float) -> str:
    if seconds and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


def check_timeouts(diags: Diagnostics, config: Mapping[str, Any]) -> None:
    block = config.get("timeouts")
    if not isinstance(block, dict):
        return
    for name, value in block.items():
        if not known(value):
            continue
        try:
            parse_duration(str(value))
        except ValueError as exc:
            diags.add_error(
                f"Invalid timeouts.{name}",
                f"{exc}. Use a Go duration: a number and a unit (ms, s, m, h), e.g. 90s or 1h30m.",
                path=["timeouts", name],
            )


class Deadline:
    """The end of an operation's ``timeouts`` entry."""

    def __init__(self, seconds: float, operation: str) -> None:
        self.seconds = seconds
        self.operation = operation
        self.started = time.monotonic()

    def passed(self) -> bool:
        return time.monotonic() - self.started >= self.seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def describe(self) -> str:
        return f"after {_duration_text(self.seconds)} (timeouts.{self.operation})"


def retry_busy(api: Api, deadline: Deadline, call: Callable[[], T]) -> T:
    """``call()``, again while the cluster is busy (CREATING, UPDATING, HEALING: its topics,
    users and ACLs cannot change) until the deadline; other errors at once."""
    while True:
        try:
            return call()
        except ApiError as exc:
            if not transient(exc) or deadline.passed():
                raise
            log.info("sluice: %s; retrying", exc.message)
            time.sleep(POLL_INTERVAL)


def create_busy(api: Api, deadline: Deadline, call: Callable[[], T]) -> T | None:
    """:func:`retry_busy` for a create: an ALREADY_EXISTS answer to a retry means that an
    earlier attempt, answered with an error (a broker restarting under it), did create it:
    None then (the caller reads what exists). On the first attempt it is an error."""
    retried = False

    def attempt() -> T:
        nonlocal retried
        try:
            return call()
        except ApiError as exc:
            retried = retried or transient(exc)
            raise

    try:
        return retry_busy(api, deadline, attempt)
    except ApiError as exc:
        if retried and exc.code.name == "ALREADY_EXISTS":
            log.info("sluice: %s (an earlier attempt made it)", exc.message)
            return None
        raise


BUSY_REASONS = frozenset({"CLUSTER_NOT_READY", "OPERATION_IN_PROGRESS", "BROKER_UNAVAILABLE"})
RETRIABLE_KAFKA = frozenset(
    {
        "not_controller",
        "request_timed_out",
        "leader_not_available",
        "not_leader_or_follower",
        "coordinator_not_available",
        "coordinator_load_in_progress",
        "network_exception",
        "throttling_quota_exceeded",
    }
)
"""Kafka's retriable errors a broker may answer the control plane with while brokers
restart (the ErrorInfo's ``kafkaError`` of a KAFKA_ERROR)."""


def transient(exc: ApiError) -> bool:
    """The cluster is busy (creating, updating, healing, brokers restarting): try again."""
    if exc.reason_name in BUSY_REASONS:
        return True
    kafka = exc.metadata.get("kafkaError", "").lower()
    return exc.reason_name == "KAFKA_ERROR" and kafka in RETRIABLE_KAFKA


# ---------------------------------------------------------------------- state


def blank(schema: Schema) -> State:
    """A state with every attribute and block of ``schema``, all null."""
    state: State = {a.name: None for a in schema.attributes}
    state.update({b.type_name: None for b in schema.block_types})
    return state


def map_value(prior: Any, found: Mapping[str, str]) -> dict[str, str] | None:
    """A map from the API as the state holds it: null stays null while the API has
    nothing (a configuration without the argument shows no change)."""
    if not found and (prior is None or prior is Unknown):
        return None
    return dict(found)


def list_value(prior: Any, found: Iterable[str]) -> list[str] | None:
    values = list(found)
    if not values and (prior is None or prior is Unknown):
        return None
    return values


def id_parts(value: str, names: tuple[str, ...], resource: str) -> list[str]:
    """``CLUSTER/NAME`` (or more parts) of an import id."""
    parts = value.split("/")
    if len(parts) != len(names) or not all(parts):
        example = "/".join(n.upper() for n in names)
        raise ProviderError(
            f"Invalid import id {value!r} for {resource}",
            f"Give {example}, e.g. `terraform import {resource}.NAME {example}`.",
        )
    return parts


# ---------------------------------------------------------------------- bases


class _Guarded:
    provider: Connected
    terraform_type: str

    def _guard(
        self, diags: Diagnostics, action: Callable[[], T], fallback: T, config: str = ""
    ) -> T:
        """``action()``; a failure becomes a diagnostic and ``fallback`` (or the state the
        error carries) is returned."""
        try:
            return action()
        except ProviderError as exc:
            diags.add_error(exc.summary, exc.detail, path=exc.path)
            return exc.state if exc.state is not None else fallback  # type: ignore[return-value]
        except ApiError as exc:
            err = explain(
                exc, self.provider.settings(), resource=self.terraform_type, config=config
            )
            diags.add_error(err.summary, err.detail, path=err.path)
            return fallback
        except Exception as exc:
            log.exception("sluice: %s failed", self.terraform_type)
            diags.add_error(
                f"Internal error in the Sluice provider ({self.terraform_type}): "
                f"{type(exc).__name__}: {exc}",
                "This is a bug of the provider: report it with the log of the run (TF_LOG=DEBUG).",
            )
            return fallback


class ResourceBase(_Guarded, Resource):  # tf ships no types: the base is Any
    """A resource: subclasses give ``SCHEMA``, ``NAME`` and the ``do_*`` methods."""

    NAME: ClassVar[str]
    SCHEMA: ClassVar[Schema]
    TIMEOUTS: ClassVar[Timeouts]
    CONFIG_MAP: ClassVar[str] = ""
    """The map attribute whose key an INVALID_CONFIG error names."""

    def __init__(self, provider: Connected) -> None:
        self.provider = provider
        self.terraform_type = f"sluice_{self.NAME}"

    @classmethod
    def get_name(cls) -> str:
        return cls.NAME

    @classmethod
    def get_schema(cls) -> Schema:
        return cls.SCHEMA

    def api(self) -> Api:
        return self.provider.api()

    # tf's callbacks -------------------------------------------------------------

    def validate(self, diags: Diagnostics, type_name: str, config: State) -> None:
        super().validate(diags, type_name, config)
        check_timeouts(diags, config)
        self.check(diags, config)

    def create(self, ctx: Any, planned: State) -> State | None:
        log.info("sluice: %s %s: create", self.terraform_type, planned.get("name"))
        return self._guard(ctx.diagnostics, lambda: self.do_create(planned), None, self.CONFIG_MAP)

    def read(self, ctx: Any, current: State) -> State | None:
        fallback: State | None = current  # an error keeps the state as it was
        return self._guard(ctx.diagnostics, lambda: self.do_read(current), fallback)

    def update(self, ctx: Any, current: State, planned: State) -> State | None:
        log.info("sluice: %s %s: update", self.terraform_type, current.get("id"))
        return self._guard(
            ctx.diagnostics, lambda: self.do_update(current, planned), None, self.CONFIG_MAP
        )

    def delete(self, ctx: Any, current: State) -> None:
        log.info("sluice: %s %s: delete", self.terraform_type, current.get("id"))
        self._guard(ctx.diagnostics, lambda: self.do_delete(current), None)

    def plan(self, ctx: Any, current: State | None, planned: State) -> State | None:
        if current is None:
            return planned
        changed = set(ctx.changed_fields)
        return self._guard(
            ctx.diagnostics, lambda: self.do_plan(current, planned, changed), planned
        )

    def import_(self, ctx: Any, id: str) -> State | None:  # tf's parameter name
        def imported() -> State | None:
            state = self.do_import(id)
            if state is None:
                raise ProviderError(
                    f"Cannot import {self.terraform_type} {id!r}: it does not exist",
                    "Check the id; the resource's documentation gives its form.",
                )
            return state

        return self._guard(ctx.diagnostics, imported, None)

    def upgrade(self, ctx: Any, version: int, old: State) -> State:
        """Schema version 0 is the only one: the state is kept as it is (quietly)."""
        return old

    # the resources' own parts -----------------------------------------------------

    def check(self, diags: Diagnostics, config: State) -> None:
        """Validation of values beyond the schema (known values only)."""

    def do_create(self, planned: State) -> State:
        raise NotImplementedError

    def do_read(self, current: State) -> State | None:
        raise NotImplementedError

    def do_update(self, current: State, planned: State) -> State:
        raise NotImplementedError

    def do_delete(self, current: State) -> None:
        raise NotImplementedError

    def do_plan(self, current: State, planned: State, changed: set[str]) -> State:
        """Computed attributes that an update changes, made Unknown (else Terraform calls
        the result inconsistent)."""
        return planned

    def do_import(self, id_: str) -> State | None:
        raise NotImplementedError


class DataSourceBase(_Guarded, DataSource):  # tf ships no types: the base is Any
    NAME: ClassVar[str]
    SCHEMA: ClassVar[Schema]

    def __init__(self, provider: Connected) -> None:
        self.provider = provider
        self.terraform_type = f"data.sluice_{self.NAME}"

    @classmethod
    def get_name(cls) -> str:
        return cls.NAME

    @classmethod
    def get_schema(cls) -> Schema:
        return cls.SCHEMA

    def api(self) -> Api:
        return self.provider.api()

    def read(self, ctx: Any, config: State) -> State | None:
        return self._guard(ctx.diagnostics, lambda: self.do_read(config), None)

    def do_read(self, config: State) -> State:
        raise NotImplementedError
