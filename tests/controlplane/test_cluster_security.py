"""A cluster's client authentication as broker settings (controlplane/cluster_security.py):
the listeners of each mode, the internal user's files, the broker certificate, and the
broker's own checks accepting what the control plane gives it. No process is started."""

from __future__ import annotations

import ipaddress
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography import x509

from controlplane import cluster_security as cs
from controlplane import errors
from controlplane.states import ClientAuth, ClusterState
from controlplane.store import BrokerRecord, ClusterRecord, Store
from dataplane.config import BROKER_CONFIGS, BrokerConfig
from dataplane.security.listeners import check_security, parse_listeners
from proto.sluice.v1 import clusters_pb2 as pb
from wire.sasl import load_credentials

NONE, SCRAM, TLS = ClientAuth.NONE, ClientAuth.SCRAM, ClientAuth.TLS


def cluster(modes: tuple[ClientAuth, ...], credentials: str = "") -> ClusterRecord:
    return ClusterRecord(
        "c", "id-1", ClusterState.ACTIVE, 1, client_auth=modes, internal_credentials=credentials
    )


def broker(plaintext_port: int = 0, scram_port: int = 0, tls_port: int = 0) -> BrokerRecord:
    return BrokerRecord(
        "c",
        0,
        "127.0.0.1",
        9000,
        "/d/0",
        "/l/0",
        raft_port=9001,
        plaintext_port=plaintext_port,
        scram_port=scram_port,
        tls_port=tls_port,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_modes_keep_their_order_once_each_and_default_to_none() -> None:
    assert cs.parse_modes([SCRAM, TLS, SCRAM], "c", default=True) == (SCRAM, TLS)
    assert cs.parse_modes([], "c", default=True) == (NONE,)
    with pytest.raises(errors.BadRequest, match="at least one client authentication mode"):
        cs.parse_modes([], "c", default=False)


@pytest.mark.parametrize("value", pb.ClientAuth.values())
def test_every_client_auth_value_round_trips(value: int) -> None:
    if value == pb.CLIENT_AUTH_UNSPECIFIED:
        with pytest.raises(ValueError, match="no client auth mode"):
            ClientAuth.from_proto(value)
        return
    found = ClientAuth.from_proto(value)
    assert found.to_proto() == value
    assert pb.ClientAuth.Name(value) == "CLIENT_AUTH_" + found.value


def test_ports_a_broker_still_needs() -> None:
    assert cs.missing_ports((NONE,), False, broker()) == []  # its own port
    assert cs.missing_ports((NONE, SCRAM), True, broker()) == ["plaintext_port", "scram_port"]
    assert cs.missing_ports((TLS, SCRAM), True, broker(scram_port=1)) == ["tls_port"]


def test_bootstrap_strings_name_each_listener() -> None:
    secured = cluster((SCRAM, NONE), "/x/internal.json")
    brokers = [broker(plaintext_port=9092, scram_port=9096), replace(broker(), broker_id=1)]
    brokers[1] = replace(brokers[1], host="127.0.0.2", plaintext_port=9192, scram_port=9196)
    assert cs.bootstrap(secured, brokers, SCRAM) == "127.0.0.1:9096,127.0.0.2:9196"
    assert cs.bootstrap(secured, brokers, NONE) == "127.0.0.1:9092,127.0.0.2:9192"
    assert cs.bootstrap(secured, brokers, TLS) == ""
    # a cluster that never had a secured mode: its clients use the brokers' own port
    assert cs.bootstrap(cluster((NONE,)), brokers, NONE) == "127.0.0.1:9000,127.0.0.2:9000"


def test_the_internal_user_is_made_once_in_private_files(tmp_path: Path) -> None:
    path = cs.create_internal_user(tmp_path)
    credentials = load_credentials(path)
    assert credentials.username == cs.INTERNAL_USER
    assert len(credentials.password) >= 40
    users = path.parent / cs.USERS_FILE
    assert users.read_text() == (
        f"SCRAM-SHA-512=[name={cs.INTERNAL_USER},password={credentials.password}]\n"
    )
    assert (mode(path), mode(users), mode(path.parent)) == (0o600, 0o600, 0o700)
    assert load_credentials(cs.create_internal_user(tmp_path)) == credentials  # kept
    assert cs.create_internal_user(tmp_path / "other") != path


def test_an_open_cluster_keeps_its_one_plaintext_listener(tmp_path: Path) -> None:
    assert cs.broker_settings(tmp_path, cluster((NONE,)), broker()) == {}


def test_a_secured_broker_gets_its_listeners_files_and_certificate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    credentials = cs.create_internal_user(home / "clusters" / "c-1")
    secured = cluster((SCRAM, TLS, NONE), str(credentials))
    record = broker(plaintext_port=9092, scram_port=9096, tls_port=9094)
    settings = cs.broker_settings(home, secured, record)
    expected = (
        "INTERNAL://127.0.0.1:9000,CLIENT_SASL_SCRAM://127.0.0.1:9096,"
        "CLIENT_SECURE://127.0.0.1:9094,CLIENT://127.0.0.1:9092"
    )
    assert settings["listeners"] == settings["advertised.listeners"] == expected
    assert settings["listener.security.protocol.map"] == (
        "INTERNAL:SASL_PLAINTEXT,CLIENT_SASL_SCRAM:SASL_SSL,CLIENT_SECURE:SSL,CLIENT:PLAINTEXT"
    )
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["inter.broker.credentials.file"] == str(credentials)
    assert settings["ssl.client.auth"] == "required"
    assert settings["ssl.ca.location"] == str(home / "ca" / "ca.crt")
    if "super.users" in BROKER_CONFIGS:
        assert settings["super.users"] == "User:sluice-internal"
    password = load_credentials(credentials).password
    assert not any(password in value for value in settings.values())

    cert = x509.load_pem_x509_certificate(Path(settings["ssl.certificate.location"]).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert mode(Path(settings["ssl.key.location"])) == 0o600

    # the broker's own checks take them (listeners, TLS files, inter-broker credentials)
    config = BrokerConfig.build(data_dir=str(tmp_path), listen=record.address, overrides=settings)
    listeners = parse_listeners(config, "127.0.0.1", 9000)
    check_security(config, listeners)
    assert next((x.name, x.protocol) for x in listeners) == ("INTERNAL", "SASL_PLAINTEXT")


def test_scram_alone_needs_no_client_certificates(tmp_path: Path) -> None:
    credentials = cs.create_internal_user(tmp_path / "c")
    settings = cs.broker_settings(tmp_path, cluster((SCRAM,), str(credentials)), broker())
    assert "ssl.client.auth" not in settings
    assert "ssl.certificate.location" in settings


def test_the_store_keeps_modes_and_carries_credentials_with_brokers(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    credentials = cs.create_internal_user(tmp_path / "c")
    store.insert_cluster(cluster((SCRAM, NONE), str(credentials)), [broker(scram_port=9096)])
    found = store.get_cluster("c")
    assert found is not None
    assert found.client_auth == (SCRAM, NONE)
    assert found.secured
    (record,) = store.brokers("c")
    assert record.scram_port == 9096
    assert record.credentials == load_credentials(credentials)
    assert 9096 in store.used_ports()
    store.insert_cluster(replace(cluster((NONE,)), name="open", cluster_id="id-2"), [])
    opened = store.get_cluster("open")
    assert opened is not None
    assert not opened.secured
    credentials.unlink()
    with pytest.raises(OSError, match="cannot read the credentials file"):
        _ = store.broker("c", 0).credentials
    store.close()
