"""SCRAM credentials in the metadata log: replay, removal, and snapshots."""

from __future__ import annotations

from dataplane.cluster import records as r
from dataplane.cluster.image import MetadataImage
from dataplane.security.credentials import from_password, password_matches


def _image() -> MetadataImage:
    return MetadataImage(node_id=1, cluster_id="c")


def test_credentials_replay_and_survive_a_snapshot() -> None:
    image = _image()
    alice512 = from_password("alice", 2, "pw-512", 4096)
    alice256 = from_password("alice", 1, "pw-256", 8192)
    bob = from_password("bob", 2, "bob-pw")
    image.apply(1, r.encode([alice512, alice256, bob]))
    image.apply(2, r.encode([r.RemoveScramCredential("bob", 2)]))
    assert set(image.scram) == {"alice"}
    restored = _image()
    restored.restore(image.snapshot())
    assert restored.scram == image.scram
    assert password_matches(restored.scram["alice"][1], "pw-256")
    assert not password_matches(restored.scram["alice"][2], "pw-256")
    assert b"pw-512" not in image.snapshot()


def test_entries_written_before_listeners_had_names_still_replay() -> None:
    image = _image()
    old = b'[{"type":"RegisterBroker","broker_id":1,"epoch":1,"host":"h","port":1,'
    old += b'"raft_host":"h","raft_port":2,"incarnation":"x"}]'
    image.apply(1, old)
    assert image.brokers[1].address_on("SASL_SSL") == ("h", 1)
    restored = _image()
    restored.restore(image.snapshot())
    assert restored.brokers[1].endpoints == {}


def test_a_broker_without_the_listener_has_no_address_on_it() -> None:
    image = _image()
    entry = b'[{"type":"RegisterBroker","broker_id":1,"epoch":1,"host":"h","port":1,'
    entry += b'"raft_host":"h","raft_port":2,"incarnation":"x",'
    entry += b'"endpoints":{"INTERNAL":["h",1],"ENDPOINT_A":["127.0.16.1",7]}}]'
    image.apply(1, entry)
    assert image.brokers[1].address_on("ENDPOINT_A") == ("127.0.16.1", 7)
    assert image.brokers[1].address_on("ENDPOINT_B") is None
    assert image.brokers[1].address_on(None) == ("h", 1)
