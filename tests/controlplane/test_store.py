"""The SQLite state store: desired state that survives the control plane."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from controlplane import store
from controlplane.states import ClusterState, OperationState, OperationType
from controlplane.store import BrokerRecord, ClusterRecord, Store


def cluster(name: str = "demo") -> ClusterRecord:
    return ClusterRecord(
        name=name,
        cluster_id=f"id-{name}",
        state=ClusterState.CREATING,
        broker_count=2,
        config={"log.retention.ms": "1000"},
        operation=store.OP_CREATE,
    )


def broker(name: str, broker_id: int, port: int, raft_port: int = 0) -> BrokerRecord:
    return BrokerRecord(
        cluster=name,
        broker_id=broker_id,
        host="127.0.0.1",
        port=port,
        data_dir=f"/data/{name}/{broker_id}",
        log_path=f"/logs/{name}/{broker_id}.log",
        raft_port=raft_port,
    )


def test_round_trip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = Store(path)
    db.insert_cluster(cluster(), [broker("demo", 0, 9001), broker("demo", 1, 9002)])
    db.update_cluster("demo", state=ClusterState.ACTIVE, operation="")
    db.update_broker("demo", 1, pid=4242, restarts=1)
    db.close()

    db = Store(path)
    got = db.get_cluster("demo")
    assert got is not None
    assert (got.state, got.operation, got.config) == (
        ClusterState.ACTIVE,
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
    db.add_brokers("demo", [broker("demo", 1, 9002)], broker_count=2, state=ClusterState.UPDATING)
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
    assert record.state is ClusterState.ACTIVE, "a state written as a string parses"
    assert (record.s3_endpoint, record.s3_bucket) == ("", "")
    db.update_cluster("old", s3_endpoint="http://127.0.0.1:9000", s3_bucket="sluice-old-1")
    db.close()
    again = Store(path).get_cluster("old")
    assert again is not None
    assert (again.s3_endpoint, again.s3_bucket) == ("http://127.0.0.1:9000", "sluice-old-1")


def test_raft_ports_voters_and_scale_in_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = Store(path)
    record = ClusterRecord(
        name="q",
        cluster_id="id-q",
        state=ClusterState.CREATING,
        broker_count=4,
        voters=store.choose_voters(range(4)),
    )
    db.insert_cluster(record, [broker("q", i, 9100 + i, 9200 + i) for i in range(4)])
    assert db.used_ports() == {9100, 9101, 9102, 9103, 9200, 9201, 9202, 9203}
    got = db.broker("q", 2)
    assert (got.raft_port, got.raft_address) == (9202, "127.0.0.1:9202")
    db.update_broker("q", 2, raft_port=9300)
    db.remove_brokers("q", [3], broker_count=3)
    db.close()

    db = Store(path)
    cluster_ = db.get_cluster("q")
    assert cluster_ is not None
    assert (cluster_.voters, cluster_.broker_count, cluster_.min_broker_count) == ((0, 1, 2), 3, 3)
    assert [(b.broker_id, b.raft_port) for b in db.brokers("q")] == [
        (0, 9200),
        (1, 9201),
        (2, 9300),
    ]


@pytest.mark.parametrize(
    ("count", "voters", "smallest"),
    [(1, (0,), 1), (2, (0,), 1), (3, (0, 1, 2), 3), (7, (0, 1, 2), 3)],
)
def test_voters_are_fixed_by_the_first_brokers(
    count: int, voters: tuple[int, ...], smallest: int
) -> None:
    assert store.choose_voters(range(count)) == voters
    record = ClusterRecord(name="v", cluster_id="v", state=ClusterState.ACTIVE, broker_count=count)
    assert replace(record, voters=voters).min_broker_count == smallest


def test_a_version_2_state_db_gains_raft_ports_and_voters(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE clusters (name TEXT PRIMARY KEY, cluster_id TEXT NOT NULL UNIQUE,"
        " state TEXT NOT NULL, state_message TEXT NOT NULL DEFAULT '',"
        " operation TEXT NOT NULL DEFAULT '', broker_count INTEGER NOT NULL,"
        " config TEXT NOT NULL DEFAULT '{}', config_version INTEGER NOT NULL DEFAULT 1,"
        " created_at REAL NOT NULL, updated_at REAL NOT NULL,"
        " s3_endpoint TEXT NOT NULL DEFAULT '', s3_bucket TEXT NOT NULL DEFAULT '');"
        "CREATE TABLE brokers (cluster TEXT NOT NULL, broker_id INTEGER NOT NULL,"
        " host TEXT NOT NULL, port INTEGER NOT NULL UNIQUE, data_dir TEXT NOT NULL UNIQUE,"
        " log_path TEXT NOT NULL, pid INTEGER NOT NULL DEFAULT 0,"
        " config_version INTEGER NOT NULL DEFAULT 0, restarts INTEGER NOT NULL DEFAULT 0,"
        " PRIMARY KEY (cluster, broker_id));"
        "INSERT INTO clusters (name, cluster_id, state, broker_count, created_at, updated_at)"
        " VALUES ('old', 'id-old', 'ACTIVE', 1, 0, 0);"
        "INSERT INTO brokers (cluster, broker_id, host, port, data_dir, log_path)"
        " VALUES ('old', 0, '127.0.0.1', 9001, '/d/0', '/l/0');"
        "PRAGMA user_version=2;"
    )
    old.close()
    db = Store(path)
    record = db.get_cluster("old")
    assert record is not None
    assert record.voters == ()
    assert db.broker("old", 0).raft_port == 0
    assert db.used_ports() == {9001}
    assert db.db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION


@pytest.mark.parametrize("state", list(ClusterState))
def test_states_are_stored_as_their_names(tmp_path: Path, state: ClusterState) -> None:
    """SQLite keeps the MSK names ("ACTIVE"), so state.db files of any version open."""
    db = Store(tmp_path / "state.db")
    db.insert_cluster(cluster(), [])
    db.update_cluster("demo", state=state)
    raw = db.db.execute("SELECT state FROM clusters WHERE name = 'demo'").fetchone()[0]
    assert (type(raw), raw) == (str, state.name)
    got = db.get_cluster("demo")
    assert got is not None
    assert got.state is state


def test_operations_are_recorded_ended_and_kept(tmp_path: Path) -> None:
    db = Store(tmp_path / "state.db")
    create = store.OperationRecord(
        id=store.new_operation_id(),
        cluster="demo",
        cluster_id="id-demo",
        type=OperationType.CREATE,
        detail="2 broker(s)",
    )
    db.insert_cluster(replace(cluster(), operation_id=create.id), [broker("demo", 0, 9001)], create)
    (first,) = db.operations("demo")
    assert (first.id, first.state, first.ended_at) == (create.id, OperationState.IN_PROGRESS, None)
    assert first.started_at > 0
    db.note_operation(create.id, state_message="starting 2 broker(s)", error="broker 0 exited")
    db.finish_operations("id-demo", OperationState.COMPLETED)
    done = db.operation(create.id)
    assert done is not None
    assert (done.state, done.state_message, done.error) == (
        OperationState.COMPLETED,
        "starting 2 broker(s)",
        "broker 0 exited",
    )
    assert done.ended_at is not None
    db.note_operation(create.id, state_message="late")  # an ended operation does not change
    assert db.operation(create.id) == done

    new = [broker("demo", 1, 9002)]
    scaled = db.start_operation(
        "demo", OperationType.UPDATE_BROKER_COUNT, "1 -> 2 brokers", new_brokers=new
    )
    assert scaled.operation == "UPDATE_BROKER_COUNT"
    assert [b.broker_id for b in db.brokers("demo")] == [0, 1], "in the same transaction"
    deleting = db.start_operation("demo", OperationType.DELETE, "")
    interrupted = db.operation(scaled.operation_id)
    assert interrupted is not None
    assert interrupted.state == OperationState.FAILED
    assert interrupted.error == f"interrupted by DELETE (operation {deleting.operation_id})"
    db.delete_cluster("demo")
    ops = db.operations("demo")
    assert [(o.type, o.state) for o in ops] == [
        (OperationType.CREATE, OperationState.COMPLETED),
        (OperationType.UPDATE_BROKER_COUNT, OperationState.FAILED),
        (OperationType.DELETE, OperationState.COMPLETED),
    ], "kept after the cluster is gone; the delete completes with it"
    assert db.operations() == ops
    assert db.operations("other") == []


def test_a_version_3_state_db_gains_the_operations(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    old = sqlite3.connect(path)
    old.executescript(
        "DROP TABLE operations; ALTER TABLE clusters DROP COLUMN operation_id;"
        " ALTER TABLE brokers DROP COLUMN reboot_requested; PRAGMA user_version=3;"
    )
    old.close()
    db = Store(path)
    db.insert_cluster(cluster(), [broker("demo", 0, 9001)])
    assert db.broker("demo", 0).reboot_requested is False
    db.update_broker("demo", 0, reboot_requested=1)
    assert db.broker("demo", 0).reboot_requested is True
    assert db.operations() == []
    assert db.db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
