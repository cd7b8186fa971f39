"""Tiered storage throughput beside the object store's own, in the same run.

    python -m bench.bench_tiered [--mib N] [--no-write]

Starts the embedded S3 server (durable moto, as `cloudctl up` runs it) and one broker with
tiered storage, all on loopback under a temporary directory, and measures:

1. the store's raw throughput: PUT and GET of whole segment-sized objects (boto3 through
   ``tiered.object_store``), and ranged GETs of one chunk;
2. upload: N MiB produced to a topic with ``remote.log.copy.disable=true`` (so it is all
   local), then copy enabled: time until every closed segment is in the object store;
3. reads from offset 0 with kcat (librdkafka's C consumer): cold remote (a restarted broker: its
   chunk cache starts empty; the local copies were deleted by local retention), cached remote
   (the same read again), and local (a second topic with the same records, no remote tier).

Every read is checked to return every record. Prints a table with the ratios (upload / raw
PUT, cold read / raw GET, cached / local, cold / local) and replaces the "Tiered storage"
section of bench/RESULTS.md unless --no-write.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, replace_section
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.object_store import S3ObjectStore

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- BEGIN tiered (bench/bench_tiered.py) -->"
END = "<!-- END tiered -->"
MiB = 1 << 20
SEGMENT = 16 * MiB
CHUNK = 4 * MiB
RECORD = 1024
BUCKET = "bench"


def settings(endpoint: str) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "100",
        "log.retention.check.interval.ms": "200",
        "remote.fetch.chunk.bytes": str(CHUNK),
        "remote.fetch.cache.bytes": str(4096 * MiB),
        "tiered.s3.endpoint": endpoint,
        "tiered.s3.bucket": BUCKET,
        "tiered.s3.access.key.id": "bench",
        "tiered.s3.secret.access.key": "bench",
    }


def store_for(endpoint: str) -> S3ObjectStore:
    return S3ObjectStore(
        ObjectStoreSettings(
            endpoint=endpoint,
            bucket=BUCKET,
            access_key_id="bench",
            secret_access_key="bench",
            multipart_threshold_bytes=64 * MiB,
        )
    )


def raw_store(store: S3ObjectStore, count: int = 4) -> dict[str, float]:
    data = os.urandom(SEGMENT)
    started = time.monotonic()
    for i in range(count):
        store.put(f"raw/{i}", data)
    put = count * SEGMENT / MiB / (time.monotonic() - started)
    started = time.monotonic()
    for i in range(count):
        assert len(store.get(f"raw/{i}")) == SEGMENT
    get = count * SEGMENT / MiB / (time.monotonic() - started)
    ranged = []
    for i in range(count):
        t = time.monotonic()
        assert len(store.get_range(f"raw/{i}", CHUNK, 2 * CHUNK)) == CHUNK
        ranged.append(time.monotonic() - t)
    store.delete_many([f"raw/{i}" for i in range(count)])
    return {
        "put": put,
        "get": get,
        "ranged_ms": statistics.median(ranged) * 1000,
        "ranged_mib_s": CHUNK / MiB / statistics.median(ranged),
    }


def create(broker: BrokerProcess, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def alter(broker: BrokerProcess, topic: str, key: str, value: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(broker: BrokerProcess, topics: list[str], count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "acks": "1",
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    value = os.urandom(RECORD)
    for i in range(count):
        for topic in topics:
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def read_all(broker: BrokerProcess, topic: str, count: int) -> float:
    """MiB/s of reading ``count`` records from offset 0 with kcat (librdkafka's C consumer:
    the broker, not a Python client, is what is measured), checked: every offset once, in
    order."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        raise RuntimeError("kcat is needed (make system-deps)")
    started = time.monotonic()
    done = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
         "-c", str(count), "-f", "%o %S\n"],
        capture_output=True, timeout=600, check=True,
    )  # fmt: skip
    seconds = time.monotonic() - started
    offsets, total = [], 0
    for line in done.stdout.split(b"\n"):
        if line:
            offset, size = line.split()
            offsets.append(int(offset))
            total += int(size)
    if offsets != list(range(count)):
        raise AssertionError(f"read {len(offsets)} records of {count}, not every offset once")
    return total / MiB / seconds


def remote_end(broker: BrokerProcess, topic: str) -> int:
    import asyncio
    import json

    from controlplane.kafka import KafkaConnection
    from tiered.remote_log_api import DescribeRemoteLogRequest

    async def ask() -> Any:
        host, port = broker.bootstrap.split(":")
        async with await KafkaConnection.open(host, int(port), 10) as conn:
            payload = json.dumps({"topics": [topic]}).encode()
            return await conn.request(DescribeRemoteLogRequest(payload=payload), 10)

    doc = json.loads(asyncio.run(ask()).payload)
    part = doc["topics"][topic]["partitions"].get("0", {"segments": []})
    done = [s["end_offset"] + 1 for s in part["segments"] if s["state"] == "copy_finished"]
    return max(done, default=0)


def closed_end(broker: BrokerProcess, topic: str) -> int:
    """Where the active segment starts: everything below it can be uploaded."""
    logs = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    return int(logs[-1].name.split(".")[0])


def measure(mib: int) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": os.getloadavg(), "mib": mib}
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-tiered-"))
    s3 = EmbeddedS3(work / "s3").start()
    broker = BrokerProcess(work / "broker", settings(s3.endpoint))
    try:
        store = store_for(s3.endpoint)
        store.ensure_bucket()
        out["raw"] = raw_store(store)
        print(f"  raw store: {out['raw']}", flush=True)
        broker.start()
        count = mib * MiB // RECORD
        tiered = {
            "remote.storage.enable": "true",
            "remote.log.copy.disable": "true",
            "segment.bytes": str(SEGMENT),
        }
        create(broker, "tiered", tiered)
        create(broker, "local", {"segment.bytes": str(SEGMENT)})
        produce(broker, ["tiered", "local"], count)
        end = closed_end(broker, "tiered")
        uploaded_bytes = sum(
            p.stat().st_size
            for p in (broker.data_dir / "tiered-0").glob("*.log")
            if int(p.name.split(".")[0]) < end
        )
        started = time.monotonic()
        alter(broker, "tiered", "remote.log.copy.disable", "false")
        wait_for(lambda: remote_end(broker, "tiered") >= end, 600, "every closed segment uploaded")
        seconds = time.monotonic() - started
        out["upload"] = uploaded_bytes / MiB / seconds
        out["uploaded_mib"] = uploaded_bytes / MiB
        print(f"  upload: {out['upload']:.1f} MiB/s ({out['uploaded_mib']:.0f} MiB)", flush=True)

        alter(broker, "tiered", "local.retention.bytes", "1")
        wait_for(
            lambda: (
                closed_end(broker, "tiered")
                == min(
                    int(p.name.split(".")[0]) for p in (broker.data_dir / "tiered-0").glob("*.log")
                )
            ),
            120,
            "local copies deleted",
        )
        broker.stop()
        broker.start()  # the chunk cache starts empty
        out["cold"] = read_all(broker, "tiered", count)
        print(f"  cold remote read: {out['cold']:.1f} MiB/s", flush=True)
        out["cached"] = read_all(broker, "tiered", count)
        print(f"  cached remote read: {out['cached']:.1f} MiB/s", flush=True)
        out["local"] = read_all(broker, "local", count)
        print(f"  local read: {out['local']:.1f} MiB/s", flush=True)
    finally:
        broker.stop()
        s3.kill()
    out["load_after"] = os.getloadavg()
    return out


def render(r: dict[str, Any]) -> str:
    raw = r["raw"]
    rows = [
        ("object store PUT, 16 MiB objects (raw, boto3)", f"{raw['put']:.1f} MiB/s", "-"),
        ("object store GET, 16 MiB objects (raw, boto3)", f"{raw['get']:.1f} MiB/s", "-"),
        ("object store ranged GET of 4 MiB (median)",
         f"{raw['ranged_ms']:.0f} ms ({raw['ranged_mib_s']:.0f} MiB/s)", "-"),
        ("broker upload of closed segments", f"{r['upload']:.1f} MiB/s",
         f"{r['upload'] / raw['put']:.2f}x raw PUT"),
        ("kcat read from offset 0, cold remote", f"{r['cold']:.1f} MiB/s",
         f"{r['cold'] / raw['get']:.2f}x raw GET, {r['cold'] / r['local']:.2f}x local"),
        ("kcat read from offset 0, cached remote", f"{r['cached']:.1f} MiB/s",
         f"{r['cached'] / r['local']:.2f}x local"),
        ("kcat read from offset 0, local segments", f"{r['local']:.1f} MiB/s", "1.00x"),
    ]  # fmt: skip
    lines = [
        BEGIN,
        "## Tiered storage (issue 5)",
        "",
        f"`python -m bench.bench_tiered --mib {r['mib']}` on {platform.node()} "
        f"({os.cpu_count()} cores), {time.strftime('%Y-%m-%d %H:%M')}; load average before "
        f"{r['load_before'][0]:.1f}, after {r['load_after'][0]:.1f}. One broker, the embedded "
        f"S3 server (durable moto) on loopback; segments of 16 MiB, records of 1 KiB, "
        f"remote.fetch.chunk.bytes 4 MiB; {r['uploaded_mib']:.0f} MiB uploaded; reads with kcat "
        "from offset 0 (every offset checked, once and in order). Cold: a restarted "
        "broker, its chunk cache empty, local copies deleted by local retention; cached: the "
        "same read again. moto serves a ranged GET by reading the whole object "
        "(tiered/README.md), so a cold read of 16 MiB segments in 4 MiB chunks reads each "
        "object four times: its ceiling is about a quarter of the raw GET rate.",
        "",
        "| measurement | result | ratio |",
        "|---|---|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    args = parser.parse_args(argv)
    result = measure(args.mib)
    section = render(result)
    print(section)
    if not args.no_write:
        replace_section(RESULTS, BEGIN, END, section)
        print(f"updated {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
