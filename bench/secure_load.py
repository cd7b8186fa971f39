"""Clients of secured listeners for bench/bench_security.py: load processes that log in with
SCRAM-SHA-512 (over TLS for SASL_SSL) and produce, and one timed connection setup.

    python -m bench.secure_load produce OUT_JSON      < settings (JSON on stdin)
    python -m bench.secure_load one-record OUT_JSON   < settings (JSON on stdin)

The settings hold the password, so they come through a pipe, never the command line; the
result goes to OUT_JSON (a file: a large write to a pipe can come out short).

- ``produce``: confluent-kafka (librdkafka 2.16; Debian's kcat on librdkafka 2.0.2 cannot log
  in with SCRAM to either broker, see bench/RESULTS.md) produces every line of a file of
  records to partition 0 of a topic, one ``produce()`` call per record; timed from the
  first call to the end of ``flush()``, after the connection is up and authenticated.
- ``one-record``: N connections (uvloop), each a synchronous producer of one-record
  Produce v7 requests after its own TLS handshake and SCRAM login (bench/one_record.py on
  PLAINTEXT), counted in a window that starts at a common wall-clock time plus a warm-up.
- :func:`connect_once`: one new connection, each phase timed, until its first request
  after the login is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import resource
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import uvloop
from confluent_kafka import Producer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v4.request import MetadataRequest, MetadataRequestTopic

from bench import frames
from bench.common import REPO, python
from wire.client import BlockingConnection, decode_response, encode_request, response_schema
from wire.sasl import Exchange, Mechanism, SaslCredentials, SaslFailed, exchange

MECHANISM = Mechanism.SCRAM_SHA_512
SIZE = 100
CLIENT_ID = "sluice-bench"
CHECK_EVERY = 256  # decode one answer in this many and check its error code
MAX_SAMPLES = 20_000
PHASES = ("connect", "tls", "api_versions", "sasl", "first_request")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tls_context(ca: str | Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def spawn(kind: str, settings: dict[str, Any], out: Path) -> subprocess.Popen[str]:
    """``python -m bench.secure_load KIND OUT`` with ``settings`` written to its stdin."""
    proc = subprocess.Popen(
        [python(), "-m", "bench.secure_load", kind, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(settings))
    proc.stdin.close()
    return proc


# ---------------------------------------------------------------------------- batched produce


def produce(settings: dict[str, Any]) -> dict[str, Any]:
    """Every line of ``settings["records"]`` to ``settings["topic"]``, partition 0."""
    topic, count = settings["topic"], settings["count"]
    producer = Producer({"log_level": 0, **settings["config"]})
    with open(settings["records"], "rb") as f:
        values = f.read().split(b"\n")[:count]
    producer.list_topics(topic, timeout=20)  # connected and logged in before the clock starts
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(300)
    seconds = time.perf_counter() - started
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    if remaining:
        sys.exit(f"{remaining} records not acknowledged after 300 s")
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {"seconds": seconds, "records": len(values), "client_cpu": cpu}


# ---------------------------------------------------------------------------- one-record requests


class _Stats:
    def __init__(self) -> None:
        self.measuring = False
        self.running = True
        self.count = 0
        self.total = 0
        self.errors = 0
        self.error_codes: set[int] = set()
        self.latencies: list[float] = []


class _Producer(asyncio.Protocol):
    """One connection: the SASL exchange (if any), then one-record produce requests, one at
    a time, the frame encoded once and re-sent."""

    def __init__(self, frame: bytes, stats: _Stats, sasl: Exchange | None) -> None:
        self.frame = frame
        self.stats = stats
        self.sasl = sasl
        self.pending: Any = None
        self.correlation = 100
        self.buf = bytearray()
        self.sent_at = 0.0
        self.transport: Any = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._login(None)

    def _login(self, answer: Any) -> None:
        if self.sasl is None:
            self.ready.set_result(None)
            return
        try:
            request = next(self.sasl) if answer is None else self.sasl.send(answer)
        except StopIteration:
            self.sasl = None
            self.ready.set_result(None)
            return
        except SaslFailed as exc:
            self.ready.set_exception(exc)
            return
        self.pending = type(request)
        self.correlation += 1
        self.transport.write(encode_request(request, self.correlation, CLIENT_ID))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("closed by the broker during the login"))
        if self.stats.running:
            self.stats.errors += 1
            self.stats.error_codes.add(-1)

    def send(self) -> None:
        self.sent_at = time.perf_counter()
        self.transport.write(self.frame)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big")
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            if self.sasl is not None:
                self._login(decode_response(frame, response_schema(self.pending)))
            else:
                self._answer(frame)

    def _answer(self, frame: bytes) -> None:
        stats = self.stats
        stats.total += 1
        if stats.measuring:
            stats.count += 1
            stats.latencies.append(time.perf_counter() - self.sent_at)
        if stats.total % CHECK_EVERY == 1:
            codes = [c for c in frames.produce_errors(frame) if c != 0]
            if codes:
                stats.errors += 1
                stats.error_codes.update(codes)
        if stats.running:
            self.send()


def _credentials(settings: dict[str, Any]) -> SaslCredentials | None:
    if settings["protocol"] == "PLAINTEXT":
        return None
    return SaslCredentials(settings["username"], settings["password"], MECHANISM)


async def one_record(settings: dict[str, Any]) -> dict[str, Any]:
    host, _, port = settings["address"].rpartition(":")
    frame = frames.produce_frame(settings["topic"], frames.record_batch([b"v" * SIZE]), acks=-1)
    context = tls_context(settings["ca"]) if settings["protocol"] == "SASL_SSL" else None
    credentials = _credentials(settings)
    loop = asyncio.get_running_loop()
    stats = _Stats()
    conns: list[_Producer] = []
    for _ in range(settings["connections"]):
        sasl = exchange(credentials) if credentials else None
        _, conn = await loop.create_connection(
            lambda sasl=sasl: _Producer(frame, stats, sasl), host, int(port), ssl=context
        )
        await conn.ready
        conns.append(conn)
    await asyncio.sleep(max(0.0, settings["start_at"] - time.time()))
    for conn in conns:
        conn.send()
    await asyncio.sleep(settings["warmup"])
    stats.measuring = True
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    await asyncio.sleep(settings["seconds"])
    stats.measuring = False
    elapsed = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    stats.running = False
    await asyncio.sleep(0.2)
    for conn in conns:
        conn.transport.close()
    lat = stats.latencies
    if len(lat) > MAX_SAMPLES:
        lat = random.sample(lat, MAX_SAMPLES)
    return {
        "requests": stats.count,
        "seconds": elapsed,
        "errors": stats.errors,
        "error_codes": sorted(stats.error_codes),
        "client_cpu": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
        "latencies": lat,
    }


# ---------------------------------------------------------------------------- connection setup


def connect_once(
    address: str,
    protocol: str,
    credentials: SaslCredentials,
    context: ssl.SSLContext,
    topic: str,
) -> dict[str, float]:
    """Seconds of each of PHASES of one new connection: TCP connect, TLS handshake
    (SASL_SSL), ApiVersions v3, SaslHandshake + SaslAuthenticate x2 (SASL_*), Metadata v4
    for ``topic`` (the first request after the login)."""
    times = {"start": time.perf_counter()}
    with BlockingConnection.to(address, client_id=CLIENT_ID) as conn:
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        times["connect"] = time.perf_counter()
        if protocol == "SASL_SSL":
            conn.sock = context.wrap_socket(conn.sock, server_hostname="127.0.0.1")
        times["tls"] = time.perf_counter()
        conn.request(
            ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="1")
        )
        times["api_versions"] = time.perf_counter()
        if protocol != "PLAINTEXT":
            login = exchange(credentials)
            request = next(login)
            with contextlib.suppress(StopIteration):
                while True:
                    request = login.send(conn.request(request))
        times["sasl"] = time.perf_counter()
        answer = conn.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(name=topic),),  # type: ignore[arg-type]
                allow_auto_topic_creation=False,
            )
        )
        times["first_request"] = time.perf_counter()
    if answer.topics[0].error_code != 0:
        raise RuntimeError(f"Metadata over {protocol}: error {answer.topics[0].error_code}")
    order = ["start", *PHASES]
    return {p: times[p] - times[before] for before, p in itertools.pairwise(order)}


def main() -> None:
    kind, out = sys.argv[1], sys.argv[2]
    settings = json.loads(sys.stdin.read())
    if kind == "produce":
        result = produce(settings)
    elif kind == "one-record":
        result = uvloop.run(one_record(settings))
    else:
        sys.exit(f"unknown load {kind!r}: produce or one-record")
    with open(out, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
