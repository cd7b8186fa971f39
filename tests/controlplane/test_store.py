"""The SQLite state store: desired state that survives the control plane."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from controlplane import store
from controlplane.store import BrokerRecord, ClusterRecord, Store


def cluster(name: str = "demo") -> ClusterRecord:
    return ClusterRecord(
        name=name,
        cluster_id=f"id-{name}",
        state=store.CREATING,
        broker_count=2,
        config={"log.retention.ms": "1000"},
        operation=store.OP_CREATE,
    )


def broker(name: str, broker_id: int, port: int) -> BrokerRecord:
    return BrokerRecord(
        cluster=name,
        broker_id=broker_id,
        host="127.0.0.1",
        port=port,
        data_dir=f"/data/{name}/{broker_id}",
        log_path=f"/logs/{name}/{broker_id}.log",
    )


def test_round_trip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = Store(path)
    db.insert_cluster(cluster(), [broker("demo", 0, 9001), broker("demo", 1, 9002)])
    db.update_cluster("demo", state=store.ACTIVE, operation="")
    db.update_broker("demo", 1, pid=4242, restarts=1)
    db.close()

    db = Store(path)
    got = db.get_cluster("demo")
    assert got is not None
    assert (got.state, got.operation, got.config) == (
        store.ACTIVE,
        "",
        {"log.retention.ms": "1000"},
    )
    assert got.created_at <= got.updated_at
    assert [(b.broker_id, b.port, b.pid, b.restarts) for b in db.brokers("demo")] == [
        (0, 9001, 0, 0),
        (1, 9002, 4242, 1),
    ]
    assert db.used_ports() == {9001, 9002}
    assert db.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_ports_and_names_are_unique(tmp_path: Path) -> None:
    db = Store(tmp_path / "state.db")
    db.insert_cluster(cluster("a"), [broker("a", 0, 9001)])
    with pytest.raises(sqlite3.IntegrityError):
        db.insert_cluster(cluster("b"), [broker("b", 0, 9001)])
    assert db.get_cluster("b") is None, "a failed insert leaves nothing behind"
    with pytest.raises(sqlite3.IntegrityError):
        db.insert_cluster(cluster("a"), [])


def test_delete_and_settings(tmp_path: Path) -> None:
    db = Store(tmp_path / "state.db")
    db.insert_cluster(cluster(), [broker("demo", 0, 9001)])
    db.add_brokers("demo", [broker("demo", 1, 9002)], broker_count=2, state=store.UPDATING)
    assert len(db.brokers("demo")) == 2
    db.delete_cluster("demo")
    assert db.get_cluster("demo") is None
    assert db.all_brokers() == []
    assert db.get_setting("s3.endpoint") == ""
    db.set_setting("s3.endpoint", "http://127.0.0.1:9000")
    db.set_setting("s3.endpoint", "http://127.0.0.1:9001")
    assert db.get_setting("s3.endpoint") == "http://127.0.0.1:9001"


def test_a_version_1_state_db_gains_the_object_store_columns(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE clusters (name TEXT PRIMARY KEY, cluster_id TEXT NOT NULL UNIQUE,"
        " state TEXT NOT NULL, state_message TEXT NOT NULL DEFAULT '',"
        " operation TEXT NOT NULL DEFAULT '', broker_count INTEGER NOT NULL,"
        " config TEXT NOT NULL DEFAULT '{}', config_version INTEGER NOT NULL DEFAULT 1,"
        " created_at REAL NOT NULL, updated_at REAL NOT NULL);"
        "INSERT INTO clusters (name, cluster_id, state, broker_count, created_at, updated_at)"
        " VALUES ('old', 'id-old', 'ACTIVE', 1, 0, 0);"
        "PRAGMA user_version=1;"
    )
    old.close()
    db = Store(path)
    record = db.get_cluster("old")
    assert record is not None
    assert (record.s3_endpoint, record.s3_bucket) == ("", "")
    db.update_cluster("old", s3_endpoint="http://127.0.0.1:9000", s3_bucket="sluice-old-1")
    db.close()
    again = Store(path).get_cluster("old")
    assert again is not None
    assert (again.s3_endpoint, again.s3_bucket) == ("http://127.0.0.1:9000", "sluice-old-1")
