"""What authentication and TLS cost: produce over SASL_SSL and SASL_PLAINTEXT (SCRAM-SHA-512)
beside PLAINTEXT, and the time a new connection takes to be ready, on Sluice and on Apache
Kafka configured the same way, in the same run.

    python -m bench.bench_security [--count N] [--runs R] [--connections C] [--seconds S]
                                   [--quick] [--skip-kafka] [--no-record]

Brokers (both up for the whole bench, measured one at a time, taking turns):

- Sluice: ``python -m dataplane.main`` (``bench/servers.py``) with the settings of
  tests/security/conftest.py (``secured_settings``): listeners PLAINTEXT (``--listen``),
  SASL_PLAINTEXT and SASL_SSL, ``sasl.enabled.mechanisms=SCRAM-SHA-512``,
  ``ssl.client.auth=none``, a certificate of a throwaway CA (tests/support/tls.py) and the
  bench user from ``sasl.scram.bootstrap.users.file`` (4096 iterations).
- Kafka 4.3.1: KRaft single node (tests/support/kafka_oracle.py, heap 2 GiB) with the same
  three listeners, SCRAM-SHA-512 through JAAS (``ScramLoginModule``), its own PKCS12
  keystore holding the same certificate and key, the user created with
  AlterUserScramCredentials (4096 iterations).

Workloads, for each broker and each protocol (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL):

- batched produce: confluent-kafka (librdkafka 2.16) in a child process
  (``bench/secure_load.py``) produces N (default 1,000,000) records of 100 B read from a
  file, one ``produce()`` call each, one partition, acks=all, linger.ms=10,
  batch.size=1000000, no compression, no idempotence (bench/clients.py's settings but
  acks=all). Debian's kcat (librdkafka 2.0.2) cannot log in: it refuses Sluice's
  SaslHandshake range (v1 only) and its SCRAM proof is refused by Kafka 4.x (librdkafka
  before 2.6.1 repeats the client nonce). Timed from the first ``produce()`` to the end of
  ``flush()``, after the connection is up and logged in; median of R runs (default 5),
  each into a new topic whose high watermark is checked afterwards.
- one-record requests: 50 connections over 3 processes (``bench/secure_load.py``, uvloop),
  each a synchronous producer of Produce v7 requests (acks=-1) holding one 100-byte record,
  after its own TLS handshake and SCRAM login, as bench/one_record.py does on PLAINTEXT;
  3 s warm-up, S s (default 10) measured; p50/p99 latency; one answer in 256 checked.
- connection setup: C (default 200) new connections one after the other from this process
  (blocking sockets, TCP_NODELAY): TCP connect, TLS handshake (SASL_SSL), ApiVersions v3,
  SaslHandshake v1 + SaslAuthenticate v2 x2 (SCRAM-SHA-512, through ``wire.sasl``), then a
  Metadata v4 request for one topic: the time until that first request is answered, median
  and p99, each phase's median, and the CPU per connection of the broker and of the client
  (the client's SCRAM is PBKDF2 with 4096 iterations of HMAC-SHA-512); in rounds of 20
  connections per broker and protocol, taking turns.

Every system first gets one unmeasured pass over the workloads (Kafka's JIT needs it).
Prints the tables and replaces the "Security" section of bench/RESULTS.md unless
--no-record. No assertion on any figure; every process is stopped at the end, also on an
error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion as Upsert
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from bench import secure_load
from bench.clients import PRODUCER_SETTINGS, high_watermark, record_file
from bench.common import (
    REPO,
    Others,
    free_port,
    kill_all_children,
    machine_info,
    replace_section,
    wait_port,
)
from bench.secure_load import PHASES, SIZE, connect_once, percentile, tls_context
from bench.servers import KafkaServer, SluiceServer
from tests.security.conftest import secured_settings, users_file, wait_for_user
from tests.support.kafka_oracle import KafkaOracle
from tests.support.tls import TestCA
from wire.sasl import SaslCredentials

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- BEGIN security (bench/bench_security.py) -->"
END = "<!-- END security -->"
PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")
CLIENT = (
    f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
)
MECHANISM = secure_load.MECHANISM.value
ITERATIONS = 4096
SETUP_ROUND = 20  # connections per system and protocol in one round of the setup bench
USER = "bench"
# What both brokers are configured alike with, on Sluice's side (Kafka's defaults already).
SAME_AS_KAFKA = {"sasl.enabled.mechanisms": MECHANISM, "ssl.client.auth": "none"}


# ---------------------------------------------------------------------------- brokers


class SecuredSluice(SluiceServer):
    """A Sluice broker with PLAINTEXT (``--listen``), SASL_PLAINTEXT and SASL_SSL listeners."""

    def __init__(self, workdir: Path, ca: TestCA, users: Path) -> None:
        super().__init__(workdir)
        self.ca = ca
        self.addresses = {
            "PLAINTEXT": self.bootstrap,
            "SASL_PLAINTEXT": f"127.0.0.1:{free_port()}",
            "SASL_SSL": f"127.0.0.1:{free_port()}",
        }
        listeners = ",".join(f"{p}://{a}" for p, a in self.addresses.items())
        self.settings.update(secured_settings(ca, users, listeners=listeners, **SAME_AS_KAFKA))

    def start(self) -> SecuredSluice:
        super().start()
        for address in self.addresses.values():
            wait_port(int(address.rpartition(":")[2]), self.proc, 30, "sluice listener")
        wait_for_user(self.bootstrap, USER)
        return self


class _SecuredKafkaOracle(KafkaOracle):
    """Apache Kafka with SASL_PLAINTEXT and SASL_SSL listeners beside PLAINTEXT."""

    def __init__(self, workdir: Path, keystore: Path, store_password: str) -> None:
        super().__init__(workdir, startup_timeout=180, heap="-Xmx2g")
        self.keystore = keystore
        self.store_password = store_password
        self.sasl_port, self.ssl_port = free_port(), free_port()

    def server_properties(self) -> dict[str, str]:
        config = super().server_properties()
        added = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},SASL_SSL://127.0.0.1:{self.ssl_port}"
        config["listeners"] += "," + added
        config["advertised.listeners"] += "," + added
        config["listener.security.protocol.map"] += (
            ",SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
        )
        config["sasl.enabled.mechanisms"] = MECHANISM
        for name in ("sasl_plaintext", "sasl_ssl"):
            config[f"listener.name.{name}.scram-sha-512.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
        config["ssl.keystore.type"] = "PKCS12"
        config["ssl.keystore.location"] = str(self.keystore)
        config["ssl.keystore.password"] = self.store_password
        config["ssl.key.password"] = self.store_password
        return config


def write_keystore(ca: TestCA, path: Path, password: str) -> None:
    """The broker certificate and key of ``ca`` (and the CA) as a PKCS12 keystore."""
    key = serialization.load_pem_private_key(ca.broker.key.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(ca.broker.cert.read_bytes())
    root = x509.load_pem_x509_certificate(ca.ca.read_bytes())
    data = pkcs12.serialize_key_and_certificates(
        b"broker",
        key,  # type: ignore[arg-type]
        cert,
        [root],
        serialization.BestAvailableEncryption(password.encode()),
    )
    path.write_bytes(data)
    path.chmod(0o600)


class SecuredKafka(KafkaServer):
    """Apache Kafka configured as SecuredSluice is (bench/servers.py's KafkaServer else)."""

    def __init__(self, workdir: Path, ca: TestCA, credentials: SaslCredentials) -> None:
        # not KafkaServer.__init__: the oracle is this module's own
        workdir.mkdir(parents=True, exist_ok=True)
        store_password = secrets.token_hex(12)
        keystore = workdir / "broker.p12"
        write_keystore(ca, keystore, store_password)
        self.secured = _SecuredKafkaOracle(workdir, keystore, store_password)
        self.oracle = self.secured
        self.ca = ca
        self.credentials = credentials

    @property
    def addresses(self) -> dict[str, str]:
        return {
            "PLAINTEXT": self.bootstrap,
            "SASL_PLAINTEXT": f"127.0.0.1:{self.secured.sasl_port}",
            "SASL_SSL": f"127.0.0.1:{self.secured.ssl_port}",
        }

    def start(self) -> SecuredKafka:
        super().start()
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS)
        user, password = self.credentials.username, self.credentials.password
        admin.alter_user_scram_credentials([Upsert(user, info, password.encode())])[user].result(30)
        return self


Broker = SecuredSluice | SecuredKafka


@dataclass
class System:
    server: Broker
    work: Path
    credentials: SaslCredentials
    ca: Path

    @property
    def name(self) -> str:
        return str(self.server.name)

    def address(self, protocol: str) -> str:
        return self.server.addresses[protocol]

    def client_config(self, protocol: str) -> dict[str, str]:
        """librdkafka's settings for ``protocol`` (holds the password: files only)."""
        if protocol == "PLAINTEXT":
            return {"security.protocol": "plaintext"}
        conf = {
            "security.protocol": protocol.lower(),
            "sasl.mechanisms": MECHANISM,
            "sasl.username": self.credentials.username,
            "sasl.password": self.credentials.password,
        }
        if protocol == "SASL_SSL":
            conf["ssl.ca.location"] = str(self.ca)
        return conf

    def topic(self, prefix: str) -> str:
        name = f"{prefix}-{time.monotonic_ns()}"
        self.server.create_topic(name)
        return name


# ---------------------------------------------------------------------------- batched produce


@dataclass
class Produced:
    seconds: float
    broker_cpu: float
    client_cpu: float
    others: float


def _results(workers: list[subprocess.Popen[str]], outdir: Path, timeout: float) -> list[Any]:
    results = []
    for i, proc in enumerate(workers):
        proc.wait(timeout=timeout)
        assert proc.stderr is not None
        if proc.returncode != 0:
            err = proc.stderr.read().strip()[-400:]
            raise RuntimeError(f"load process exited {proc.returncode}: {err}")
        results.append(json.loads((outdir / f"{i}.json").read_text()))
    return results


def _stop(workers: list[subprocess.Popen[str]], outdir: Path) -> None:
    for proc in workers:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    shutil.rmtree(outdir, ignore_errors=True)


def produce_once(system: System, protocol: str, records: Path, count: int) -> Produced:
    topic = system.topic(f"sec-{protocol.lower()}")
    outdir = Path(tempfile.mkdtemp(prefix="sec-produce-", dir=system.work))
    config = {
        "bootstrap.servers": system.address(protocol),
        **system.client_config(protocol),
        **{k: v for k, v in PRODUCER_SETTINGS.items() if k != "compression.codec"},
        "compression.type": "none",
        "acks": "all",
    }
    settings = {"config": config, "topic": topic, "records": str(records), "count": count}
    cpu0, others = system.server.cpu(), Others()
    workers = [secure_load.spawn("produce", settings, outdir / "0.json")]
    try:
        (result,) = _results(workers, outdir, 900)
    finally:
        _stop(workers, outdir)
    cpu = system.server.cpu() - cpu0
    share = others.share(cpu, result["client_cpu"])
    stored = high_watermark(system.server.bootstrap, topic)
    if stored != count:
        raise RuntimeError(f"{system.name} over {protocol}: {stored} of {count} records stored")
    return Produced(result["seconds"], cpu, result["client_cpu"], share)


# ---------------------------------------------------------------------------- one-record requests


@dataclass
class OneRecord:
    rate: float
    p50_ms: float
    p99_ms: float
    broker_cpu: float
    client_cpu: float
    others: float
    requests: int


def one_record(
    system: System,
    protocol: str,
    *,
    warmup: float,
    seconds: float,
    connections: int = 50,
    processes: int = 3,
) -> OneRecord:
    """Requests/s of one-record produce requests from ``connections`` synchronous producers."""
    topic = system.topic(f"sec-one-{protocol.lower()}")
    start_at = time.time() + 2.5  # time for every connection's TLS handshake and login
    outdir = Path(tempfile.mkdtemp(prefix="sec-one-", dir=system.work))
    per = [connections // processes + (i < connections % processes) for i in range(processes)]
    base = {
        "address": system.address(protocol),
        "protocol": protocol,
        "username": system.credentials.username,
        "password": system.credentials.password,
        "ca": str(system.ca),
        "topic": topic,
        "start_at": start_at,
        "warmup": warmup,
        "seconds": seconds,
    }
    workers = [
        secure_load.spawn("one-record", {**base, "connections": n}, outdir / f"{i}.json")
        for i, n in enumerate(per)
    ]
    try:
        time.sleep(max(0.0, start_at + warmup - time.time()))
        cpu0, others = system.server.cpu(), Others()
        time.sleep(seconds)
        cpu = system.server.cpu() - cpu0
        others.stop()
        results = _results(workers, outdir, 60)
    finally:
        _stop(workers, outdir)
    errors = sum(r["errors"] for r in results)
    if errors:
        codes = sorted({c for r in results for c in r["error_codes"]})
        raise RuntimeError(f"{system.name} over {protocol}: {errors} errors (codes {codes})")
    total = sum(r["requests"] for r in results)
    window = max(r["seconds"] for r in results)
    latencies = [x for r in results for x in r["latencies"]]
    client_cpu = sum(r["client_cpu"] for r in results)
    return OneRecord(
        total / window,
        percentile(latencies, 0.5) * 1000,
        percentile(latencies, 0.99) * 1000,
        cpu,
        client_cpu,
        others.share(cpu, client_cpu),
        total,
    )


# ---------------------------------------------------------------------------- connection setup


@dataclass
class Setup:
    totals: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    broker_cpu: float = 0.0
    client_cpu: float = 0.0
    """CPU seconds of all the connections (divide by len(totals))."""


def connection_setup(
    system: System, protocol: str, topic: str, connections: int, setup: Setup | None = None
) -> Setup:
    """``connections`` new connections one after the other, added to ``setup``."""
    context = tls_context(system.ca)
    address = system.address(protocol)
    setup = setup or Setup()
    cpu0, client0 = system.server.cpu(), time.thread_time()
    for _ in range(connections):
        phases = connect_once(address, protocol, system.credentials, context, topic)
        setup.totals.append(sum(phases.values()))
        for phase, seconds in phases.items():
            setup.phases[phase].append(seconds)
    setup.broker_cpu += system.server.cpu() - cpu0
    setup.client_cpu += time.thread_time() - client0
    return setup


# ---------------------------------------------------------------------------- the bench


@dataclass
class Results:
    produce: dict[tuple[str, str], list[Produced]] = field(default_factory=dict)
    one_record: dict[tuple[str, str], OneRecord] = field(default_factory=dict)
    setup: dict[tuple[str, str], Setup] = field(default_factory=dict)


@dataclass
class Plan:
    count: int
    runs: int
    connections: int
    seconds: float
    warmup: float


def each(systems: list[System], what: str, step: Callable[[System, str], Any]) -> None:
    """``step`` for every protocol on every system, the systems taking turns."""
    for protocol in PROTOCOLS:
        for system in systems:
            step(system, protocol)
            print(f"  {what}: {system.name} {protocol} done", flush=True)


def measure(systems: list[System], plan: Plan, records: Path) -> Results:
    results = Results()
    warm = records.with_name("warm.txt")
    warm_count = min(plan.count, 200_000)
    with open(records, "rb") as src, open(warm, "wb") as dst:
        dst.write(src.read((SIZE + 1) * warm_count))
    topics = {system.name: system.topic("sec-meta") for system in systems}
    # Unmeasured: JIT, page cache, first TLS and SCRAM use.
    each(systems, "warm-up", lambda s, p: produce_once(s, p, warm, warm_count))
    each(systems, "warm-up", lambda s, p: connection_setup(s, p, topics[s.name], 20))
    each(systems, "warm-up", lambda s, p: one_record(s, p, warmup=0.5, seconds=1.0))

    for _ in range(plan.runs):
        for protocol in PROTOCOLS:
            for system in systems:
                run = produce_once(system, protocol, records, plan.count)
                results.produce.setdefault((system.name, protocol), []).append(run)
                print(
                    f"  produce {system.name} {protocol}: {plan.count / run.seconds:,.0f} rec/s",
                    flush=True,
                )
    for protocol in PROTOCOLS:
        for system in systems:
            one = one_record(system, protocol, warmup=plan.warmup, seconds=plan.seconds)
            results.one_record[system.name, protocol] = one
            print(
                f"  one-record {system.name} {protocol}: {one.rate:,.0f} req/s "
                f"(p50 {one.p50_ms:.2f} ms)",
                flush=True,
            )
    # in rounds of SETUP_ROUND connections, taking turns, so that load from other jobs
    # falls on every system and protocol alike
    for _ in range(max(1, plan.connections // SETUP_ROUND)):
        for protocol in PROTOCOLS:
            for system in systems:
                key = system.name, protocol
                results.setup[key] = connection_setup(
                    system, protocol, topics[system.name], SETUP_ROUND, results.setup.get(key)
                )
    for (name, protocol), setup in results.setup.items():
        print(
            f"  connection {name} {protocol}: median "
            f"{statistics.median(setup.totals) * 1000:.2f} ms",
            flush=True,
        )
    return results


# ---------------------------------------------------------------------------- tables


def _median_run(runs: list[Produced]) -> Produced:
    return sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]


def _ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}" if b else "-"


def produce_table(results: Results, count: int) -> str:
    rows = [
        "| workload | system | protocol | rate | MB/s | broker CPU µs/rec | client CPU µs/rec "
        "| others' CPU | x PLAINTEXT | x Kafka |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rates = {k: count / _median_run(v).seconds for k, v in results.produce.items()}
    for (system, protocol), runs in results.produce.items():
        mid = _median_run(runs)
        spread = sorted(count / r.seconds for r in runs)
        rng = f" ({spread[0] / 1e6:.2f}M-{spread[-1] / 1e6:.2f}M)" if len(runs) > 1 else ""
        rate = rates[system, protocol]
        kafka = rates.get(("Kafka", protocol)) if system != "Kafka" else None
        rows.append(
            f"| produce {count:,} x {SIZE} B | {system} | {protocol} | {rate / 1e6:.2f}M rec/s"
            f"{rng} | {rate * SIZE / 1e6:.1f} | {mid.broker_cpu / count * 1e6:.2f} "
            f"| {mid.client_cpu / count * 1e6:.2f} | {mid.others:.0%} "
            f"| {_ratio(rate, rates.get((system, 'PLAINTEXT')))} | {_ratio(rate, kafka)} |"
        )
    for (system, protocol), one in results.one_record.items():
        base = results.one_record.get((system, "PLAINTEXT"))
        peer = results.one_record.get(("Kafka", protocol)) if system != "Kafka" else None
        rows.append(
            f"| one-record produce, 50 connections | {system} | {protocol} "
            f"| {one.rate / 1e3:.1f}k req/s (p50 {one.p50_ms:.2f} ms, p99 {one.p99_ms:.1f} ms) "
            f"| {one.rate * SIZE / 1e6:.1f} | {one.broker_cpu / one.requests * 1e6:.1f} "
            f"| {one.client_cpu / one.requests * 1e6:.1f} | {one.others:.0%} "
            f"| {_ratio(one.rate, base.rate if base else None)} "
            f"| {_ratio(one.rate, peer.rate if peer else None)} |"
        )
    return "\n".join(rows)


def applies(phase: str, protocol: str) -> bool:
    if phase == "tls":
        return protocol == "SASL_SSL"
    return phase != "sasl" or protocol != "PLAINTEXT"


def setup_table(results: Results) -> str:
    rows = [
        "| system | protocol | median ms | p99 ms | connect | TLS | ApiVersions | SASL "
        "| first request | broker CPU ms/conn | client CPU ms/conn | x PLAINTEXT | x Kafka |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    medians = {k: statistics.median(v.totals) for k, v in results.setup.items()}
    for (system, protocol), setup in results.setup.items():
        med, n = medians[system, protocol], len(setup.totals)
        kafka = medians.get(("Kafka", protocol)) if system != "Kafka" else None
        phases = " | ".join(
            f"{statistics.median(setup.phases[p]) * 1000:.2f}" if applies(p, protocol) else "-"
            for p in PHASES
        )
        rows.append(
            f"| {system} | {protocol} | {med * 1000:.2f} | "
            f"{percentile(setup.totals, 0.99) * 1000:.2f} | {phases} "
            f"| {setup.broker_cpu / n * 1000:.2f} | {setup.client_cpu / n * 1000:.2f} "
            f"| {_ratio(med, medians.get((system, 'PLAINTEXT')))} | {_ratio(med, kafka)} |"
        )
    return "\n".join(rows)


# ---------------------------------------------------------------------------- main


def start_systems(work: Path, skip_kafka: bool) -> tuple[list[System], str]:
    ca = TestCA(work / "tls")
    credentials = SaslCredentials(USER, secrets.token_hex(16), secure_load.MECHANISM)
    users = users_file(
        work,
        [f"{MECHANISM}=[name={USER},password={credentials.password},iterations={ITERATIONS}]"],
    )
    systems: list[System] = []
    sluice = SecuredSluice(work / "sluice", ca, users)
    systems.append(System(sluice, work / "sluice", credentials, ca.ca))
    sluice.start()
    print(f"Sluice on {sluice.addresses}")
    kafka_version = "-"
    reason = "--skip-kafka" if skip_kafka else KafkaServer.unavailable()
    if reason is None:
        kafka = SecuredKafka(work / "kafka", ca, credentials)
        systems.append(System(kafka, work / "kafka", credentials, ca.ca))
        kafka.start()
        kafka_version = kafka.version
        print(f"Kafka {kafka_version} on {kafka.addresses}")
    else:
        print(f"Kafka skipped: {reason}")
    return systems, kafka_version


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--quick", action="store_true", help="100,000 records, 1 run, 2 s, 60 conns"
    )
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.quick:
        plan = Plan(100_000, 1, 60, 2.0, 0.5)
    else:
        plan = Plan(args.count, args.runs, args.connections, args.seconds, 3.0)
    started = datetime.datetime.now(datetime.UTC)
    machine = machine_info()
    work = Path(tempfile.mkdtemp(prefix="bench-security-"))
    systems: list[System] = []
    try:
        records = record_file(work, SIZE, plan.count)
        systems, kafka_version = start_systems(work, args.skip_kafka)
        results = measure(systems, plan, records)
    finally:
        for system in systems:
            system.server.stop()
        kill_all_children()
        shutil.rmtree(work, ignore_errors=True)
    throughput, setup = produce_table(results, plan.count), setup_table(results)
    print(throughput, setup, sep="\n\n")
    if args.no_record:
        return
    flags = (
        " --quick"
        if args.quick
        else (
            f" --count {plan.count} --runs {plan.runs} --connections {plan.connections} "
            f"--seconds {plan.seconds:g}"
        )
    )
    load_after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    section = "\n".join(
        [
            BEGIN,
            f"## Security: SASL_SSL and SASL_PLAINTEXT beside PLAINTEXT (issue 15), "
            f"{started:%Y-%m-%d %H:%M} UTC",
            "",
            f"`python -m bench.bench_security{flags}` on {machine['cpu']} (nproc "
            f"{machine['nproc']}, {machine['memory']}), python {machine['python']}, kernel "
            f"{machine['kernel']}; Kafka {kafka_version}, {CLIENT}; "
            f"load average before {machine['load average at start']}, after {load_after}.",
            "",
            "### Produce",
            "",
            throughput,
            "",
            "### New connections (TCP connect until the first request after login is answered)",
            "",
            setup,
            "",
            NOTES,
            END,
        ]
    )
    replace_section(RESULTS, BEGIN, END, section + "\n")
    print(f"recorded in {RESULTS}")


NOTES = """\
How: see bench/bench_security.py's docstring. Both brokers are up for the whole bench and
take turns (Kafka: KRaft single node, same listeners, SCRAM-SHA-512 through JAAS, its own
PKCS12 keystore with the same certificate; Sluice: `ssl.client.auth=none`, SCRAM-SHA-512
only, as Kafka's defaults). Batched produce: confluent-kafka in its own process, acks=all,
linger.ms=10, batch.size=1000000, one partition, timed after the login, median of the runs
(range in brackets). One-record: 50 synchronous connections over 3 processes, each logged in
once before the measurement. New connections: one at a time from the bench process, in
rounds of 20 per broker and protocol taking turns. x PLAINTEXT: the figure over the same
broker's PLAINTEXT figure (for connections a time, so above 1 means slower); x Kafka:
Sluice's figure over Kafka's for the same protocol. Connection phases are medians in ms;
the client's CPU per connection includes its SCRAM (PBKDF2, 4096 iterations) and TLS
handshake; the broker's is all of the broker process's CPU during the connections, divided
by their number. Others' CPU: share of the 2 cores other processes used meanwhile (noise)."""


if __name__ == "__main__":
    main()
