"""Every API version a broker advertises answers a minimal valid request.

For every API key and version in the broker's ApiVersions answer, the sweep sends the request
``tests/support/minimal_requests.py`` generates from Kafka's message schemas (kio) and expects
a well-formed answer: it comes, carries the request's correlation id, decodes with that
version's response schema to its last byte, and the connection still serves a request after
it. On Sluice the broker must also log no Python traceback while the sweep runs.

The same sweep runs against Apache Kafka 4.3 (the oracle) over the versions Kafka
advertises, which proves the generator on the reference implementation; a (key, version)
that Kafka answers well-formed and Sluice does not is a failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from tests.conftest import BrokerProcess, unique
from tests.support.kafka_oracle import KafkaOracle
from tests.support.minimal_requests import (
    SPECS,
    SUBSCRIPTION,
    advertised_versions,
    exchange,
    kio_knows,
    kio_versions,
    minimal_request,
    prepare_state,
    unused_spec_paths,
)
from tests.support.raw_client import RawClient

TRACEBACK = "Traceback (most recent call last)"
KIO_CANNOT_DECODE = {
    38: "CreateDelegationToken",
    39: "RenewDelegationToken",
    40: "ExpireDelegationToken",
}
"""APIs whose answers from Kafka kio 0.6.5 cannot decode: a PLAINTEXT listener refuses
delegation tokens with timestamps of -1, which kio's reader rejects ("Cannot parse negative
timestamp"). Sluice does not serve them; the Kafka sweep leaves their undecodable answers out."""
ANSWER_TIMEOUT = 10.0
"""Seconds an answer may take (every request asks for an immediate one)."""


@dataclass
class Sweep:
    """Outcome of one sweep: ``problems`` maps (key, version) to what went wrong."""

    answered: list[tuple[int, int]] = field(default_factory=list)
    problems: dict[tuple[int, int], str] = field(default_factory=dict)
    unknown_to_kio: list[tuple[int, int]] = field(default_factory=list)
    advertised: dict[int, tuple[int, int]] = field(default_factory=dict)
    seconds: float = 0.0
    tracebacks: str = ""

    def ok(self, key: int, version: int) -> bool:
        return (key, version) in self.answered and (key, version) not in self.problems

    def report(self) -> str:
        return "\n".join(
            f"  {_name(k)} ({k}) v{v}: {why}" for (k, v), why in sorted(self.problems.items())
        )


def _name(key: int) -> str:
    return str(api_key_map.get(key, "?"))


class _LogWatch:
    """New lines of a broker's log since the last look."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = path.stat().st_size if path is not None and path.exists() else 0

    def new_text(self) -> str:
        if self.path is None:
            return ""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        return data.decode(errors="replace")


def run_sweep(bootstrap: str, prefix: str, log_path: Path | None = None) -> Sweep:
    """Send every advertised (key, version) its minimal request, on one connection that is
    reopened after a failure; a traceback logged during a request counts against it."""
    sweep = Sweep(advertised=advertised_versions(bootstrap))
    state = prepare_state(bootstrap, prefix)
    watch = _LogWatch(log_path)
    started = time.monotonic()
    client: RawClient | None = None
    try:
        for key, (low, high) in sorted(sweep.advertised.items()):
            for version in range(low, high + 1):
                if not kio_knows(key, version):
                    sweep.unknown_to_kio.append((key, version))
                    continue
                if client is None:
                    client = RawClient(bootstrap, timeout=ANSWER_TIMEOUT)
                answer = exchange(client, minimal_request(key, version, state))
                sweep.answered.append((key, version))
                problem = answer.problem
                logged = watch.new_text()
                if TRACEBACK in logged:
                    sweep.tracebacks += logged
                    raised = _exception_line(logged)
                    problem = f"{problem}; logged {raised}" if problem else f"logged {raised}"
                if problem is not None:
                    sweep.problems[(key, version)] = problem
                if answer.problem is not None:
                    client.close()
                    client = None
    finally:
        if client is not None:
            client.close()
    sweep.seconds = time.monotonic() - started
    sweep.tracebacks += watch.new_text()
    return sweep


def _exception_line(logged: str) -> str:
    """The exception line ("AttributeError: ...") of the last traceback in ``logged``."""
    for line in logged[logged.rindex(TRACEBACK) :].splitlines()[1:]:
        if line and not line[0].isspace():
            return line.strip()
    return TRACEBACK


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def sluice_sweep(sluice: BrokerProcess) -> Sweep:
    return run_sweep(sluice.bootstrap, unique("sweep"), sluice.log_path)


@pytest.fixture(scope="module")
def kafka_sweep(kafka_oracle: KafkaOracle) -> Sweep:
    return run_sweep(kafka_oracle.bootstrap, unique("sweep"))


# ---------------------------------------------------------------------------- tests


def test_generator_specs_name_schema_fields() -> None:
    """Every field a per-API spec sets exists in some version of its API (no typos)."""
    unused = {key: sorted(unused_spec_paths(key)) for key in SPECS}
    assert not {k: v for k, v in unused.items() if v}


def test_advertised_versions_are_known_to_kio(sluice: BrokerProcess) -> None:
    advertised = advertised_versions(sluice.bootstrap)
    unknown = [
        f"{_name(key)} ({key}) v{version}"
        for key, (low, high) in sorted(advertised.items())
        for version in range(low, high + 1)
        if version not in kio_versions(key)
    ]
    assert not unknown, f"Sluice advertises versions kio has no schema for: {unknown}"


def test_every_advertised_version_answers(sluice_sweep: Sweep) -> None:
    print(f"\nSluice sweep: {len(sluice_sweep.answered)} versions in {sluice_sweep.seconds:.1f} s")
    assert sluice_sweep.answered
    assert not sluice_sweep.problems, (
        "versions Sluice advertises without a well-formed answer:\n" + sluice_sweep.report()
    )
    assert TRACEBACK not in sluice_sweep.tracebacks, sluice_sweep.tracebacks[-5000:]


@pytest.mark.oracle
def test_kafka_answers_every_generated_request(kafka_sweep: Sweep) -> None:
    """The generator's requests are well-formed: the reference implementation answers them
    all (versions kio has no schema for, such as Produce v0-2, are left out)."""
    print(
        f"\nKafka sweep: {len(kafka_sweep.answered)} versions in {kafka_sweep.seconds:.1f} s; "
        f"not in kio: {kafka_sweep.unknown_to_kio}"
    )
    assert kafka_sweep.answered
    problems = {
        kv: why
        for kv, why in kafka_sweep.problems.items()
        if not (kv[0] in KIO_CANNOT_DECODE and why.startswith("undecodable answer"))
    }
    assert not problems, "Kafka did not answer these generated requests:\n" + "\n".join(
        f"  {_name(k)} ({k}) v{v}: {why}" for (k, v), why in sorted(problems.items())
    )


@pytest.mark.oracle
def test_sluice_answers_where_kafka_does(sluice_sweep: Sweep, kafka_sweep: Sweep) -> None:
    failing = {
        (key, version): why
        for (key, version), why in sluice_sweep.problems.items()
        if kafka_sweep.ok(key, version)
    }
    assert not failing, "Kafka answers these well-formed, Sluice does not:\n" + "\n".join(
        f"  {_name(k)} ({k}) v{v}: {why}" for (k, v), why in sorted(failing.items())
    )


def test_describe_groups_before_v3_answers(sluice: BrokerProcess) -> None:
    """Regression: DescribeGroups v0-2 have no include_authorized_operations field; the
    handler read it, raised AttributeError and closed the connection. The answers are
    Kafka 4.3.1's (measured): a stable group with its member and the member's metadata, and
    an unknown group as "Dead" without an error (GROUP_ID_NOT_FOUND only from v6)."""
    state = prepare_state(sluice.bootstrap, unique("describe-old"))
    with RawClient(sluice.bootstrap, timeout=ANSWER_TIMEOUT) as client:
        for version in (0, 1, 2):
            request = load_request_schema(15, version)(
                groups=(state.member_group, state.absent_group)  # type: ignore[call-arg]
            )
            answer = exchange(client, request)
            assert answer.problem is None, f"v{version}: {answer.problem}"
            groups = {g.group_id: g for g in answer.response.groups}
            stable, absent = groups[state.member_group], groups[state.absent_group]
            assert (stable.error_code, stable.group_state) == (ErrorCode.none, "Stable")
            assert (stable.protocol_type, stable.protocol_data) == ("consumer", "range")
            assert [(m.member_id, m.member_metadata) for m in stable.members] == [
                (state.member_id, SUBSCRIPTION)
            ]
            assert (absent.error_code, absent.group_state, absent.members) == (
                ErrorCode.none,
                "Dead",
                (),
            )
