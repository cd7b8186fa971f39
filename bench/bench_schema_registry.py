"""Schema registry lookups per second: uncached (HTTP to the control plane) and cached
(confluent-kafka's SchemaRegistryClient, which keeps what it fetched).

    python -m bench.bench_schema_registry [--schemas N] [--seconds S] [--no-write]

Starts a control plane (``bench/bench_controlplane.py``'s ``Plane``) and a 1-broker
cluster, registers N (default 100) Avro schemas under N subjects through the registry's
REST API, then measures for S seconds (default 5) each:

- ``GET /schemas/ids/{id}`` over one keep-alive HTTP connection (http.client), ids in turn:
  what a deserializer's first lookup of an id costs;
- ``POST /subjects/{s}`` (lookup of a registered schema), the same way: what a
  serializer's first use of a schema costs;
- ``POST /subjects/{s}/versions`` of new schemas (registrations, each acknowledged by the
  cluster's ``_schemas`` topic, acks=all);
- ``SchemaRegistryClient.get_schema(id)`` after the first round (served from the client's
  cache: what every later record costs).

There is no peer in the same run: Confluent's registry is not on Maven Central. Prints a
table and replaces the "Schema registry" section of bench/RESULTS.md unless --no-write.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from confluent_kafka.schema_registry import SchemaRegistryClient

from bench.bench_controlplane import Plane, kill_under
from bench.common import machine_info, replace_section

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN = "<!-- schema-registry:begin -->"
END = "<!-- schema-registry:end -->"
CONTENT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def avro(i: int) -> str:
    fields = [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string"}]
    return json.dumps({"type": "record", "name": f"R{i}", "fields": fields})


class Http:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.prefix = parts.path.rstrip("/")
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        self.conn.request(method, self.prefix + path, body=data, headers=CONTENT)
        response = self.conn.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {payload[:200]!r}")
        return json.loads(payload)


def rate(seconds: float, step: Any) -> float:
    done = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        step(done)
        done += 1
    return done / (time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_schema_registry")
    parser.add_argument("--schemas", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sluice-bench-sr-") as tmp:
        home = Path(tmp)
        plane = Plane(home)
        try:
            plane.start()
            plane.create("sr-bench", brokers=1)
            cluster = plane.active("sr-bench")
            if cluster is None or not cluster.schema_registry_url:
                raise RuntimeError("the cluster is not ACTIVE or has no schema registry URL")
            url = cluster.schema_registry_url
            client = Http(url)
            ids = [
                client.call("POST", f"/subjects/s{i}-value/versions", {"schema": avro(i)})["id"]
                for i in range(args.schemas)
            ]
            n = args.schemas
            by_id = rate(args.seconds, lambda k: client.call("GET", f"/schemas/ids/{ids[k % n]}"))
            lookup = rate(
                args.seconds,
                lambda k: client.call("POST", f"/subjects/s{k % n}-value", {"schema": avro(k % n)}),
            )
            fresh = rate(
                args.seconds,
                lambda k: client.call(
                    "POST", f"/subjects/new{k}-value/versions", {"schema": avro(n + k)}
                ),
            )
            registry = SchemaRegistryClient({"url": url})
            for schema_id in ids:
                registry.get_schema(schema_id)
            cached = rate(args.seconds, lambda k: registry.get_schema(ids[k % n]))
        finally:
            plane.stop()
            kill_under(home)
    info = machine_info()
    rows = [
        ("GET /schemas/ids/{id} (uncached, HTTP)", by_id),
        ("POST /subjects/{s} lookup (uncached, HTTP)", lookup),
        ("POST /subjects/{s}/versions, new schema (acks=all)", fresh),
        ("SchemaRegistryClient.get_schema (cached in the client)", cached),
    ]
    section = "\n".join(
        [
            BEGIN,
            "## Schema registry",
            "",
            f"`python -m bench.bench_schema_registry`: {args.schemas} Avro schemas, "
            f"{args.seconds:.0f} s per figure, one client, one connection, 1-broker cluster. "
            f"Machine: {info['cpu']}, {info['nproc']} cores, 1-minute load average "
            f"{os.getloadavg()[0]:.1f} at the end. No peer: Confluent's registry is not on "
            "Maven Central.",
            "",
            "| operation | per second |",
            "|---|---|",
            *(f"| {name} | {value:,.0f} |" for name, value in rows),
            END,
        ]
    )
    print(section)
    if not args.no_write:
        replace_section(RESULTS, BEGIN, END, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
