"""listener.allowed.principals: a listener (a private endpoint's) admits only the principals
named for it. alice logs in through ENDPOINT_A and is refused at ENDPOINT_B with her valid
credentials (SASL_AUTHENTICATION_FAILED, then the connection closes); bob the other way
round; a PLAINTEXT listener restricted to alice closes an anonymous connection at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

from dataplane.config import BrokerConfig
from dataplane.security.listeners import allowed_principals, parse_listeners
from tests.security.conftest import users_file, wait_for_user
from tests.support.broker import BrokerProcess
from tests.support.processes import free_ports
from tests.support.raw_client import RawClient
from wire.errors import InvalidConfig

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    work = tmp_path_factory.mktemp("allowed")
    users = users_file(work, [f"SCRAM-SHA-512=[name={u},password={p}]" for u, p in USERS.items()])
    port, a, b, c = free_ports(4)
    broker = BrokerProcess(
        work / "data",
        {
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{port},ENDPOINT_A://127.0.0.1:{a},"
                f"ENDPOINT_B://127.0.0.1:{b},ENDPOINT_C://127.0.0.1:{c}"
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,ENDPOINT_A:SASL_PLAINTEXT,ENDPOINT_B:SASL_PLAINTEXT,"
                "ENDPOINT_C:PLAINTEXT"
            ),
            "listener.allowed.principals": (
                "ENDPOINT_A=User:alice;ENDPOINT_B=User:bob;ENDPOINT_C=User:alice"
            ),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.scram.bootstrap.users.file": str(users),
        },
        port=port,
    ).start()
    try:
        wait_for_user(broker.bootstrap, "bob")
        yield {"A": f"127.0.0.1:{a}", "B": f"127.0.0.1:{b}", "C": f"127.0.0.1:{c}"}
    finally:
        broker.stop()
        broker.kill()


def login(address: str, user: str) -> tuple[int, str | None, bool]:
    """(error code, message, whether the connection is closed afterwards)."""
    with RawClient(address) as client:
        client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        scram = ScramClient(["SCRAM-SHA-512"], user, USERS[user])
        first = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode())
        )
        scram.set_server_first(first.auth_bytes.decode())
        final = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode())
        )
        if final.error_code != ErrorCode.none:
            return final.error_code, final.error_message, client.is_closed(5)
        client.request(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        return final.error_code, final.error_message, False


def test_each_endpoint_admits_its_principals_only(endpoints: dict[str, str]) -> None:
    assert login(endpoints["A"], "alice")[::2] == (ErrorCode.none, False)
    assert login(endpoints["B"], "bob")[::2] == (ErrorCode.none, False)
    code, message, closed = login(endpoints["B"], "alice")
    assert code == ErrorCode.sasl_authentication_failed
    assert message == "Authentication failed: User:alice may not connect through ENDPOINT_B"
    assert closed
    assert login(endpoints["A"], "bob")[0] == ErrorCode.sasl_authentication_failed


def test_a_restricted_plaintext_listener_closes_anonymous_connections(
    endpoints: dict[str, str],
) -> None:
    with RawClient(endpoints["C"]) as client:
        assert client.is_closed(5)


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    def check(value: str) -> None:
        config = BrokerConfig.build(
            data_dir=str(tmp_path),
            listen="127.0.0.1:9092",
            overrides={
                "listeners": "PLAINTEXT://127.0.0.1:9092,EP://127.0.0.1:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EP:SASL_PLAINTEXT",
                "listener.allowed.principals": value,
            },
        )
        allowed_principals(config, parse_listeners(config, "127.0.0.1", 9092))

    check("EP=User:a|User:CN=x,O=y")
    with pytest.raises(InvalidConfig, match="no listener named 'NOPE'"):
        check("NOPE=User:a")
    with pytest.raises(InvalidConfig, match="expected NAME=User:a"):
        check("EP")
    with pytest.raises(InvalidConfig, match="is not a principal"):
        check("EP=alice")
