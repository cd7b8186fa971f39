"""Fixtures: a real control plane (one per test module) with a 1-broker cluster whose schema
registry the tests use over HTTP, as curl and Confluent's clients do."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.controlplane.harness import ControlPlaneProcess, running_control_plane

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
CLUSTER = "sr"


@dataclass
class Http:
    """Raw HTTP to one registry (urllib: what curl sends)."""

    url: str
    user: tuple[str, str] | None = None

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        data: bytes | None = None,
        content_type: str = CONTENT_TYPE,
        user: tuple[str, str] | None = None,
    ) -> tuple[int, Any]:
        """(status, decoded JSON body; the text when it is not JSON)."""
        if data is None and body is not None:
            data = json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", content_type)
        login = user or self.user
        if login is not None:
            token = base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode()

    def register(self, subject: str, schema: Any, kind: str = "AVRO", **extra: Any) -> Any:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        body = {"schema": text, "schemaType": kind, **extra}
        return self.call("POST", f"/subjects/{subject}/versions", body)


@dataclass
class Registry:
    plane: ControlPlaneProcess
    cluster: str
    url: str
    bootstrap: str

    @property
    def http(self) -> Http:
        return Http(self.url)


def open_cluster(plane: ControlPlaneProcess, name: str = CLUSTER) -> Registry:
    cluster = plane.create(name, brokers=1)
    assert cluster.schema_registry_url.endswith(f"/clusters/{name}")
    return Registry(plane, name, cluster.schema_registry_url, cluster.bootstrap_brokers)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A control plane and an open 1-broker cluster, for the tests of one module (each uses
    subjects and topics of its own)."""
    with running_control_plane(tmp_path_factory.mktemp("sluice-home")) as plane:
        yield open_cluster(plane)
