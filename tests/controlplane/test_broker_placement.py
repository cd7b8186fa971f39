"""``broker.hosts`` and ``broker.exec.prefix``: brokers on hosts of their own, started
under a command (the fault-injection soak puts each in its own network namespace this way;
here each gets its own 127.0.0.0/8 address and an ``env`` prefix, which any machine has)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient

from controlplane.config import Settings
from controlplane.process import exec_prefix
from tests.controlplane.harness import ControlPlaneProcess

HOSTS = ["127.0.0.2", "127.0.0.3"]


def test_settings_place_each_broker() -> None:
    settings = Settings(broker_hosts=" 127.0.0.2, 127.0.0.3 ")
    assert [settings.host_for(b) for b in range(3)] == ["127.0.0.2", "127.0.0.3", "127.0.0.2"]
    assert Settings().host_for(5) == "127.0.0.1"
    template = "ip netns exec 'ns {broker_id}' --at={host}"
    assert exec_prefix(template, 3, "10.0.0.4") == ["ip", "netns", "exec", "ns 3", "--at=10.0.0.4"]
    assert exec_prefix("", 3, "h") == []


def test_brokers_run_on_their_hosts_under_the_prefix(tmp_path: Path) -> None:
    plane = ControlPlaneProcess(
        tmp_path / "home",
        {
            "broker.hosts": ",".join(HOSTS),
            "broker.exec.prefix": "env SLUICE_PLACED_BROKER={broker_id}@{host}",
        },
    ).start()
    try:
        cluster = plane.create("placed", brokers=2)
        assert [(b.id, b.host) for b in cluster.brokers] == list(enumerate(HOSTS))
        for broker in cluster.brokers:
            environ = Path(f"/proc/{broker.pid}/environ").read_bytes().split(b"\0")
            # env exec'd the broker: the pid the control plane watches is the broker's
            assert f"SLUICE_PLACED_BROKER={broker.id}@{broker.host}".encode() in environ
            cmdline = Path(f"/proc/{broker.pid}/cmdline").read_bytes()
            assert b"--listen\0" + f"{broker.host}:{broker.port}".encode() in cmdline
        admin = AdminClient({"bootstrap.servers": f"{HOSTS[1]}:{cluster.brokers[1].port}"})
        listed = admin.list_topics(timeout=30).brokers
        assert sorted((b.id, b.host) for b in listed.values()) == list(enumerate(HOSTS))
    finally:
        plane.stop()
