"""A Sluice cluster of N ``sluice-broker`` processes on 127.0.0.1, with KafkaCluster's interface.

    with SluiceCluster(tmp_path, brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        cluster.kill(0)          # SIGKILL broker 0
        cluster.start(0)         # restart it on the same ports and data dir
        cluster.broker(1).logs() # a BrokerProcess

Broker i is started as

    sluice-broker --data-dir D_i --listen 127.0.0.1:K_i --set node.id=i \\
        --set controller.quorum.voters=0@127.0.0.1:R_0,1@127.0.0.1:R_1,2@127.0.0.1:R_2 \\
        --set controller.listener=127.0.0.1:R_i --set advertised.listeners=127.0.0.1:K_i \\
        --set broker.session.timeout.ms=1500 --set broker.heartbeat.interval.ms=250 ...

with K_i its Kafka listener and R_i its Raft listener (free ports); the voters are the first
three brokers (broker 0 alone when N < 3). ``controller.quorum.voter.listeners`` (the voters'
Kafka listeners) is set too when the broker knows that setting. ``settings`` adds or overrides
settings of every broker.

The cluster has formed when Metadata from every broker lists all N brokers; ``start()`` raises
``ClusterNotFormed`` (with each broker's log tail) when that does not happen in time.
"""

from __future__ import annotations

import base64
import contextlib
import signal
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient

from .broker import BrokerProcess
from .processes import StartStop, free_ports, track, untrack

STOP_GRACE_SECONDS = 20.0
FAILOVER = {
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "250",
}


class ClusterNotFormed(RuntimeError):
    """The brokers run but do not form one cluster (Metadata does not list them all)."""


class SluiceCluster(StartStop):
    def __init__(
        self,
        workdir: Path,
        brokers: int = 3,
        settings: dict[str, str] | None = None,
        *,
        form_timeout: float = 60.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.size = brokers
        self.form_timeout = form_timeout
        self.startup_seconds = 0.0
        ports = free_ports(2 * brokers)
        self.kafka_ports = ports[:brokers]
        self.raft_ports = ports[brokers:]
        self.voters = list(range(min(3, brokers)))
        voters = ",".join(f"{v}@127.0.0.1:{self.raft_ports[v]}" for v in self.voters)
        voter_listeners = ",".join(f"{v}@127.0.0.1:{self.kafka_ports[v]}" for v in self.voters)
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.brokers: list[BrokerProcess] = []
        for i in range(brokers):
            broker_settings = {
                "node.id": str(i),
                "cluster.id": self.cluster_id,
                "controller.quorum.voters": voters,
                "controller.listener": f"127.0.0.1:{self.raft_ports[i]}",
                "advertised.listeners": f"127.0.0.1:{self.kafka_ports[i]}",
                **FAILOVER,
            }
            broker_settings["controller.quorum.voter.listeners"] = voter_listeners
            broker_settings.update(settings or {})
            self.brokers.append(
                BrokerProcess(
                    self.workdir / f"broker{i}" / "data", broker_settings, port=self.kafka_ports[i]
                )
            )

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, i: int) -> BrokerProcess:
        return self.brokers[i]

    node = broker

    def ports(self, i: int) -> tuple[int, int]:
        """(Kafka listener, Raft listener) of broker i."""
        return self.kafka_ports[i], self.raft_ports[i]

    def log_dir(self, i: int) -> Path:
        """Broker i's data dir: partition directories ``<topic>-<partition>/``."""
        return self.brokers[i].data_dir

    def logs(self, i: int, lines: int = 60) -> str:
        return "\n".join(self.brokers[i].logs().splitlines()[-lines:])

    def all_logs(self, lines: int = 30) -> str:
        return "\n".join(
            f"--- broker {i} ({b.log_path}):\n{self.logs(i, lines)}"
            for i, b in enumerate(self.brokers)
        )

    def alive(self, i: int) -> bool:
        return self.brokers[i].alive()

    # ------------------------------------------------------------------ lifecycle

    def start(self, i: int | None = None, *, wait: bool = True) -> None:
        """Start every broker (None) or broker i; waits until Metadata from each started broker
        lists all N brokers (``ClusterNotFormed`` otherwise)."""
        started = time.monotonic()
        which = list(range(self.size)) if i is None else [i]
        track(self)
        try:
            for n in which:
                if self.brokers[n].alive():
                    raise RuntimeError(f"Sluice broker {n} is already running")
                self.brokers[n].spawn()
            for n in which:
                try:
                    self.brokers[n].wait_listening(self.form_timeout)
                except RuntimeError as exc:
                    lines = [x for x in self.brokers[n].logs().splitlines() if x.strip()]
                    last = lines[-1].strip() if lines else "no log output"
                    raise ClusterNotFormed(
                        f"Sluice broker {n} did not start ({last[:200]}): {exc}"
                    ) from exc
            if wait:
                deadline = started + self.form_timeout
                for n in which:
                    self.wait_formed(n, deadline)
        except BaseException:
            if i is None:
                self.stop()
            raise
        if i is None:
            self.startup_seconds = time.monotonic() - started

    def wait_formed(self, i: int, deadline: float) -> None:
        admin = AdminClient({"bootstrap.servers": self.brokers[i].bootstrap, "log_level": 0})
        listed: list[int] = []
        error = ""
        while time.monotonic() < deadline:
            if not self.brokers[i].alive():
                raise ClusterNotFormed(f"Sluice broker {i} exited:\n{self.logs(i)}")
            try:
                listed = sorted(admin.list_topics(timeout=2).brokers)
                error = ""
            except Exception as exc:
                error = str(exc)
            if listed == list(range(self.size)):
                return
            time.sleep(0.1)
        raise ClusterNotFormed(
            f"Sluice cluster of {self.size} did not form within {self.form_timeout:.0f} s: "
            f"Metadata from broker {i} lists brokers {listed}"
            + (f" ({error})" if error else "")
            + f"\n{self.all_logs()}"
        )

    def kill(self, i: int) -> None:
        """SIGKILL broker i (its whole process group)."""
        self.brokers[i].kill()

    def stop(self, i: int | None = None) -> None:
        """Stop every broker (None) or broker i: SIGTERM (all at once), SIGKILL after 20 s."""
        which = [self.brokers[n] for n in (range(self.size) if i is None else [i])]
        for broker in which:
            if broker.proc is not None and broker.alive():
                broker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for broker in which:
            if broker.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    broker.proc.wait(max(0.1, deadline - time.monotonic()))
            broker.kill()  # SIGKILL if still running; reaps and untracks
        if i is None:
            untrack(self)
