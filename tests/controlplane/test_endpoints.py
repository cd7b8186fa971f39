"""Private endpoints without a process (controlplane/endpoints.py): the listeners a broker
gets (and the broker's own checks accepting them), the certificate naming their addresses,
the addresses chosen, the principals checked, and the table: ports per broker, kept with
the broker, settled once every broker runs the endpoint's config version."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography import x509

from controlplane import cluster_security as cs
from controlplane import endpoints, errors
from controlplane.config import Settings
from controlplane.endpoints import EndpointOps, EndpointState
from controlplane.states import ClientAuth, ClusterState, OperationType
from controlplane.store import BrokerRecord, ClusterRecord, Store
from dataplane.config import BrokerConfig
from dataplane.security.listeners import allowed_principals, check_security, parse_listeners

NONE, SCRAM = ClientAuth.NONE, ClientAuth.SCRAM


def broker(broker_id: int = 0, scram_port: int = 0) -> BrokerRecord:
    return BrokerRecord(
        "c", broker_id, "127.0.0.1", 9000 + 10 * broker_id, f"/d/{broker_id}", f"/l/{broker_id}",
        raft_port=9001 + 10 * broker_id, scram_port=scram_port,
    )  # fmt: skip


def check_with_broker(settings: dict[str, str], record: BrokerRecord, tmp_path: Path) -> None:
    config = BrokerConfig.build(data_dir=str(tmp_path), listen=record.address, overrides=settings)
    listeners = parse_listeners(config, record.host, record.port)
    check_security(config, listeners)
    allowed_principals(config, listeners)


def test_an_open_cluster_gets_its_endpoints_beside_its_own_listener(tmp_path: Path) -> None:
    opened = ClusterRecord("c", "id-1", ClusterState.ACTIVE, 1)
    listener = cs.EndpointListener("ENDPOINT_A", NONE, "127.0.16.1", 9500)
    settings = cs.broker_settings(tmp_path, opened, broker(), [listener])
    expected = "PLAINTEXT://127.0.0.1:9000,ENDPOINT_A://127.0.16.1:9500"
    assert settings["listeners"] == settings["advertised.listeners"] == expected
    assert settings["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,ENDPOINT_A:PLAINTEXT"
    assert "listener.allowed.principals" not in settings
    check_with_broker(settings, broker(), tmp_path)


def test_a_secured_broker_gets_endpoint_listeners_principals_and_names(tmp_path: Path) -> None:
    home = tmp_path / "home"
    credentials = cs.create_internal_user(home / "clusters" / "c-1")
    secured = ClusterRecord(
        "c", "id-1", ClusterState.ACTIVE, 1, client_auth=(SCRAM,),
        internal_credentials=str(credentials),
    )  # fmt: skip
    record = broker(scram_port=9096)
    listeners = [
        cs.EndpointListener("ENDPOINT_A", SCRAM, "127.0.16.1", 9500, ("User:alice",)),
        cs.EndpointListener("ENDPOINT_B", SCRAM, "127.0.16.2", 9600, ("User:bob", "User:CN=x,O=y")),
    ]
    settings = cs.broker_settings(home, secured, record, listeners)
    assert settings["listeners"] == (
        "INTERNAL://127.0.0.1:9000,CLIENT_SASL_SCRAM://127.0.0.1:9096,"
        "ENDPOINT_A://127.0.16.1:9500,ENDPOINT_B://127.0.16.2:9600"
    )
    assert settings["listener.security.protocol.map"].endswith(
        "ENDPOINT_A:SASL_SSL,ENDPOINT_B:SASL_SSL"
    )
    assert settings["listener.allowed.principals"] == (
        "ENDPOINT_A=User:alice;ENDPOINT_B=User:bob|User:CN=x,O=y"
    )
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    cert = x509.load_pem_x509_certificate(Path(settings["ssl.certificate.location"]).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    addresses = set(names.get_values_for_type(x509.IPAddress))
    assert {ipaddress.ip_address(a) for a in ("127.0.0.1", "127.0.16.1", "127.0.16.2")} <= (
        addresses
    )
    check_with_broker(settings, record, tmp_path)
    # a none endpoint keeps the cluster open to principals without ACLs, as a none mode does
    plain = [*listeners, cs.EndpointListener("ENDPOINT_C", NONE, "127.0.16.3", 9700)]
    assert cs.broker_settings(home, secured, record, plain)["allow.everyone.if.no.acl.found"] == (
        "true"
    )


def test_listener_names_and_principals() -> None:
    assert endpoints.listener_name("vpc-a1") == "ENDPOINT_VPC_A1"
    assert endpoints.check_principals(["User:a", " User:a", "User:CN=b,O=c"], SCRAM, "c", "e") == (
        "User:a",
        "User:CN=b,O=c",
    )
    for bad in ("alice", "User:", "User:a;b", "User:a|b", "Group:x"):
        with pytest.raises(errors.BadRequest, match="is not a principal"):
            endpoints.check_principals([bad], SCRAM, "c", "e")
    with pytest.raises(errors.BadRequest, match="User:ANONYMOUS"):
        endpoints.check_principals(["User:a"], NONE, "c", "e")


def test_addresses_are_free_loopback_ones(tmp_path: Path) -> None:
    first = endpoints.choose_address("127.0.250.0/30", set(), "c")
    assert first in ("127.0.250.1", "127.0.250.2")
    assert endpoints.choose_address("127.0.250.0/30", {first}, "c") != first
    with pytest.raises(errors.PreconditionFailed, match="no free address left"):
        endpoints.choose_address("127.0.250.0/30", {"127.0.250.1", "127.0.250.2"}, "c")
    assert endpoints.choose_address("127.0.251.254/31", set(), "c") == "127.0.251.254"
    for network in ("10.0.0.0/8", "::1/128", "nonsense"):
        with pytest.raises(errors.PreconditionFailed, match=r"not a network in 127\.0\.0\.0/8"):
            endpoints.choose_address(network, set(), "c")
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st\n"
        "   0: 0100FA7F:1F90 00000000:0000 0A\n"  # 127.250.0.1:8080, listening
    )
    assert endpoints.used_addresses(table) == {"127.250.0.1"}
    assert endpoints.used_addresses(tmp_path / "missing") == set()


class Backend:
    def __init__(self) -> None:
        self.notified: list[str] = []

    def notify(self, name: str, *, interrupt: bool = False) -> None:
        self.notified.append(name)

    def reserved_ports(self) -> set[int]:
        return set()


def test_the_table_keeps_ports_per_broker_and_settles_by_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.insert_cluster(
        ClusterRecord("c", "id-1", ClusterState.ACTIVE, 2, client_auth=(NONE,)),
        [broker(0), broker(1)],
    )
    backend = Backend()
    ops = EndpointOps(store, backend, Settings())
    made = ops.create("c", "a")
    assert (made.state, made.client_auth, made.listener) == (
        EndpointState.CREATING,
        NONE,
        "ENDPOINT_A",
    )
    assert sorted(made.ports) == [0, 1]
    assert set(made.ports.values()) <= store.used_ports()
    assert backend.notified == ["c"]
    cluster = store.get_cluster("c")
    assert cluster is not None
    assert (cluster.operation, cluster.config_version) == (OperationType.UPDATE_CONNECTIVITY, 2)
    with pytest.raises(errors.OperationInProgress):
        ops.create("c", "b")
    # not every broker runs version 2 yet: still CREATING
    store.update_broker("c", 0, config_version=2)
    endpoints.settle(store, "c")
    assert ops.get("c", "a").state is EndpointState.CREATING
    assert endpoints.listeners_for(store, "c", 1)[0].port == made.ports[1]
    store.update_broker("c", 1, config_version=2)
    endpoints.settle(store, "c")
    assert ops.get("c", "a").state is EndpointState.ACTIVE
    store.update_cluster("c", operation="", operation_id="", state=ClusterState.ACTIVE)

    with pytest.raises(errors.EndpointAlreadyExists):
        ops.create("c", "A")
    with pytest.raises(errors.PreconditionFailed, match="has no scram listener"):
        ops.create("c", "b", SCRAM)
    with pytest.raises(errors.InvalidName):
        ops.create("c", "-b")

    # a new broker gets a port of every endpoint; a removed one takes its ports along
    store.add_brokers("c", [broker(2)])
    endpoints.ensure_ports(store, "c", set())
    assert sorted(ops.get("c", "a").ports) == [0, 1, 2]
    store.remove_brokers("c", [2])
    assert sorted(ops.get("c", "a").ports) == [0, 1]

    deleting = ops.delete("c", "a")
    assert deleting.state is EndpointState.DELETING
    assert endpoints.listeners_for(store, "c", 0) == []
    assert ops.delete("c", "a") == deleting, "deleting again changes nothing"
    for broker_id in (0, 1):
        store.update_broker("c", broker_id, config_version=3)
    endpoints.settle(store, "c")
    with pytest.raises(errors.EndpointNotFound):
        ops.get("c", "a")
    assert not set(made.ports.values()) & store.used_ports()
    store.close()


def test_an_endpoint_goes_with_its_cluster(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.insert_cluster(ClusterRecord("c", "id-1", ClusterState.ACTIVE, 1), [broker(0)])
    ops = EndpointOps(store, Backend(), replace(Settings(), cluster_max_private_endpoints=1))
    ops.create("c", "a")
    store.update_cluster("c", operation="", operation_id="", state=ClusterState.ACTIVE)
    with pytest.raises(errors.PreconditionFailed, match=r"cluster\.max\.private\.endpoints"):
        ops.create("c", "b")
    store.delete_cluster("c")
    assert store.db.execute("SELECT count(*) FROM endpoints").fetchone()[0] == 0
    assert store.db.execute("SELECT count(*) FROM endpoint_ports").fetchone()[0] == 0
    store.close()
