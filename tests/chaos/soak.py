"""The fault-injection soak: ``make soak SEEDS=1 MINUTES=30`` (as root: namespaces, mounts).

    python -m tests.chaos.soak --seed 7 --minutes 30 [--brokers 3] [--record]

For each seed: build the topology (``topology.py``), run the rest inside the hub namespace
(``--inside``): an object store and a control plane there, a cluster of brokers each in its
own namespace on its own disk (``broker.hosts``, ``broker.exec.prefix``), topics (an
idempotent one, a tiered one, a transactional one), the clients (``workload.py``) and the
faults (``nemesis.py``), in cycles: faults for most of a cycle, then every fault healed and
a quiet window in which recovery is timed. At the end: every fault healed, the producers
drained, both isolation levels of every partition read in full, the history checked
(``checker.py``), and a table printed (and appended to bench/RESULTS.md with --record).

Each run leaves ``<work>/seed-N/history.jsonl`` (the nemesis schedule is in it) and the
control plane's home with every broker's log. A seed fixes the schedule: the same seed
injects the same faults at the same moments (what the system does in between is its own).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos import nemesis
from tests.chaos.checker import AnomalyKind, Result, check
from tests.chaos.history import (
    Ack,
    Event,
    Final,
    HistoryWriter,
    Isolation,
    Nemesis,
    NemesisPhase,
    Read,
    read_history,
)
from tests.chaos.nemesis import BROKER_FAULTS, Fault, Target
from tests.chaos.topology import BLKIO, Topology, teardown
from tests.chaos.workload import Clients
from tiered.access_keys import AccessKey
from tiered.embedded_s3 import EmbeddedS3
from wire.record_batch import iter_headers

REPO = Path(__file__).resolve().parents[2]
CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")
CLUSTER = "soak"
SESSION_TIMEOUT_MS = 1500  # broker.session.timeout.ms, the brokers' default
TOPICS = {"soak-idem": 6, "soak-tiered": 3}
TXN_TOPIC = "soak-txn"
TXN_TIMEOUT_S = 60  # the transactional producers' transaction.timeout.ms
S3_KEY = AccessKey("soak", "soak-secret-key", admin=True)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Soak:
    seed: int
    minutes: float
    topology: Topology
    cycle_s: float
    quiet_s: float
    lanes: int = 2
    """Broker faults at once (each on its own broker), beside the control-plane lane."""
    gap_s: tuple[float, float] = (0.1, 0.4)
    """Pause of a lane between two faults, uniform in this range (s)."""
    length_s: tuple[float, float] = (0.3, 1.2)
    """How long a fault lasts before its heal, uniform in this range (s): short enough for
    30 minutes to give every kind its 200 faults (2 s gave about 190)."""
    control_plane_gap_s: float = 1.5
    """Pause of the control-plane lane between a restart and the next kill (s): 3.0 gave
    170-230 kills in 30 minutes, as the control plane's own start took 3-4 s under load."""
    control_plane_down_s: float = 1.5
    """How long the control plane stays killed (s)."""

    @property
    def home(self) -> Path:
        return self.topology.work / "home"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        return {
            **env,
            # the project's modules compiled once, as `make` runs them: without it an
            # environment with PYTHONDONTWRITEBYTECODE compiles them at every broker start
            "PYTHONPYCACHEPREFIX": env.get("PYTHONPYCACHEPREFIX") or str(REPO / ".venv/pycache"),
            "PYTHONDONTWRITEBYTECODE": "",
            "SLUICE_HOME": str(self.home),
            "SLUICE_ENDPOINT": "127.0.0.1:7443",
            "AWS_ACCESS_KEY_ID": S3_KEY.access_key_id,
            "AWS_SECRET_ACCESS_KEY": S3_KEY.secret_access_key,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def cloudctl(self, *args: str, timeout: float = 300) -> str:
        proc = subprocess.run(
            [CLOUDCTL, *args], capture_output=True, text=True, env=self.env, cwd=REPO,
            timeout=timeout, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"cloudctl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    # --- the control plane -------------------------------------------------------------

    def write_properties(self) -> None:
        topo = self.topology
        wrapper = REPO / "tests" / "chaos" / "wrap_broker.py"
        prefix = (
            f"ip netns exec slc{topo.tag}-b{{broker_id}} {sys.executable} {wrapper}"
            f" --disk {topo.work / 'disks'}/b{{broker_id}}"
            f" --cgroup {BLKIO}/slc{topo.tag}-b{{broker_id}} --"
        )
        hosts = ",".join(topo.address(n) for n in topo.ids)
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "controlplane.properties").write_text(
            f"broker.hosts={hosts}\nbroker.exec.prefix={prefix}\n"
            # no Spark job competing with the brokers for the two cores
            "billing.schedule.interval.ms=0\n"
            # a paused broker resumes at the heal, as Jepsen's pauses: the watchdog would
            # kill it after 1.5 s (tests/controlplane/test_exit_fencing.py tests that)
            "broker.watchdog.timeout.ms=0\n"
        )

    def start_control_plane(self) -> None:
        deadline = time.monotonic() + 30
        while pids_of("controlplane.main", str(self.home)):  # the killed one, still exiting
            if time.monotonic() > deadline:
                raise RuntimeError("the killed control plane is still running after 30 s")
            time.sleep(0.05)
        self.cloudctl("up", "--s3-endpoint", self.s3.endpoint, "--timeout", "120")
        if not pids_of("controlplane.main", str(self.home)):
            raise RuntimeError("`cloudctl up` returned but no control plane runs")

    def kill_control_plane(self) -> None:
        for pid in pids_of("controlplane.main", str(self.home)):
            os.kill(pid, signal.SIGKILL)

    def broker_pid(self, broker: int) -> int | None:
        out = subprocess.run(
            ["ip", "netns", "pids", self.topology.ns(broker)], capture_output=True, text=True,
            check=False,
        ).stdout.split()  # fmt: skip
        for pid in out:
            cmdline = (
                Path(f"/proc/{pid}/cmdline").read_bytes() if Path(f"/proc/{pid}").exists() else b""
            )
            if b"dataplane.main" in cmdline or b"sluice-broker" in cmdline:
                return int(pid)
        return None

    # --- one run -----------------------------------------------------------------------

    def run(self) -> tuple[Result, dict[str, object]]:
        topo = self.topology
        run_dir = topo.work / f"seed-{self.seed}"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        self.s3 = EmbeddedS3(topo.work / "s3", host=topo.hub_address, admin=S3_KEY).start()
        self.write_properties()
        self.start_control_plane()
        log(f"control plane up; creating a {topo.brokers}-broker cluster")
        self.cloudctl(
            "create-cluster", CLUSTER, "--brokers", str(topo.brokers), "--storage-mode", "tiered",
            "--config", "clock.offset.file=" + nemesis.CLOCK_FILE,
            "--config", "remote.log.manager.task.interval.ms=1000",
            "--wait", "--timeout", "300",
        )  # fmt: skip
        bootstrap = json.loads(self.cloudctl("describe-cluster", CLUSTER, "-o", "json"))[
            "bootstrap_brokers"
        ]
        self.bootstrap = bootstrap
        self.create_topics(bootstrap)
        history = HistoryWriter(run_dir / "history.jsonl")
        t0 = time.monotonic()
        client_log = logging.getLogger("soak.clients")
        client_log.propagate = False
        client_log.setLevel(logging.DEBUG)
        client_log.addHandler(logging.FileHandler(run_dir / "clients.log"))
        clients = Clients(bootstrap, history, t0, list(TOPICS), TXN_TOPIC, self.seed)
        clients.client_log = client_log
        clients.start(producers=4, txn_producers=2, consumers=2)
        target = Target(topo, self.broker_pid, self.kill_control_plane, self.start_control_plane)
        recoveries = self.inject(history, target, t0, clients)
        log("faults over; draining the producers")
        clients.join(240)
        nemesis.heal_everything(target, topo.brokers)
        self.final_read(bootstrap, history, t0)
        history.close()
        events = read_history(run_dir / "history.jsonl")
        result = check(events)
        figures = summarize(events, recoveries, clients.errors)
        figures["duplicate_causes"] = duplicate_causes(result, topo)
        figures["broker_starts"] = broker_starts(self.home / "logs" / "clusters")
        return result, figures

    def create_topics(self, bootstrap: str) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        tiered = {
            "remote.storage.enable": "true",
            "segment.bytes": str(256 << 10),
            "local.retention.bytes": str(512 << 10),
        }
        new = [
            NewTopic("soak-idem", TOPICS["soak-idem"], 3, config={"min.insync.replicas": "2"}),
            NewTopic(
                "soak-tiered", TOPICS["soak-tiered"], 3,
                config={"min.insync.replicas": "2", **tiered},
            ),
            NewTopic(TXN_TOPIC, 3, 3, config={"min.insync.replicas": "2"}),
        ]  # fmt: skip
        for future in admin.create_topics(new).values():
            future.result(60)

    def inject(
        self, history: HistoryWriter, target: Target, t0: float, clients: Clients
    ) -> list[Recovery]:
        """Faults in cycles until the time is up; returns each quiet window's recovery."""
        end = time.monotonic() + self.minutes * 60
        counts: dict[Fault, int] = defaultdict(int)
        recoveries: list[Recovery] = []
        lock = threading.Lock()
        lanes_stop = threading.Event()

        def now() -> float:
            return time.monotonic() - t0

        busy: set[int] = set()

        def lane(number: int | None, lane_rng: random.Random) -> None:
            """Faults one after another: a broker lane picks a broker no other lane is
            faulting; the control-plane lane (``number`` None) kills the control plane."""
            control_plane = number is None
            kinds = [Fault.CONTROL_PLANE_KILL] if control_plane else BROKER_FAULTS
            while not lanes_stop.is_set():
                gap = self.control_plane_gap_s if control_plane else lane_rng.uniform(*self.gap_s)
                nemesis.wait(gap, lanes_stop.is_set)
                if lanes_stop.is_set():
                    return
                with lock:  # the kind injected least so far, ties broken by the seed
                    least = min(counts[k] for k in kinds)
                    fault = lane_rng.choice([k for k in kinds if counts[k] == least])
                    free = [b for b in self.topology.ids if b not in busy]
                    broker = None if control_plane else lane_rng.choice(free)
                    if broker is not None:
                        busy.add(broker)
                    counts[fault] += 1
                try:
                    active = nemesis.start(fault, broker, target, lane_rng)
                    detail = {"broker": broker, **active.detail}
                    history.write(Nemesis(now(), fault, NemesisPhase.START, detail))
                    length = (
                        self.control_plane_down_s
                        if control_plane
                        else lane_rng.uniform(*self.length_s)
                    )
                    nemesis.wait(length, lanes_stop.is_set)
                    try:
                        nemesis.heal(active, target)
                    finally:
                        history.write(Nemesis(now(), fault, NemesisPhase.STOP, detail))
                finally:
                    with lock:
                        busy.discard(broker if broker is not None else -1)

        cycle = 0
        while time.monotonic() < end:
            cycle += 1
            lanes_stop.clear()
            threads = [
                threading.Thread(
                    target=lane, args=(b, random.Random(f"{self.seed}-{cycle}-{b}")), daemon=True
                )
                for b in [*range(self.lanes), None]
            ]
            for thread in threads:
                thread.start()
            nemesis.wait(min(self.cycle_s - self.quiet_s, end - time.monotonic()), lambda: False)
            lanes_stop.set()
            for thread in threads:
                thread.join(60)
            stopped = time.monotonic()
            nemesis.heal_everything(target, self.topology.brokers)  # and every broker runs
            healed = time.monotonic()
            history.write(Nemesis(now(), "heal-all", NemesisPhase.STOP, {"cycle": cycle}))
            serving = self.wait_serving(self.quiet_s)
            recovery = self.recovery(history.path, healed - t0, self.quiet_s)
            recoveries.append(Recovery(recovery, serving - healed))
            done = sum(counts.values())
            left = max(0.0, end - time.monotonic())
            log(
                f"cycle {cycle}: {done} faults so far "
                f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); "
                f"all brokers run {healed - stopped:.1f}s after the last fault and serve "
                f"{serving - healed:.2f}s after that; every partition acked {recovery:.2f}s "
                f"after they ran; {left / 60:.1f} min left; client errors: {len(clients.errors)}"
            )
        return recoveries

    def wait_serving(self, timeout: float) -> float:
        """When every broker accepted a connection on its Kafka listener (a broker opens it
        once registered, at the end of its start), polled from now for up to ``timeout``."""
        addresses = [a.rsplit(":", 1) for a in self.bootstrap.split(",")]
        waiting = {(host, int(port)) for host, port in addresses}
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            for address in list(waiting):
                try:
                    socket.create_connection(address, timeout=0.2).close()
                    waiting.discard(address)
                except OSError:
                    pass
            if waiting:
                time.sleep(0.02)
        return time.monotonic()

    def recovery(self, path: Path, healed: float, window: float) -> float:
        """Seconds after ``healed`` until every partition acked a record again (the window
        if one did not)."""
        time.sleep(window)
        first: dict[tuple[str, int], float] = {}
        partitions = {(t, p) for t, n in TOPICS.items() for p in range(n)}
        with open(path) as f:
            for line in f:
                if '"kind":"ack"' not in line:
                    continue
                e = json.loads(line)
                key = (e["topic"], e["partition"])
                if key in partitions and e["t"] >= healed and key not in first:
                    first[key] = e["t"] - healed
        if set(first) != partitions:
            self.describe_stuck(sorted(partitions - set(first)))
            self.dump_stacks(path.parent)
            return window
        return max(first[k] for k in partitions)

    def describe_stuck(self, stuck: list[tuple[str, int]]) -> None:
        """Log the leader and ISR of partitions that acked nothing in a quiet window."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        try:
            topics = admin.list_topics(timeout=10).topics
        except KafkaException as exc:
            log(f"no ack in the quiet window from {stuck}; metadata failed: {exc}")
            return
        states = []
        for topic, partition in stuck:
            meta = topics.get(topic)
            p = meta.partitions.get(partition) if meta is not None else None
            states.append(
                f"{topic}-{partition}: "
                + (f"leader {p.leader} isr {p.isrs} error {p.error}" if p else "no metadata")
            )
        log("no ack in the quiet window: " + "; ".join(states))

    def dump_stacks(self, directory: Path) -> None:
        """Every broker's threads (py-spy, the soak extra) after a quiet window in which a
        partition acknowledged nothing: a broker blocked in a system call shows where."""
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent))
        if spy is None:
            log("py-spy is not installed (pip install -e '.[soak]'): no broker stacks")
            return
        out = directory / f"stacks-{time.strftime('%H%M%S')}.txt"
        with open(out, "w") as f:
            for broker in self.topology.ids:
                pid = self.broker_pid(broker)
                f.write(f"=== broker {broker} (pid {pid})\n")
                if pid is None:
                    continue
                dump = subprocess.run(
                    [spy, "dump", "--pid", str(pid)],
                    capture_output=True, text=True, timeout=60, check=False,
                )  # fmt: skip
                f.write(dump.stdout + dump.stderr)
        log(f"broker stacks: {out}")

    def final_read(self, bootstrap: str, history: HistoryWriter, t0: float) -> None:
        log("waiting for the transactions left open to end (their timeout aborts them)")
        stable(bootstrap, TXN_TOPIC, 3, TXN_TIMEOUT_S * 2 + 60)
        log("reading every partition in full, both isolation levels")
        for isolation in (Isolation.READ_UNCOMMITTED, Isolation.READ_COMMITTED):
            for topic, count in [*TOPICS.items(), (TXN_TOPIC, 3)]:
                for partition in range(count):
                    for offset, value in read_partition(bootstrap, topic, partition, isolation):
                        history.write(
                            Final(time.monotonic() - t0, isolation, topic, partition, offset, value)
                        )

    def stop(self) -> None:
        with_suppressed(lambda: self.cloudctl("down", timeout=120))
        s3 = getattr(self, "s3", None)
        if s3 is not None:
            with_suppressed(s3.stop)


def stable(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    """Wait until no partition of ``topic`` has an open transaction (LSO = high watermark)."""
    ends = {}
    for isolation in Isolation:
        ends[isolation] = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"stable-{time.monotonic_ns()}",
                "isolation.level": str(isolation),
            }
        )
    deadline = time.monotonic() + timeout
    try:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            while True:
                try:
                    lso = ends[Isolation.READ_COMMITTED].get_watermark_offsets(tp, timeout=10)[1]
                    hw = ends[Isolation.READ_UNCOMMITTED].get_watermark_offsets(tp, timeout=10)[1]
                except KafkaException:
                    lso, hw = -1, 0
                if lso == hw:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topic}-{p}: LSO {lso} below HW {hw} after {timeout} s")
                time.sleep(1)
    finally:
        for consumer in ends.values():
            consumer.close()


def read_partition(
    bootstrap: str, topic: str, partition: int, isolation: Isolation
) -> list[tuple[int, str]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"final-{time.monotonic_ns()}",
            "isolation.level": str(isolation),
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 << 20,
            "enable.partition.eof": True,
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        deadline = time.monotonic() + 300
        while True:
            try:
                _low, high = consumer.get_watermark_offsets(tp, timeout=10)
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[tuple[int, str]] = []
        last = -1
        while last + 1 < high:
            msg = consumer.poll(1.0)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}-{partition}: read to {last} of {high} in 300 s")
            if msg is None:
                continue
            if (error := msg.error()) is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                continue
            offset = msg.offset()
            assert offset is not None
            out.append((offset, bytes(msg.value() or b"").decode()))
            last = offset
        return out
    finally:
        consumer.close()


def duplicate_causes(result: Result, topology: Topology) -> dict[str, int]:
    """What wrote each duplicated value's copies, read from the batch headers on the
    brokers' disks: the same producer id under a later epoch is a client's re-send after
    an epoch bump (librdkafka re-sequences what it has in flight); the same epoch would be
    a broker's failure to deduplicate; a copy in a segment gone to the remote tier is not
    looked up."""
    copies: list[list[tuple[str, int, int]]] = [
        sorted(
            {
                (e.topic, e.partition, e.offset)
                for e in a.events
                if isinstance(e, Ack | Final | Read)
            }
        )
        for a in result.anomalies
        if a.kind is AnomalyKind.DUPLICATED
    ]
    wanted: dict[tuple[str, int], set[int]] = defaultdict(set)
    for places in copies:
        for topic, partition, offset in places:
            wanted[(topic, partition)].add(offset)
    found: dict[tuple[str, int, int], tuple[int, int]] = {}
    for (topic, partition), offsets in wanted.items():
        for n in topology.ids:
            directory = topology.disk(n) / "data" / f"{topic}-{partition}"
            for segment in sorted(directory.glob("*.log")):
                for h in iter_headers(segment.read_bytes()):
                    for offset in offsets:
                        if h.base_offset <= offset <= h.base_offset + h.last_offset_delta:
                            found[(topic, partition, offset)] = (h.producer_id, h.producer_epoch)
    causes: dict[str, int] = defaultdict(int)
    for places in copies:
        writers = [found[p] for p in places if p in found]
        if len(writers) < len(places):
            causes["a copy not on a broker's disk (tiered)"] += 1
        elif len({pid for pid, _ in writers}) == 1 and writers[-1][1] > writers[0][1]:
            causes["re-sent by the client under a new producer epoch"] += 1
        else:
            causes["written twice under one producer epoch"] += 1
    return dict(causes)


@dataclass(frozen=True)
class Recovery:
    """One quiet window: seconds from every broker running (every fault healed, killed
    brokers restarted as processes) until every partition acked a record again, and of
    that how long the restarted brokers took to serve (start-up: imports, log recovery,
    metadata replay, registration)."""

    acked_s: float
    serving_s: float

    @property
    def after_serving_s(self) -> float:
        """Seconds from every broker serving until every partition acked."""
        return max(0.0, self.acked_s - self.serving_s)


def summarize(
    events: Sequence[Event], recoveries: list[Recovery], errors: list[str]
) -> dict[str, object]:
    """Longest gap between acks per partition (unavailability), recoveries."""
    last: dict[tuple[str, int], float] = {}
    gaps: dict[str, float] = defaultdict(float)
    for e in events:
        if isinstance(e, Ack):
            key = (e.topic, e.partition)
            if key in last:
                gaps[f"{e.topic}-{e.partition}"] = max(
                    gaps[f"{e.topic}-{e.partition}"], e.t - last[key]
                )
            last[key] = e.t
    return {
        "longest_unavailability_s": dict(sorted(gaps.items())),
        **spread("recovery", [r.acked_s for r in recoveries]),
        **spread("serving", [r.serving_s for r in recoveries]),
        **spread("recovery_after_serving", [r.after_serving_s for r in recoveries]),
        "client_errors": errors,
    }


STARTED = re.compile(r"broker \d+ started: ([\d.]+) s after exec: (.*)")
PHASE = re.compile(r"([a-z][a-z -]*?) ([\d.]+) s")


def broker_starts(logs: Path) -> str:
    """The brokers' start-up times from their "started" log lines: count, median and p90
    of exec to serving, and of each phase of it (interpreter and imports, set-up,
    metadata, registration, partition logs, replica roles, coordinators, listener)."""
    totals: list[float] = []
    phases: dict[str, list[float]] = {}
    for path in sorted(logs.glob("*/broker-*.log")):
        for match in STARTED.finditer(path.read_text(errors="replace")):
            totals.append(float(match[1]))
            for phase in PHASE.finditer(match[2]):
                phases.setdefault(phase[1], []).append(float(phase[2]))
    if len(totals) < 2:
        return f"{len(totals)} broker starts logged"

    def p50_p90(values: list[float]) -> str:
        if len(values) < 2:
            return f"{len(values)} value(s)"
        deciles = statistics.quantiles(values, n=10)
        return f"median {statistics.median(values):.2f} s, p90 {deciles[8]:.2f} s"

    parts = "; ".join(f"{name}: {p50_p90(values)}" for name, values in phases.items())
    return f"{len(totals)} broker starts, exec to serving: {p50_p90(totals)}; of which {parts}"


def spread(name: str, values: list[float]) -> dict[str, object]:
    """Median, max and the count over twice the session timeout of ``values`` (s)."""
    return {
        f"{name}_median_s": statistics.median(values) if values else None,
        f"{name}_max_s": max(values) if values else None,
        f"{name}_over_2x_session_timeout": sum(
            1 for v in values if v > 2 * SESSION_TIMEOUT_MS / 1000
        ),
        f"{name}_windows": len(values),
    }


def with_suppressed(action: object) -> None:
    try:
        action()  # type: ignore[operator]
    except Exception as exc:
        log(f"ignored during stop: {exc}")


def pids_of(marker: str, home: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and home in cmdline:
            found.append(int(entry.name))
    return found


def table(seed: int, minutes: float, result: Result, figures: dict[str, object]) -> str:
    c = result.counts
    by_kind = result.by_kind()
    gaps = figures["longest_unavailability_s"]
    assert isinstance(gaps, dict)
    causes = figures["duplicate_causes"]
    assert isinstance(causes, dict)
    lost = by_kind.get(AnomalyKind.LOST, 0)
    duplicated = by_kind.get(AnomalyKind.DUPLICATED, 0)
    rows = [
        f"seed {seed}, {minutes:g} min, {sum(c.faults.values())} faults",
        "",
        "| fault | injected |",
        "|---|---|",
        *[f"| {name} | {n} |" for name, n in sorted(c.faults.items()) if name != "heal-all"],
        "",
        "| records | count |",
        "|---|---|",
        f"| sent | {c.sent} |",
        f"| acked | {c.acked} |",
        f"| indeterminate (client gave up) | {c.send_errors} ({c.send_errors_in_log} in the log) |",
        f"| lost (acked, not in the log) | {lost} |",
        f"| duplicated | {duplicated} "
        + "".join(f"({n} {why}) " for why, n in causes.items())
        + "|",
        "| transactions committed / aborted / unknown | "
        f"{c.txns_committed} / {c.txns_aborted} / {c.txns_unknown} |",
        f"| records read by consumers | {c.reads} |",
        f"| other anomalies | {sum(by_kind.values()) - lost - duplicated} |",
        "",
        "| partition | longest unavailability (s) |",
        "|---|---|",
        *[f"| {p} | {g:.2f} |" for p, g in gaps.items()],
        "",
        "| per quiet window (s) | median | max | over 2x the session timeout "
        f"({2 * SESSION_TIMEOUT_MS / 1000:g} s) |",
        "|---|---|---|---|",
        *[
            f"| {label} | {figures[f'{key}_median_s']:.2f} | {figures[f'{key}_max_s']:.2f} | "
            f"{figures[f'{key}_over_2x_session_timeout']} of {figures[f'{key}_windows']} |"
            for label, key in [
                ("every broker running to every partition acked", "recovery"),
                ("every broker running to every broker serving (start-up)", "serving"),
                ("every broker serving to every partition acked", "recovery_after_serving"),
            ]
        ],
        "",
        f"{figures['broker_starts']}",
    ]
    return "\n".join(rows)


def inside(args: argparse.Namespace) -> int:
    topo = Topology(args.tag, args.brokers, Path(args.work))
    soak = Soak(args.seed, args.minutes, topo, args.cycle, args.quiet, args.lanes)
    try:
        result, figures = soak.run()
    finally:
        soak.stop()
    text = table(args.seed, args.minutes, result, figures)
    print(text)
    print(result.table())
    for anomaly in result.anomalies[:20]:
        print(anomaly)
    errors = figures["client_errors"]
    if errors:
        print("client errors (threads that died, delivery reports that failed):", errors)
    if args.record:
        record(REPO / "bench" / "RESULTS.md", f"### Soak {time.strftime('%Y-%m-%d')}, "
               f"seed {args.seed}, commit {commit()}\n\n{text}")  # fmt: skip
    return 0 if result.ok and not errors else 1


SOAK_END = "<!-- soak:end -->"


def record(path: Path, body: str) -> None:
    """Append ``body`` to the Soak section of ``path`` (before its end marker; at the end of
    the file when there is none)."""
    text = path.read_text() if path.exists() else ""
    head, marker, tail = text.partition(SOAK_END)
    path.write_text(head.rstrip("\n") + "\n\n" + body.strip("\n") + "\n" + marker + tail)


def commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return out.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.soak")
    parser.add_argument("--seed", type=int, action="append", help="repeatable; default 1")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--brokers", type=int, default=3, choices=[3, 5])
    parser.add_argument("--cycle", type=float, default=60, help="seconds per fault cycle")
    parser.add_argument("--quiet", type=float, default=10, help="healed seconds per cycle")
    parser.add_argument("--lanes", type=int, default=2, help="broker faults at once (< brokers)")
    parser.add_argument("--work", default=str(REPO / ".cache" / "soak"))
    parser.add_argument("--record", action="store_true", help="append to bench/RESULTS.md")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.lanes < args.brokers:
        parser.error("--lanes: from 1 to one less than --brokers")
    if args.inside:
        args.seed = args.seed[0]
        return inside(args)
    if os.geteuid() != 0:
        parser.error("the soak makes network namespaces and mounts: run it as root")
    for tool in ("ip", "nft", "tc", "mkfs.ext4", "mount"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} not found: `make soak` installs it (tools/ensure-system-deps.sh)")
    status = 0
    for seed in args.seed or [1]:
        tag = f"{os.getpid() % 10000}"
        work = Path(args.work)
        topo = Topology(tag, args.brokers, work)
        log(f"seed {seed}: {args.brokers} brokers, {args.minutes:g} min; work in {work}")
        for leftover in ("home", "s3"):
            shutil.rmtree(work / leftover, ignore_errors=True)
        try:
            topo.setup()
            cmd = [
                "ip", "netns", "exec", topo.hub, sys.executable, "-m", "tests.chaos.soak",
                "--inside", "--tag", tag, "--seed", str(seed), "--minutes", str(args.minutes),
                "--brokers", str(args.brokers), "--cycle", str(args.cycle),
                "--quiet", str(args.quiet), "--lanes", str(args.lanes), "--work", str(work),
                *(["--record"] if args.record else []),
            ]  # fmt: skip
            status |= subprocess.run(cmd, cwd=REPO, check=False).returncode
        finally:
            for pid in pids_of("", str(work / "home")):
                os.kill(pid, signal.SIGKILL)  # whatever a failed run left behind
            teardown(topo)
    return status


if __name__ == "__main__":
    sys.exit(main())
