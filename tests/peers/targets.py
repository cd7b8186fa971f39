"""The brokers the peer suites run against, what they advertise, and what their logs say.

``start(key, workdir)`` starts one target (see ``TARGETS``) with the fixtures' own classes:
KafkaOracle / KafkaCluster (Apache Kafka from .cache/java) and BrokerProcess / SluiceCluster
(sluice-broker processes). ``advertised_keys`` sends ApiVersions; ``LogWatch`` hands out the
lines a broker logged since the last look and ``find_tracebacks`` pulls the Python tracebacks
out of them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.support.broker import BrokerProcess
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_oracle import KafkaOracle, oracle_available
from tests.support.raw_client import RawClient
from tests.support.sluice_cluster import SluiceCluster

# franz-go's share-group and KIP-848 tests need Kafka's new group coordinator protocols on.
KAFKA_CONFIG = {"group.coordinator.rebalance.protocols": "classic,consumer,share"}


@dataclass(frozen=True)
class TargetSpec:
    key: str
    title: str
    """Column heading of the result table."""
    brokers: int
    rf: int
    """KGO_TEST_RF: replication factor of the topics the tests create."""
    sluice: bool


TARGETS = {
    spec.key: spec
    for spec in (
        TargetSpec("kafka", "Kafka", 1, 1, sluice=False),
        TargetSpec("kafka3", "Kafka 3 nodes (RF 3)", 3, 3, sluice=False),
        TargetSpec("sluice", "Sluice 1 broker", 1, 1, sluice=True),
        TargetSpec("sluice3", "Sluice 3 brokers (RF 3)", 3, 3, sluice=True),
    )
}


class Running(Protocol):
    spec: TargetSpec
    bootstrap: str
    startup_seconds: float

    def log_paths(self) -> list[Path]: ...
    def dead(self) -> list[int]: ...
    def stop(self) -> None: ...


class KafkaTarget:
    def __init__(self, spec: TargetSpec, workdir: Path) -> None:
        self.spec = spec
        self.kafka: KafkaOracle | KafkaCluster
        if spec.brokers == 1:
            self.kafka = KafkaOracle(workdir, extra_config=KAFKA_CONFIG)
        else:
            self.kafka = KafkaCluster(workdir, spec.brokers, extra_config=KAFKA_CONFIG)
        self.kafka.start()
        self.bootstrap = self.kafka.bootstrap
        self.startup_seconds = self.kafka.startup_seconds

    def log_paths(self) -> list[Path]:
        if isinstance(self.kafka, KafkaOracle):
            return [self.kafka.log_path]
        return [node.log_path for node in self.kafka.nodes]

    def dead(self) -> list[int]:
        if isinstance(self.kafka, KafkaOracle):
            return [] if self.kafka._proc is not None and self.kafka._proc.poll() is None else [0]
        return [i for i in range(self.spec.brokers) if not self.kafka.alive(i)]

    def stop(self) -> None:
        self.kafka.stop()


class SluiceTarget:
    def __init__(self, spec: TargetSpec, workdir: Path) -> None:
        self.spec = spec
        started = time.monotonic()
        self.broker: BrokerProcess | None = None
        self.cluster: SluiceCluster | None = None
        if spec.brokers == 1:
            self.broker = BrokerProcess(workdir / "data")
            try:
                self.broker.start()
            except BaseException:
                self.broker.kill()
                raise
            self.bootstrap = self.broker.bootstrap
        else:
            self.cluster = SluiceCluster(workdir, spec.brokers)
            self.cluster.start()
            self.bootstrap = self.cluster.bootstrap
        self.startup_seconds = time.monotonic() - started

    def processes(self) -> list[BrokerProcess]:
        if self.broker is not None:
            return [self.broker]
        assert self.cluster is not None
        return self.cluster.brokers

    def log_paths(self) -> list[Path]:
        return [b.log_path for b in self.processes()]

    def dead(self) -> list[int]:
        return [i for i, b in enumerate(self.processes()) if not b.alive()]

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker.kill()
        if self.cluster is not None:
            self.cluster.stop()


def unavailable(key: str) -> str | None:
    """Why target ``key`` cannot start here, or None."""
    return oracle_available() if not TARGETS[key].sluice else None


def start(key: str, workdir: Path) -> Running:
    spec = TARGETS[key]
    workdir.mkdir(parents=True, exist_ok=True)
    return SluiceTarget(spec, workdir) if spec.sluice else KafkaTarget(spec, workdir)


def advertised_keys(bootstrap: str) -> dict[int, tuple[int, int]]:
    """ApiVersions (v3) of the first broker of ``bootstrap``: api key -> (min, max)."""
    with RawClient(bootstrap.split(",", maxsplit=1)[0]) as client:
        response = client.request(
            ApiVersionsRequest(client_software_name="sluice-peers", client_software_version="1")
        )
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


# ---------------------------------------------------------------------- broker logs


class LogWatch:
    """The lines appended to a set of log files since the last ``new_text``."""

    def __init__(self, paths: list[Path]) -> None:
        self.offsets = {p: (p.stat().st_size if p.exists() else 0) for p in paths}

    def new_text(self) -> dict[Path, str]:
        out: dict[Path, str] = {}
        for path, offset in self.offsets.items():
            if not path.exists():
                continue
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
            self.offsets[path] = offset + len(data)
            if data:
                out[path] = data.decode(errors="replace")
        return out


TRACEBACK = "Traceback (most recent call last)"
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+), in (\S+)')


@dataclass(frozen=True)
class Traceback:
    file: str
    """The innermost frame's file, relative to the repository when inside it."""
    line: int
    function: str
    exception: str
    """The exception line (``ValueError: ...``), cut to 200 characters."""
    logged: str
    """The log line the traceback belongs to (the message before it)."""

    def short(self) -> str:
        return f"{self.file}:{self.line} in {self.function}: {self.exception}"


def find_tracebacks(text: str, repo: Path | None = None) -> list[Traceback]:
    """Every Python traceback in a log text (each chained one counts)."""
    lines = text.splitlines()
    found: list[Traceback] = []
    for i, line in enumerate(lines):
        if TRACEBACK not in line:
            continue
        logged = lines[i - 1].strip() if i > 0 else ""
        frame: tuple[str, int, str] | None = None
        j = i + 1
        while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
            match = _FRAME.match(lines[j])
            if match:
                frame = (match.group(1), int(match.group(2)), match.group(3))
            j += 1
        exception = lines[j].strip()[:200] if j < len(lines) else "?"
        if frame is None:
            continue
        file = frame[0]
        if repo is not None and file.startswith(str(repo) + "/"):
            file = file[len(str(repo)) + 1 :]
        found.append(Traceback(file, frame[1], frame[2], exception, logged[:200]))
    return found
