"""The registry of a secured (SCRAM) cluster wants HTTP basic auth with one of the cluster's SCRAM
users, and keeps everything (schemas, ids, versions, configs, modes, soft deletes) and its URL
through a restart of the control plane and of the cluster's brokers (`_schemas` is read back)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import security_pb2 as spb
from proto.sluice.v1 import security_pb2_grpc
from tests.controlplane.harness import ControlPlaneProcess, running_control_plane
from tests.schema_registry.conftest import Http

NAME = "secured"
USER, PASSWORD = "schemas-user", "schemas-Secret-123"
AVRO = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
AVRO_2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string",
                                                    "default": ""}],
    }
)  # fmt: skip
JSON = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; string note = 2; }\n'


@dataclass
class Secured:
    plane: ControlPlaneProcess
    url: str

    def http(self, user: tuple[str, str] | None = (USER, PASSWORD)) -> Http:
        return Http(self.url, user)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with running_control_plane(tmp_path_factory.mktemp("sluice-home")) as plane:
        creating = plane.clusters.CreateCluster(
            cpb.CreateClusterRequest(
                name=NAME, broker_count=1, client_auth=[cpb.CLIENT_AUTH_SCRAM]
            ),
            metadata=plane.metadata,
            timeout=10,
        )
        assert creating.state == cpb.CLUSTER_STATE_CREATING
        assert creating.schema_registry_url == ""  # given once the cluster is ACTIVE
        cluster = plane.wait_state(NAME)
        security_pb2_grpc.UsersStub(plane.channel).CreateUser(
            spb.CreateUserRequest(cluster=NAME, name=USER, password=PASSWORD),
            metadata=plane.metadata,
            timeout=60,
        )
        yield Secured(plane, cluster.schema_registry_url)


def test_basic_auth_with_the_clusters_scram_users(secured: Secured) -> None:
    status, answer = secured.http(None).call("GET", "/subjects")
    assert (status, answer["error_code"]) == (401, 401)
    assert "SCRAM user" in answer["message"]
    status, answer = secured.http((USER, "wrong-password")).call("GET", "/subjects")
    assert (status, answer["error_code"]) == (401, 401)
    status, answer = secured.http(("nobody", PASSWORD)).call("GET", "/subjects")
    assert status == 401
    assert secured.http().call("GET", "/subjects") == (200, [])
    config = {"url": secured.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"}
    with SchemaRegistryClient(config) as client:
        assert client.register_schema("orders-value", Schema(AVRO, "AVRO")) == 1
    with SchemaRegistryClient({"url": secured.url}) as anonymous:
        with pytest.raises(SchemaRegistryError) as refused:
            anonymous.get_subjects()
        assert refused.value.http_status_code == 401
    log = secured.plane.log_path.read_text(errors="replace")
    assert PASSWORD not in log
    assert "wrong-password" not in log


def snapshot(http: Http) -> dict[str, object]:
    """Everything the API says about the registry's contents."""
    out: dict[str, object] = {"subjects": http.call("GET", "/subjects?deleted=true")}
    status, subjects = http.call("GET", "/subjects?deleted=true")
    assert status == 200
    for subject in subjects:
        versions = http.call("GET", f"/subjects/{subject}/versions?deleted=true")[1]
        out[subject] = [
            http.call("GET", f"/subjects/{subject}/versions/{v}?deleted=true") for v in versions
        ]
        out[f"{subject}/config"] = http.call("GET", f"/config/{subject}")
        out[f"{subject}/mode"] = http.call("GET", f"/mode/{subject}")
    out["config"] = http.call("GET", "/config")
    out["ids"] = [http.call("GET", f"/schemas/ids/{i}") for i in range(1, 6)]
    return out


def test_a_restart_keeps_schemas_ids_and_the_url(secured: Secured) -> None:
    http = secured.http()
    assert http.register("orders-value", AVRO) == (200, {"id": 1})  # from the test before
    assert http.register("orders-value", AVRO_2) == (200, {"id": 2})
    assert http.register("orders-json", JSON, "JSON") == (200, {"id": 3})
    assert http.register("orders-proto", PROTO, "PROTOBUF") == (200, {"id": 4})
    assert http.register("orders-copy", AVRO) == (200, {"id": 1})
    assert http.call("PUT", "/config", {"compatibility": "FULL"})[0] == 200
    assert http.call("PUT", "/config/orders-json", {"compatibility": "NONE"})[0] == 200
    assert http.call("PUT", "/mode/orders-copy", {"mode": "READONLY"})[0] == 200
    assert http.call("DELETE", "/subjects/orders-value/versions/1") == (200, 1)
    before = snapshot(http)

    plane = secured.plane
    assert plane.stop() == 0  # the control plane stops the cluster's brokers too
    plane.start()
    cluster = plane.wait_state(NAME)
    assert cluster.schema_registry_url == secured.url  # the port is kept: the same URL

    assert snapshot(http) == before
    assert http.call("GET", "/config") == (200, {"compatibilityLevel": "FULL"})
    assert http.call("GET", "/subjects/orders-value/versions") == (200, [2])
    # ids go on from the highest; a known schema keeps its id
    avro_3 = json.dumps({**json.loads(AVRO_2), "doc": "third"})
    assert http.register("orders-value", avro_3) == (200, {"id": 5})
    assert http.register("orders-proto", PROTO, "PROTOBUF") == (200, {"id": 4})
    status, answer = http.register("orders-copy", AVRO_2)
    assert (status, answer["error_code"]) == (422, 42205)  # still READONLY
