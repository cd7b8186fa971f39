"""Tiered storage throughput beside the object store's own, in the same run.

    python -m bench.bench_tiered [--mib N] [--runs R] [--readahead N] [--no-write]

Starts the embedded S3 server (durable moto, as ``cloudctl up`` runs it) and one broker with
tiered storage, all on loopback under a temporary directory (removed at the end), and
measures:

1. the store's raw throughput: PUT and GET of whole segment-sized objects (16 MiB, boto3
   through ``tiered.object_store.S3ObjectStore``, one request at a time, as the broker
   uploads one partition's segments), PUTs of small objects, and ranged GETs of one chunk
   (remote.fetch.chunk.bytes, what a cold remote read asks for); the PUTs just before the
   upload, the GETs just before the reads, so that each is compared with a figure taken in
   the same conditions;
2. upload: N MiB of 1 KiB records produced (confluent-kafka) to a topic with
   ``remote.storage.enable=true`` and ``remote.log.copy.disable=true`` (so it is all local),
   then copy enabled (IncrementalAlterConfigs): time from that request until
   DescribeRemoteLog shows every closed segment ``copy_finished``; the broker log's
   "uploaded segment ... in X s" lines tell how much of it the uploads themselves took;
3. reads from offset 0 with kcat (librdkafka's C consumer, so the broker, not a Python
   client, is measured) once local retention (``local.retention.bytes=1``) has deleted every
   uploaded segment locally: cold remote (the broker restarted before each read: its chunk
   cache starts empty), cached remote (again, the cache large enough for all of it), and local
   (a second topic holding the same records, no remote tier). R runs each (default 5),
   median reported;
4. the two halves of a cold read, each the cheapest way: GETs of the same segment objects
   with their bodies spliced into /dev/null (``bench.spliced_gets``), and the local read;
   alone, at the same time, and the rate their summed CPU allows on this machine's cores
   (what no cold read can pass here).

Every read is checked: every offset from 0 to N-1 exactly once and in order (so the count
and the last offset), and the payload bytes add up. The S3 server's request log tells how
many ranged GETs each read made (a cached read must make none). Prints a table with the
ratios (upload / raw PUT, cold read / raw GET, cached / local, cold / local) and replaces the
"Tiered storage" section of bench/RESULTS.md unless --no-write. Every process it starts is
stopped at the end, also on an error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from bench.common import REPO, Others, cpu_seconds, minor_faults, replace_section
from bench.spliced_gets import GetsBeside
from controlplane.kafka import Admin
from spark.remote_log import describe_remote_log
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.minio import MinioServer
from tests.support.tiering import TEST_ADMIN
from tiered.access_keys import AccessKey
from tiered.chunk_cache import DEFAULT_CHUNK_BYTES, DEFAULT_READAHEAD
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.layout import segment_keys
from tiered.object_store import S3ObjectStore

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- BEGIN tiered (bench/bench_tiered.py) -->"
END = "<!-- END tiered -->"
MiB = 1 << 20
SEGMENT = 16 * MiB
"""segment.bytes: Kafka's default is 1 GiB, but moto holds a whole object in RAM per GET and
serves a ranged GET at the cost of a whole one (tiered/README.md): 16 MiB keeps 16 segments
in the default 256 MiB run, and is the store's multipart threshold, so each segment is one
PUT, as each raw object is."""
CHUNK = DEFAULT_CHUNK_BYTES
"""remote.fetch.chunk.bytes (the broker's default): one ranged GET of a cold read."""
RECORD = 1024
RAW_OBJECTS = 8
SMALL = 16 * 1024
BUCKET = "bench"
TIERED, LOCAL = "tiered", "local"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
REQUEST = re.compile(r'"(\w+) (\S+) HTTP/[\d.]+" (\d{3})')
UPLOADED = re.compile(r"uploaded segment (\d+)-(\d+) \((\d+) bytes\) in ([\d.]+) s")


# ---------------------------------------------------------------------------- accounting


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def s3_requests(log: Path, since: int) -> Counter[str]:
    """Requests in the S3 server's log after byte ``since``: "GET 206 .log" and the like."""
    counts: Counter[str] = Counter()
    with open(log, "rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    for line in ANSI.sub("", text).splitlines():
        found = REQUEST.search(line)
        if found:
            method, path, status = found.groups()
            kind = Path(path.split("?", 1)[0]).suffix or "(bucket)"
            counts[f"{method} {status} {kind}"] += 1
    return counts


@dataclass
class Usage:
    """Wall time and CPU of one measured step."""

    seconds: float = 0.0
    broker_cpu: float = 0.0
    broker_faults: int = 0
    """Minor page faults the broker took (new memory touched for the first time)."""
    s3_cpu: float = 0.0
    client_cpu: float = 0.0
    others: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)
    moved: int = 0
    """Bytes the step's own client moved (the raw GETs of a cold read's objects)."""

    def cores(self, cpu: float) -> float:
        return cpu / self.seconds if self.seconds > 0 else 0.0

    @property
    def mib_per_s(self) -> float:
        return self.moved / MiB / self.seconds


class Meter:
    """CPU of the broker, the S3 server and the waited-for children (kcat) over a step, and
    the share of the machine other processes took (a noisy machine shows here)."""

    def __init__(self, s3: EmbeddedS3 | MinioServer, broker: BrokerProcess | None) -> None:
        self.s3_pid = s3.proc.pid if s3.proc else 0
        self.broker_pid = broker.proc.pid if broker and broker.proc else 0
        self.s3_log = s3.log_path
        self.log_at = s3.log_path.stat().st_size
        self.s3_cpu = cpu_seconds(self.s3_pid)
        self.broker_cpu = cpu_seconds(self.broker_pid) if self.broker_pid else 0.0
        self.broker_faults = minor_faults(self.broker_pid) if self.broker_pid else 0
        self.client_cpu = children_cpu() + time.process_time()
        self.others = Others()
        self.started = time.perf_counter()

    def stop(self) -> Usage:
        seconds = time.perf_counter() - self.started
        self.others.stop()
        usage = Usage(
            seconds=seconds,
            broker_cpu=(cpu_seconds(self.broker_pid) - self.broker_cpu) if self.broker_pid else 0,
            broker_faults=(
                minor_faults(self.broker_pid) - self.broker_faults if self.broker_pid else 0
            ),
            s3_cpu=cpu_seconds(self.s3_pid) - self.s3_cpu,
            client_cpu=children_cpu() + time.process_time() - self.client_cpu,
        )
        usage.others = self.others.share(usage.broker_cpu + usage.s3_cpu, usage.client_cpu)
        time.sleep(0.05)  # the server logs a request after answering it
        usage.requests = s3_requests(self.s3_log, self.log_at)
        return usage


# ---------------------------------------------------------------------------- the store


def store_for(endpoint: str, key: AccessKey = TEST_ADMIN) -> S3ObjectStore:
    return S3ObjectStore(
        ObjectStoreSettings(
            endpoint=endpoint,
            bucket=BUCKET,
            access_key_id=key.access_key_id,
            secret_access_key=key.secret_access_key,
        )
    )


def summary(name: str, seconds: list[float], size: int, usage: Usage) -> dict[str, Any]:
    """MiB/s of the median request, the range, ms of the median request, CPU."""
    rates = sorted(size / MiB / t for t in seconds)
    return {
        name: size / MiB / statistics.median(seconds),
        f"{name}_range": (rates[0], rates[-1]),
        f"{name}_ms": statistics.median(seconds) * 1000,
        f"{name}_count": len(seconds),
        f"{name}_usage": usage,
    }


class RawStore:
    """The store's own rate: RAW_OBJECTS objects of SEGMENT bytes, one request at a time,
    through ``S3ObjectStore`` (boto3). Contents are checked outside the timed calls."""

    def __init__(self, s3: EmbeddedS3) -> None:
        self.s3 = s3
        self.store = store_for(s3.endpoint)
        self.store.ensure_bucket()
        self.blobs = [os.urandom(SEGMENT) for _ in range(RAW_OBJECTS)]
        self.keys = [f"raw/{i:02d}.bin" for i in range(RAW_OBJECTS)]
        self.keys_small: list[str] = []
        self.store.put("raw/warmup.bin", self.blobs[0][:MiB])  # connection, first request
        self.store.get("raw/warmup.bin")

    def put(self) -> dict[str, Any]:
        meter, puts = Meter(self.s3, None), []
        for key, blob in zip(self.keys, self.blobs, strict=True):
            t = time.perf_counter()
            self.store.put(key, blob)
            puts.append(time.perf_counter() - t)
        result = summary("put", puts, SEGMENT, meter.stop())
        # an upload also PUTs three small objects per segment (index, epochs, producer
        # snapshot), each written through and fsynced by the server: their cost
        small = []
        for i in range(RAW_OBJECTS):
            t = time.perf_counter()
            self.store.put(f"raw/small-{i:02d}.bin", self.blobs[i][:SMALL])
            small.append(time.perf_counter() - t)
        self.keys_small = [f"raw/small-{i:02d}.bin" for i in range(RAW_OBJECTS)]
        result["small_ms"] = statistics.median(small) * 1000
        return result

    def get(self) -> dict[str, Any]:
        """GETs of the objects PUT, then ranged GETs of each CHUNK of each."""
        meter, gets = Meter(self.s3, None), []
        for key, blob in zip(self.keys, self.blobs, strict=True):
            t = time.perf_counter()
            got = self.store.get(key)
            gets.append(time.perf_counter() - t)
            if got != blob:
                raise AssertionError(f"GET {key} returned other bytes than were PUT")
        get_usage = meter.stop()
        meter, ranged = Meter(self.s3, None), []
        for key, blob in zip(self.keys, self.blobs, strict=True):
            for start in range(0, SEGMENT, CHUNK):
                t = time.perf_counter()
                got = self.store.get_range(key, start, start + CHUNK)
                ranged.append(time.perf_counter() - t)
                if got != blob[start : start + CHUNK]:
                    raise AssertionError(f"ranged GET {key} [{start}, +{CHUNK}): other bytes")
        range_usage = meter.stop()
        self.store.delete_many([*self.keys, *self.keys_small, "raw/warmup.bin"])
        self.blobs.clear()
        return {
            **summary("get", gets, SEGMENT, get_usage),
            **summary("ranged", ranged, CHUNK, range_usage),
        }


def segment_objects(broker: BrokerProcess, topic: str) -> list[tuple[str, int]]:
    """Key and size of the .log object of every remote segment of ``topic`` partition 0, in
    offset order, as DescribeRemoteLog lists them."""
    remote = describe_remote_log(broker.bootstrap, [topic])
    part = remote.of(topic, 0)
    if part is None or not part.segments:
        raise AssertionError(f"DescribeRemoteLog lists no segment of {topic}-0")
    return [(segment_keys(remote.cluster_id, s).log, s.size_bytes) for s in part.segments]


def get_segments(s3: EmbeddedS3, broker: BrokerProcess, topic: str) -> Usage:
    """The peer of one cold read: whole GETs (boto3 get_object, one at a time, each checked
    for its size) of every segment object a cold read of ``topic`` fetches from
    (`segment_objects`). Usage.seconds over all of them."""
    objects = segment_objects(broker, topic)
    store = store_for(s3.endpoint)
    store.head(objects[0][0])  # the connection, outside the timed GETs
    meter = Meter(s3, None)
    total = 0
    for key, size in objects:
        got = len(store.get(key))
        if got != size:
            raise AssertionError(f"GET {key}: {got} bytes, DescribeRemoteLog says {size}")
        total += got
    usage = meter.stop()
    usage.moved = total
    return usage


# ---------------------------------------------------------------------------- the broker


def broker_settings(
    endpoint: str,
    cache_bytes: int,
    readahead: int = DEFAULT_READAHEAD,
    chunk_bytes: int = CHUNK,
    key: AccessKey = TEST_ADMIN,
) -> dict[str, str]:
    return {
        "remote.fetch.readahead.chunks": str(readahead),
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "100",
        "log.retention.check.interval.ms": "200",
        "remote.fetch.chunk.bytes": str(chunk_bytes),
        "remote.fetch.cache.bytes": str(cache_bytes),
        "tiered.s3.endpoint": endpoint,
        "tiered.s3.bucket": BUCKET,
        "tiered.s3.access.key.id": key.access_key_id,
        "tiered.s3.secret.access.key": key.secret_access_key,
    }


def admin(broker: BrokerProcess) -> Any:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})


def create(broker: BrokerProcess, topic: str, config: dict[str, str]) -> None:
    client = admin(broker)  # kept: a destroyed client fails its futures
    client.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def alter(broker: BrokerProcess, topic: str, key: str, value: str) -> None:
    """IncrementalAlterConfigs SET of one topic config."""
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource_ = ConfigResource("topic", topic, incremental_configs=[entry])
    client = admin(broker)
    client.incremental_alter_configs([resource_])[resource_].result(30)


def produce(
    broker: BrokerProcess, topics: list[str], count: int, partitions: int | None = None
) -> None:
    """``count`` records of RECORD random bytes to each topic (the same records to each);
    with ``partitions``, record i to partition i % partitions (else the client's choice)."""
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "acks": "1",
            "enable.idempotence": False,
            "compression.codec": "none",
            "queue.buffering.max.kbytes": 1_048_576,
            "log_level": 0,
        }
    )
    values = [os.urandom(RECORD) for _ in range(64)]
    for i in range(count):
        value = values[i % len(values)]
        where = {} if partitions is None else {"partition": i % partitions}
        for topic in topics:
            while True:
                try:
                    producer.produce(topic, value, **where)
                    break
                except BufferError:
                    producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"{left} records not delivered")


def watermarks(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "bench-wm", "log_level": 0}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def describe_remote(broker: BrokerProcess, topic: str) -> list[dict[str, Any]]:
    """DescribeRemoteLog's segments of partition 0."""
    host, port = broker.bootstrap.split(":")
    doc = asyncio.run(Admin(host, int(port), 10).describe_remote_log([topic]))
    part = doc["topics"].get(topic, {}).get("partitions", {}).get("0", {})
    segments: list[dict[str, Any]] = part.get("segments", [])
    return segments


def local_bases(broker: BrokerProcess, topic: str, partition: int = 0) -> list[int]:
    """Base offsets of the partition's local segments, the active (last) one included."""
    directory = broker.data_dir / f"{topic}-{partition}"
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


def all_copied(broker: BrokerProcess, closed: list[int]) -> list[dict[str, Any]] | None:
    segments = describe_remote(broker, TIERED)
    finished = [s for s in segments if s["state"] == "copy_finished"]
    if {s["base_offset"] for s in finished} >= set(closed):
        return finished
    return None


def read_all(broker: BrokerProcess, s3: EmbeddedS3, topic: str, count: int) -> Usage:
    """Read ``count`` records from offset 0 with kcat; checked: offsets 0..count-1 exactly
    once, in order, each value RECORD bytes."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        raise RuntimeError("kcat is needed (make system-deps)")
    cmd = [kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
           "-e", "-q", "-c", str(count), "-f", "%o %S\n"]  # fmt: skip
    meter = Meter(s3, broker)
    done = subprocess.run(cmd, capture_output=True, timeout=900, check=False)
    usage = meter.stop()
    offsets: list[int] = []
    total = 0
    for line in done.stdout.split(b"\n"):
        if line:
            offset, size = line.split()
            offsets.append(int(offset))
            total += int(size)
    if done.returncode != 0 or offsets != list(range(count)) or total != count * RECORD:
        last = offsets[-1] if offsets else None
        raise AssertionError(
            f"kcat read of {topic}: exit {done.returncode}, {len(offsets)} records of {count}, "
            f"last offset {last} (want {count - 1}), {total} payload bytes "
            f"(want {count * RECORD}); {done.stderr.decode(errors='replace')[-500:]}"
        )
    return usage


def read_beside_gets(broker: BrokerProcess, s3: EmbeddedS3, count: int, beside: bool) -> Usage:
    """The two halves of any cold read, each done the cheapest way this machine has: GETs
    of every segment object a cold read of the tiered topic fetches from, by another process
    that splices each body into /dev/null (``bench.spliced_gets``: the bytes taken from the
    S3 server and never brought into user space); and, when ``beside``, at the same time,
    kcat reading the local topic (the broker's cheapest path to a consumer: sendfile from
    the page cache). A cold read does both, overlapped chunk by chunk; here they overlap
    freely. Usage.seconds until both are done; Usage.moved the GETs' bytes."""
    with GetsBeside(store_for(s3.endpoint), segment_objects(broker, TIERED), receive=False) as gets:
        meter = Meter(s3, broker)
        gets.go()
        if beside:
            read_all(broker, s3, LOCAL, count)
        moved, _, _ = gets.result()
        usage = meter.stop()
    usage.moved = moved
    return usage


def restart(broker: BrokerProcess, s3: EmbeddedS3, count: int) -> None:
    """Stop and start the broker (its chunk cache starts empty), and wait until it leads both
    partitions again with both tiers in view, and until its remote log manager has made its
    first request to the store (the HEAD of the bucket): the boto3 client, made on first use,
    takes a few hundred ms to create, a cost of the broker's start, not of a cold read."""
    since = s3.log_path.stat().st_size
    broker.stop()
    broker.start()
    wait_for(lambda: watermarks(broker, TIERED) == (0, count), 60, "tiered topic served")
    wait_for(lambda: watermarks(broker, LOCAL) == (0, count), 60, "local topic served")
    wait_for(
        lambda: s3_requests(s3.log_path, since).get("HEAD 200 (bucket)"),
        60,
        "the restarted broker's first request to the store",
    )


# ---------------------------------------------------------------------------- the run


def measure(
    mib: int, runs: int, workdir: Path | None, readahead: int = DEFAULT_READAHEAD
) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": os.getloadavg(), "mib": mib, "runs": runs}
    out["readahead"] = readahead
    count = mib * MiB // RECORD
    out["records"] = count
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-tiered-", dir=workdir))
    s3 = EmbeddedS3(work / "s3", admin=TEST_ADMIN)
    cache_bytes = max(256 * MiB, 2 * mib * MiB)
    broker = BrokerProcess(work / "broker", broker_settings(s3.endpoint, cache_bytes, readahead))
    out["cache_mib"] = cache_bytes // MiB
    try:
        s3.start()
        raw_store = RawStore(s3)

        broker.start()
        create(
            broker,
            TIERED,
            {
                "remote.storage.enable": "true",
                "remote.log.copy.disable": "true",
                "segment.bytes": str(SEGMENT),
            },
        )
        create(broker, LOCAL, {"segment.bytes": str(SEGMENT)})
        t = time.perf_counter()
        produce(broker, [TIERED, LOCAL], count)
        out["produce_s"] = time.perf_counter() - t
        for topic in (TIERED, LOCAL):
            if watermarks(broker, topic) != (0, count):
                raise AssertionError(f"{topic}: watermarks {watermarks(broker, topic)} after "
                                     f"producing {count} records")  # fmt: skip
        print(f"  produced {count} records of {RECORD} B to each topic "
              f"in {out['produce_s']:.1f} s", flush=True)  # fmt: skip
        time.sleep(1)  # nothing is uploaded while copy is disabled: check it
        if describe_remote(broker, TIERED):
            raise AssertionError("segments were uploaded while remote.log.copy.disable=true")

        # the store's own PUT rate just before the upload, in the same state of the machine
        # (the produced data still being written back to disk, as during the upload)
        out["raw"] = raw = raw_store.put()
        print(f"  raw PUT of 16 MiB: {raw['put']:.1f} MiB/s (median request)", flush=True)

        *closed, active = local_bases(broker, TIERED)
        log_at = broker.log_path.stat().st_size
        meter = Meter(s3, broker)
        alter(broker, TIERED, "remote.log.copy.disable", "false")
        finished = wait_for(
            lambda: all_copied(broker, closed), 900, "every closed segment copy_finished"
        )
        usage = meter.stop()
        uploaded = sum(int(s["size_bytes"]) for s in finished)
        lines = broker.log_path.read_bytes()[log_at:].decode(errors="replace")
        each = [(int(m[3]), float(m[4])) for m in UPLOADED.finditer(lines)]
        out["upload"] = {
            "usage": usage,
            "segments": len(finished),
            "closed": len(closed),
            "mib": uploaded / MiB,
            "rate": uploaded / MiB / usage.seconds,
            "logged": each,
        }
        print(
            f"  upload: {len(finished)} segments, {uploaded / MiB:.0f} MiB in "
            f"{usage.seconds:.2f} s = {uploaded / MiB / usage.seconds:.1f} MiB/s",
            flush=True,
        )

        alter(broker, TIERED, "local.retention.bytes", "1")
        wait_for(
            lambda: local_bases(broker, TIERED)[0] == local_bases(broker, TIERED)[-1],
            120,
            "local copies of the uploaded segments deleted",
        )
        out["remote_end"] = max(int(s["end_offset"]) for s in finished) + 1
        out["local_start"] = local_bases(broker, TIERED)[0]
        if not out["local_start"] == out["remote_end"] == active:
            raise AssertionError(
                f"local log starts at {out['local_start']}, remote tier ends at "
                f"{out['remote_end']}: the read would not come from the remote tier"
            )

        raw.update(raw_store.get())
        print(
            f"  raw GET of 16 MiB: {raw['get']:.1f} MiB/s, ranged GET of {CHUNK // MiB} MiB: "
            f"{raw['ranged_ms']:.1f} ms ({raw['ranged']:.0f} MiB/s)",
            flush=True,
        )
        cold, cached, local, same = [], [], [], []
        for i in range(runs):
            restart(broker, s3, count)
            same.append(get_segments(s3, broker, TIERED))  # its peer, in the same minute
            cold.append(read_all(broker, s3, TIERED, count))
            print(f"  cold remote read {i + 1}: {mib / cold[-1].seconds:.1f} MiB/s; raw GETs "
                  f"of its {log_gets(same[-1])} segment objects just before: "
                  f"{same[-1].mib_per_s:.1f} MiB/s", flush=True)  # fmt: skip
        # a chunk is written to the disk cache the second time it is fetched
        # (remote.fetch.cache.admit.fetches=2): one unmeasured read admits them all
        read_all(broker, s3, TIERED, count)
        for i in range(runs):
            cached.append(read_all(broker, s3, TIERED, count))
            print(f"  cached remote read {i + 1}: {mib / cached[-1].seconds:.1f} MiB/s",
                  flush=True)  # fmt: skip
        for i in range(runs):
            local.append(read_all(broker, s3, LOCAL, count))
            print(f"  local read {i + 1}: {mib / local[-1].seconds:.1f} MiB/s", flush=True)
        spliced, beside = [], []
        for i in range(runs):
            spliced.append(read_beside_gets(broker, s3, count, beside=False))
            beside.append(read_beside_gets(broker, s3, count, beside=True))
            print(f"  spliced GETs of the tiered segments {i + 1}: "
                  f"{spliced[-1].moved / MiB / spliced[-1].seconds:.1f} MiB/s; beside a local "
                  f"read: {mib / beside[-1].seconds:.1f} MiB/s", flush=True)  # fmt: skip
        out["cold"], out["cached"], out["local"], out["same"] = cold, cached, local, same
        out["spliced"], out["beside"] = spliced, beside
    except BaseException:
        print(f"broker log tail ({broker.log_path}):\n{broker.logs()[-3000:]}", flush=True)
        raise
    finally:
        broker.stop()
        s3.stop()
        out["load_after"] = os.getloadavg()
        shutil.rmtree(work, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------- report


def median_usage(usages: list[Usage]) -> Usage:
    return sorted(usages, key=lambda u: u.seconds)[(len(usages) - 1) // 2]


def rate(r: dict[str, Any], usages: list[Usage]) -> tuple[float, float, str]:
    """MiB/s and records/s of the median run, and the MiB/s range."""
    mib, count = r["mib"], r["records"]
    rates = sorted(mib / u.seconds for u in usages)
    med = median_usage(usages)
    spread = f"{rates[0]:.0f}-{rates[-1]:.0f}" if len(rates) > 1 else ""
    return mib / med.seconds, count / med.seconds, spread


def cpu_note(u: Usage, client: str = "kcat", mib: float = 0.0) -> str:
    """Cores used by each process over the step; with ``mib``, the broker's CPU per MiB."""
    per = (
        f" ({u.broker_cpu * 1000 / mib:.1f} ms/MiB, {u.broker_faults / mib:.0f} page faults/MiB)"
        if mib
        else ""
    )
    parts = [f"broker {u.cores(u.broker_cpu):.2f}{per}"] if u.broker_cpu else []
    parts += [f"S3 {u.cores(u.s3_cpu):.2f}", f"{client} {u.cores(u.client_cpu):.2f}"]
    return ", ".join(parts) + f"; others {u.others * 100:.0f} %"


def log_gets(u: Usage) -> int:
    return u.requests.get("GET 206 .log", 0) + u.requests.get("GET 200 .log", 0)


def gets(u: Usage) -> str:
    ranged = u.requests.get("GET 206 .log", 0)
    whole = u.requests.get("GET 200 .log", 0)
    index = sum(v for k, v in u.requests.items() if k.startswith("GET") and k.endswith(".index"))
    return (
        f"{ranged} ranged GETs of .log objects"
        + (f", {whole} whole" if whole else "")
        + (f", {index} GETs of .index objects" if index else "")
    )


def render(r: dict[str, Any]) -> str:
    raw, up = r["raw"], r["upload"]
    cold, cached, local = (rate(r, r[k]) for k in ("cold", "cached", "local"))
    uc, uca, ul = (median_usage(r[k]) for k in ("cold", "cached", "local"))
    u = up["usage"]
    same = r["same"]
    same_rates = [x.mib_per_s for x in same]
    paired = sorted(r["mib"] / c.seconds / g for c, g in zip(r["cold"], same_rates, strict=True))
    same_med = median_usage(same)
    spliced, us = [x.mib_per_s for x in r["spliced"]], median_usage(r["spliced"])
    beside, ub = rate(r, r["beside"]), median_usage(r["beside"])
    in_turn = r["mib"] / (ul.seconds + us.seconds)
    """MiB/s of the local read and the spliced GETs one after the other (median times)."""
    both_cpu = ul.broker_cpu + ul.s3_cpu + ul.client_cpu + us.s3_cpu + us.client_cpu
    parallel = r["mib"] / (both_cpu / (os.cpu_count() or 1))
    """MiB/s if both halves' CPU (the idle broker's left out of the GETs') filled every core."""
    target = 0.8 * same_med.mib_per_s
    logged = [s for _, s in up["logged"]]
    in_uploads = sum(logged)
    each_rate = [b / MiB / s for b, s in up["logged"] if s > 0]

    expected = SEGMENT / MiB / raw["put"] + 3 * raw["small_ms"] / 1000
    """Seconds a segment's upload takes at the raw rates: the .log and 3 small objects."""

    def spread(x: str) -> str:
        return f" (median of {r['runs']}: {x} MiB/s)" if r["runs"] > 1 else ""

    def raw_row(name: str, what: str) -> tuple[str, str, str, str, str]:
        lo, hi = raw[f"{name}_range"]
        return (
            f"{what} (median of {raw[f'{name}_count']} requests: {lo:.0f}-{hi:.0f} MiB/s; "
            f"{raw[f'{name}_ms']:.1f} ms each)",
            f"{raw[name]:.1f}", "-", "-", cpu_note(raw[f"{name}_usage"], "boto3 client"),
        )  # fmt: skip

    rows = [
        raw_row("put", "S3 PUT of a 16 MiB object, raw (boto3 put_object)"),
        raw_row("get", "S3 GET of a 16 MiB object, raw (boto3 get_object)"),
        raw_row("ranged", f"S3 ranged GET of {CHUNK // MiB} MiB of a 16 MiB object, raw"),
        ("broker upload of the closed segments", f"{up['rate']:.1f}", "-",
         f"{up['rate'] / raw['put']:.2f}x raw PUT; {up['rate'] * expected / (SEGMENT / MiB):.2f}x "
         "raw PUTs of a segment's 4 objects", cpu_note(u, "bench", up["mib"])),
        ("read from offset 0, cold remote" + spread(cold[2]), f"{cold[0]:.1f}",
         f"{cold[1]:,.0f}",
         f"{cold[0] / raw['get']:.2f}x raw GET; {cold[0] / raw['ranged']:.2f}x raw ranged GET; "
         f"{cold[0] / local[0]:.2f}x local", cpu_note(uc, mib=r["mib"])),
        (f"S3 GETs of the {log_gets(same_med)} segment objects a cold read fetches from, raw "
         "(boto3 get_object, one at a time), just before each cold read"
         f" (median of {len(same)}: {min(same_rates):.0f}-{max(same_rates):.0f} MiB/s)",
         f"{same_med.mib_per_s:.1f}", "-",
         f"cold read / these GETs, each pair: median {statistics.median(paired):.2f}x "
         f"({paired[0]:.2f}-{paired[-1]:.2f}x)", cpu_note(same_med, "boto3 client")),
        ("read from offset 0, cached remote" + spread(cached[2]), f"{cached[0]:.1f}",
         f"{cached[1]:,.0f}", f"{cached[0] / local[0]:.2f}x local", cpu_note(uca, mib=r["mib"])),
        ("read from offset 0, local segments" + spread(local[2]), f"{local[0]:.1f}",
         f"{local[1]:,.0f}", "1.00x", cpu_note(ul, mib=r["mib"])),
        ("S3 GETs of those segment objects, each body spliced into /dev/null "
         "(bench.spliced_gets, one at a time)"
         f" (median of {len(spliced)}: {min(spliced):.0f}-{max(spliced):.0f} MiB/s)",
         f"{us.mib_per_s:.1f}", "-", f"{us.mib_per_s / same_med.mib_per_s:.2f}x the boto3 GETs",
         cpu_note(us, "spliced GETs")),
        ("the local read and those spliced GETs at the same time, in two processes"
         + spread(beside[2]), f"{beside[0]:.1f}", f"{beside[1]:,.0f}",
         f"the cold read {cold[0] / beside[0]:.2f}x of it", cpu_note(ub, "kcat + GETs")),
        ("the local read and the spliced GETs one after the other (sum of their median times)",
         f"{in_turn:.1f}", "-", f"the cold read {cold[0] / in_turn:.2f}x of it; the issue's "
         f"target, 0.8x the boto3 GETs, is {target:.0f} MiB/s = "
         f"{target / max(in_turn, beside[0]):.2f}x the faster of the two",
         f"both halves' CPU {both_cpu * 1000 / r['mib']:.2f} ms/MiB: on {os.cpu_count()} cores "
         f"fully used, {parallel:.0f} MiB/s (the target {target / parallel:.2f}x of that)"),
    ]  # fmt: skip
    lb, la = r["load_before"], r["load_after"]
    n_gets = log_gets(uc)
    per_get = (uc.seconds - uca.seconds) / max(n_gets, 1) * 1000
    lines = [
        BEGIN,
        "## Tiered storage (issue 5)",
        "",
        f"`python -m bench.bench_tiered --mib {r['mib']} --readahead {r['readahead']}` on "
        f"{platform.node()} "
        f"(nproc {os.cpu_count()}), {time.strftime('%Y-%m-%d %H:%M')}; load average before "
        f"{lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f}, after {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}. "
        "One broker and the embedded S3 server (durable moto: every PUT is written through "
        "to disk and fsynced before the answer) on loopback, all on the same 2 cores.",
        "",
        f"Settings: segment.bytes {SEGMENT // MiB} MiB (small so that the run has many "
        "segments; each is one PUT below the store's 16 MiB multipart threshold, as each raw "
        f"object is), remote.fetch.chunk.bytes {CHUNK // MiB} MiB (the default), "
        f"remote.fetch.cache.bytes {r['cache_mib']} MiB (all of the data fits), "
        "remote.log.manager.task.interval.ms 100; "
        f"records of {RECORD} B (random bytes, uncompressed; confluent-kafka, acks=1, "
        f"linger.ms=20), {r['mib']} MiB = {r['records']:,} records per topic; "
        f"{up['segments']} closed segments ({up['mib']:.0f} MiB) uploaded, the active one "
        "stays local. Reads: kcat with librdkafka's defaults (1 MiB per partition per "
        "fetch), no consumer group.",
        "",
        "| measurement | MiB/s | records/s | ratio | CPU during it (cores; others: share of "
        "the machine) |",
        "|---|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows],
        "",
        "What each figure measures:",
        "",
        f"- Raw S3: PUTs of {RAW_OBJECTS} objects of 16 MiB from memory through "
        "`tiered.object_store.S3ObjectStore` (boto3, one connection), one request at a time "
        "(the broker uploads a partition's segments one at a time), just before the upload "
        "(so both meet the produced data being written back to disk); GETs of them, then "
        f"ranged GETs of each {CHUNK // MiB} MiB chunk of each (`get_range`, what a cold "
        "remote read asks for: presigned by boto3 and received by Sluice's own HTTP client, "
        "`tiered.ranged_get`), just before the reads. MiB/s of the median request, and the "
        "range; contents checked outside the timed calls. Raw GETs of the same objects: "
        "after each restart of the broker for a cold read and before that read, every .log "
        "object of the tiered partition GET whole, in offset order, through the same client "
        "(each checked for the size DescribeRemoteLog gives): the bytes over the time of them "
        "all, the store's rate for exactly what the read fetches, in the same minute; the ratio is "
        "each cold read's rate (record values, the local tail included) over that of the "
        "GETs just before it.",
        "- Upload: from the IncrementalAlterConfigs (confluent-kafka AdminClient) that sets "
        f"remote.log.copy.disable=false until DescribeRemoteLog lists all {up['closed']} "
        "closed segments as copy_finished (polled every 50 ms): bytes of those segments "
        "(their .log files; the small index, epochs and producer-snapshot objects are not "
        f"counted) over that time. One run ({up['mib']:.0f} MiB).",
        "- Reads: kcat from offset 0 until offset N-1 (`-e -c N`), the wall time of the kcat "
        "process; MiB/s counts record values only (the bytes on the wire are ~2 % more). Each "
        "read is checked: offsets 0..N-1 exactly once and in order (count and last offset), "
        "N values of 1 KiB. Before reading, local retention (local.retention.bytes=1, "
        "log.retention.check.interval.ms=200) had deleted every uploaded segment locally: "
        f"the tiered topic's local log starts at offset {r['local_start']:,}, where the "
        "remote tier ends. Cold: the broker restarted before each read (its chunk cache is "
        "emptied at start), waited for until it serves both topics and its remote log "
        "manager has sent its first request to the store (creating the boto3 client takes "
        "~0.3 s, a cost of the broker's start, which a read right after a restart would pay); "
        "the S3 server's objects are in the OS page cache. Median run: "
        f"{gets(uc)}. Cached: the same read again after one unmeasured read (a chunk is "
        "written to the disk cache the second time it is fetched, "
        "remote.fetch.cache.admit.fetches=2), "
        f"the chunks in the broker's disk cache; median run: {gets(uca)}. Local: a second "
        "topic holding the same records, never tiered.",
        "- The two halves of a cold read, each done the cheapest way this machine has, to "
        "show what any cold read could reach here: the GETs of the segment objects a cold "
        "read fetches from, by a separate process (`bench.spliced_gets`, presigned URLs on "
        "its stdin) that moves each body with splice into /dev/null, never into user space; "
        "and the local read (sendfile from the page cache to kcat). Each alone after the "
        "local reads, then both started together; a cold read has to do both, overlapped "
        "chunk by chunk. The last row adds the CPU of both halves alone (every process: "
        "broker, S3 server, kcat, GETs; the idle broker's left out of the GETs') and divides "
        "it by the cores: the rate no cold read can pass here even with perfect overlap and "
        "no cost of its own beyond those halves. CPU over loopback is charged to whichever "
        "process the kernel's network work lands on, so compare totals, not one process.",
        "",
        "Where the upload time goes: "
        + (
            f'the broker log\'s {len(logged)} "uploaded segment ... in X s" lines add up to '
            f"{in_uploads:.2f} s of the {u.seconds:.2f} s ({in_uploads / u.seconds * 100:.0f} %); "
            f"the rest is the metadata commits around each upload (copy_started, "
            "copy_finished) and the manager's 100 ms task interval. Per segment: median "
            f"{statistics.median(logged) * 1000:.0f} ms ({statistics.median(each_rate):.1f} "
            "MiB/s), for four PUTs, one after the other: the index, epochs and "
            "producer-snapshot objects (small, but each fsynced twice by the server), then "
            f"the .log; a raw PUT of {SMALL // 1024} KiB takes {raw['small_ms']:.1f} ms. "
            f"At the raw rates that is {expected * 1000:.0f} ms ({SEGMENT // MiB} MiB at "
            f"{raw['put']:.1f} MiB/s + 3 x {raw['small_ms']:.1f} ms). CPU during the upload: "
            f"S3 server {u.cores(u.s3_cpu):.2f} cores, broker {u.cores(u.broker_cpu):.2f}."
            if logged
            else 'no "uploaded segment" lines were found in the broker log.'
        ),
        "",
        f"Where the cold read's time goes: {uc.seconds:.2f} s against {uca.seconds:.2f} s "
        f"for the cached read, {uc.seconds - uca.seconds:.2f} s more for {n_gets} ranged GETs "
        f"of {CHUNK // MiB} MiB: {per_get:.1f} ms per chunk, against {raw['ranged_ms']:.1f} ms "
        "for a raw ranged GET. "
        + (
            f"The broker fetches the {r['readahead']} chunk(s) after the one a fetch request "
            f"reads in the background (remote.fetch.readahead.chunks={r['readahead']}), on "
            "into the next segment near a segment's end, so the consumer waits only for the "
            "part of each GET that its reading of the previous chunk did not cover; a fetched "
            "chunk is held in memory (remote.fetch.memory.bytes) and the fetches reading it "
            "are answered there, on the broker's event loop; it goes to the disk cache only "
            "when it is fetched a second time."
            if r["readahead"]
            else "remote.fetch.readahead.chunks=0: the broker fetches a chunk only when a "
            "fetch request needs it, so the consumer waits for each GET in turn."
        ),
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB produced to each topic")
    parser.add_argument("--runs", type=int, default=5, help="runs of each read (median)")
    parser.add_argument(
        "--readahead",
        type=int,
        default=DEFAULT_READAHEAD,
        help=f"remote.fetch.readahead.chunks (default {DEFAULT_READAHEAD})",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    args = parser.parse_args(argv)
    if args.mib * MiB < 2 * SEGMENT:
        parser.error(f"--mib must be at least {2 * SEGMENT // MiB} (two segments)")
    if not (shutil.which("kcat") or shutil.which("kafkacat")):
        parser.error("kcat is needed for the reads (make system-deps)")
    result = measure(args.mib, max(1, args.runs), args.workdir, max(0, args.readahead))
    section = render(result)
    print(section)
    if not args.no_write:
        replace_section(RESULTS, BEGIN, END, section)
        print(f"updated {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
