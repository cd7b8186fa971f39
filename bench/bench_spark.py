"""Spark backfill of a mostly tiered topic: ``format("sluice")`` beside Spark's own Kafka
source and a confluent-kafka consumer, in the same run, for 1, 2, 4 and 8 partitions.

    python -m bench.bench_spark [--mib N] [--partitions 1,2,4,8] [--runs R] [--no-write]

Starts the embedded S3 server (durable moto, as ``cloudctl up`` runs it) and one broker with
tiered storage on loopback under a temporary directory (removed at the end), and one
local[2] SparkSession (``tests.support.spark_session``: Spark's Kafka connector of the
pinned Spark on its classpath). For each partition count P it produces N MiB of 1 KiB
records (random bytes, uncompressed) to a topic of P partitions whose closed segments are
uploaded and then deleted locally (``local.retention.bytes=1``), so that only each
partition's active segment is on the broker's disk, and measures, R times each (medians):

1. ``format("sluice")``: executors read the tiered segments straight from the object store
   (one input partition per segment) and the hot tails from the broker;
2. ``format("kafka")``: Spark's Kafka source, every offset through the broker (which reads
   its remote tier through its chunk cache; the cache is smaller than the topic, and the
   store's GETs during the read are counted to show it was cold);
3. a confluent-kafka consumer in this process, assigned every partition from offset 0;
4. a Python data source yielding the same rows from memory, Spark's ceiling for any
   Python data source, alone and with every segment object of the topic GET into another
   process's memory beside it (``bench.spliced_gets --receive``): the least a tiered reader
   adds to it;
5. the store's limit for this job: every segment object of the topic fetched with 2
   threads (the 2 cores local[2] has), raw through ``tiered.object_store.S3ObjectStore``.

Both Spark reads run the same query, ``count(*), sum(length(value)), sum(offset)``, which
must see every record once: the count, the payload bytes and the offsets' sum are checked
against the watermarks (and so are the consumer's). Wall time of the action (planning
included); an unmeasured read of each kind first warms the JVM and starts Spark's Python
workers. Prints a table with the ratios and replaces the "Spark backfill" section of
bench/RESULTS.md unless --no-write. Every process it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from bench.bench_tiered import (
    Meter,
    Usage,
    broker_settings,
    local_bases,
    log_gets,
    produce,
    store_for,
)
from bench.common import CLK_TCK, REPO, replace_section
from bench.spliced_gets import GetsBeside
from spark.options import read_options
from spark.planning import TieredSplit
from spark.records import arrow_schema, spark_ddl
from spark.remote_log import RemoteLog, describe_remote_log
from spark.source import SluiceReader
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.minio import BINARY as MINIO_BINARY
from tests.support.minio import MinioServer
from tests.support.spark_session import local_session, stock_connector_jars, stop_session
from tests.support.tiering import TEST_ADMIN, data_source_options
from tiered.access_keys import AccessKey
from tiered.embedded_s3 import EmbeddedS3
from tiered.layout import segment_keys

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- BEGIN spark (bench/bench_spark.py) -->"
END = "<!-- END spark -->"
BEGIN_MINIO = "<!-- BEGIN spark-minio (bench/bench_spark.py --store minio) -->"
END_MINIO = "<!-- END spark-minio -->"
MiB = 1 << 20
MB = 1_000_000
SEGMENT = 16 * MiB
"""segment.bytes: the embedded S3 server (moto) serves a ranged GET at the cost of a whole
object, so segments of one chunk keep both readers' GETs at one per segment."""
CHUNK = SEGMENT
"""remote.fetch.chunk.bytes of the broker and sluice.read.chunk.bytes (its default): one
GET per segment on either path."""
CACHE = 256 * MiB
"""remote.fetch.cache.bytes: a quarter of the default topic, so a read through the broker
is served by the store, not by what the previous read left in the cache."""
RECORD = 1024
BUCKET = "bench"
READERS = ("sluice", "kafka", "consumer")
KINDS = (*READERS, "memory", "beside", "raw")
SPARK = ("sluice", "kafka", "memory")
IN_SPARK = (*SPARK, "beside")
"""The kinds whose reads run in Spark (``beside``: the from-memory read with GETs beside it)."""
STORES = ("embedded", "minio")
"""--store: the embedded S3 server (durable moto, what ``cloudctl up`` runs, Python) or
MinIO (Go; ``make minio``), each on the same 2 cores as the broker and Spark."""

S3Server = EmbeddedS3 | MinioServer


def key_of(s3: S3Server) -> AccessKey:
    assert s3.admin is not None, "the server's admin key is known once it is made"
    return s3.admin


# ---------------------------------------------------------------------------- topics


@dataclass
class Topic:
    name: str
    partitions: int
    records: int
    highs: list[int] = field(default_factory=list)
    remote: RemoteLog | None = None

    @property
    def offset_sum(self) -> int:
        return sum(h * (h - 1) // 2 for h in self.highs)

    def tiered_records(self) -> int:
        return sum(self.remote_end(p) for p in range(self.partitions))

    def remote_end(self, partition: int) -> int:
        part = self.remote.of(self.name, partition) if self.remote else None
        return part.segments[-1].end_offset + 1 if part and part.segments else 0

    def segments(self) -> list[Any]:
        if self.remote is None:
            return []
        return [
            s
            for p in range(self.partitions)
            if (part := self.remote.of(self.name, p)) is not None
            for s in part.segments
        ]


def create(broker: BrokerProcess, topic: Topic) -> None:
    config = {
        "remote.storage.enable": "true",
        "segment.bytes": str(SEGMENT),
        "local.retention.bytes": "1",
    }
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    new = NewTopic(topic.name, topic.partitions, 1, config=config)
    client.create_topics([new])[topic.name].result(30)


def s3_options(s3: S3Server) -> dict[str, str]:
    return data_source_options(s3.endpoint, BUCKET, key_of(s3))


def settled(broker: BrokerProcess, topic: Topic) -> bool:
    """Every closed segment uploaded and deleted locally: each partition's local log is its
    active segment, which starts where its remote tier ends."""
    topic.remote = describe_remote_log(broker.bootstrap, [topic.name])
    for p in range(topic.partitions):
        bases = local_bases(broker, topic.name, p)
        if len(bases) != 1 or topic.remote_end(p) != bases[0] or bases[0] == 0:
            return False
    return True


def watermarks(broker: BrokerProcess, topic: Topic) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm", "log_level": 0})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic.name, p), timeout=10)
            for p in range(topic.partitions)
        ]
    finally:
        consumer.close()


# ---------------------------------------------------------------------------- readers


@dataclass
class Read:
    usage: Usage
    spark_cpu: float = 0.0
    tasks: int = 0


def spark_tree_cpu(root: int) -> float:
    """CPU of Spark's JVM and its descendants (the Python workers), the children they have
    waited for included: one pass over /proc."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(entry.name)
            parents[pid] = int(fields[1])
            # after the ")": utime, stime, cutime, cstime are fields 11-14
            cpu[pid] = sum(int(f) for f in fields[11:15]) / CLK_TCK
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [c for c, parent in parents.items() if parent == pid and c not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(cpu.get(pid, 0.0) for pid in tree)


def memory_source() -> type:
    """A Python data source that yields the rows of a topic's shape from memory (the input
    partitions `format("sluice")` plans for the same read, Arrow batches of 10,000 rows of
    the Kafka schema): Spark's own cost for a Python data source, with nothing to fetch or
    decode."""

    class MemoryReader(DataSourceReader):
        def __init__(self, tasks: list[list[int]]) -> None:
            self.tasks = tasks

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(tuple(task)) for task in self.tasks]

        def read(self, partition: InputPartition) -> Any:
            p, start, end = partition.value
            value = os.urandom(RECORD)
            for first in range(start, end, 10_000):
                n = min(end, first + 10_000) - first
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.nulls(n, pa.binary()),
                        pa.array([value] * n, pa.binary()),
                        pa.repeat(pa.scalar("memory", pa.string()), n),
                        pa.repeat(pa.scalar(p, pa.int32()), n),
                        pa.array(range(first, first + n), pa.int64()),
                        pa.repeat(pa.scalar(0, pa.timestamp("us", tz="UTC")), n),
                        pa.repeat(pa.scalar(0, pa.int32()), n),
                    ],
                    schema=arrow_schema(False),
                )

    class MemorySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-memory"

        def schema(self) -> str:
            return spark_ddl(False)

        def reader(self, schema: Any) -> DataSourceReader:
            return MemoryReader(json.loads(self.options["tasks"]))

    return MemorySource


class SparkReader:
    """The two Spark reads of one topic, with one query: count, payload bytes, offsets."""

    def __init__(self, session: Any, broker: BrokerProcess, s3: S3Server) -> None:
        self.session = session
        self.broker = broker
        self.s3 = s3
        self.jvm = session.sparkContext._gateway.proc.pid
        session.dataSource.register(memory_source())

    def frame(self, kind: str, topic: Topic, ending: str = "latest") -> Any:
        if kind == "memory":
            tasks = json.dumps(sluice_tasks(self.broker, self.s3, topic, ending))
            return self.session.read.format("bench-memory").option("tasks", tasks).load()
        reader = (
            self.session.read.format(kind)
            .option("kafka.bootstrap.servers", self.broker.bootstrap)
            .option("subscribe", topic.name)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", ending)
        )
        if kind == "sluice":
            reader = reader.options(**s3_options(self.s3))
        return reader.load()

    def query(self, kind: str, topic: Topic, ending: str = "latest") -> tuple[Any, Any]:
        df = self.frame(kind, topic, ending)
        return df, df.agg(
            F.count("*").alias("n"),
            F.sum(F.length("value")).alias("bytes"),
            F.sum("offset").alias("offsets"),
        )

    def warm_up(self, topic: Topic) -> None:
        """~20,000 records of each kind (Spark's Kafka source wants an ending offset for
        every partition)."""
        share = 20_000 // topic.partitions
        ends = {str(p): min(share, high) for p, high in enumerate(topic.highs)}
        ending = json.dumps({topic.name: ends})
        for kind in SPARK:
            self.query(kind, topic, ending)[1].collect()

    def read(self, kind: str, topic: Topic) -> Read:
        meter = Meter(self.s3, self.broker)
        before = spark_tree_cpu(self.jvm)
        df, agg = self.query(kind, topic)
        row = agg.collect()[0]
        spark_cpu = spark_tree_cpu(self.jvm) - before
        usage = meter.stop()
        usage.client_cpu = 0.0  # this process only waited; Spark's CPU is spark_cpu
        usage.others = meter.others.share(usage.broker_cpu + usage.s3_cpu, spark_cpu)
        check(kind, topic, row["n"], row["bytes"], row["offsets"])
        return Read(usage, spark_cpu, df.rdd.getNumPartitions())


def consume(broker: BrokerProcess, s3: S3Server, topic: Topic) -> Read:
    """A plain confluent-kafka consumer, every partition from offset 0 to its high
    watermark, no consumer group; values' lengths summed."""
    meter = Meter(s3, broker)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bench-backfill",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 0,
        }
    )
    count = size = offsets = 0
    try:
        consumer.assign([TopicPartition(topic.name, p, 0) for p in range(topic.partitions)])
        left = {p for p in range(topic.partitions) if topic.highs[p] > 0}
        deadline = time.monotonic() + 900
        while left and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                err, offset = msg.error(), msg.offset() or 0
                if err is not None:
                    partition = msg.partition() or 0
                    if err.code() == KafkaError._PARTITION_EOF:
                        if offset >= topic.highs[partition]:
                            left.discard(partition)
                        continue
                    raise RuntimeError(f"consumer: {err}")
                count += 1
                size += len(msg.value() or b"")
                offsets += offset
    finally:
        consumer.close()
    usage = meter.stop()
    check("consumer", topic, count, size, offsets)
    return Read(usage)


def check(kind: str, topic: Topic, count: int, size: int, offsets: int) -> None:
    want = (topic.records, topic.records * RECORD, topic.offset_sum)
    if (count, size, offsets) != want:
        raise AssertionError(
            f"{kind} read of {topic.name}: {count} records, {size} payload bytes, offsets "
            f"summing to {offsets}; want {want[0]}, {want[1]}, {want[2]}"
        )


def sluice_tasks(broker: BrokerProcess, s3: S3Server, topic: Topic, ending: str) -> list[list[int]]:
    """The input partitions `format("sluice")` plans for the read, as [partition, start,
    end] of offsets: the from-memory source reads the same rows in the same tasks."""
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic.name}
    options |= {"startingOffsets": "earliest", "endingOffsets": ending} | s3_options(s3)
    tasks = []
    for partition in SluiceReader(read_options(options, streaming=False)).partitions():
        splits = partition.value
        tasks.append([splits[0].partition, splits[0].start, splits[-1].end])
    return tasks


def decode_alone(s3: S3Server, broker: BrokerProcess, topic: Topic) -> tuple[float, int]:
    """The executor's work for the topic's tiered splits, in this process without Spark:
    ``spark.source``'s reader plans the topic and reads every tiered split (GETs, CRC
    checks, decoding into Arrow batches). Returns (CPU seconds, bytes of values)."""
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic.name}
    options |= s3_options(s3)
    reader = SluiceReader(read_options(options, streaming=False))
    tiered = [p for p in reader.partitions() if all(isinstance(s, TieredSplit) for s in p.value)]
    for _ in reader.read(tiered[-1]):  # the boto3 client, made once per executor process
        pass
    started, size = time.process_time(), 0
    for partition in tiered:
        for batch in reader.read(partition):
            size += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
    return time.process_time() - started, size


def raw_gets(s3: S3Server, topic: Topic, threads: int = 2) -> Usage:
    """Every .log object of the topic fetched whole (ranged GETs of CHUNK bytes), by
    ``threads`` threads sharing a queue: the object store's rate for this job."""
    assert topic.remote is not None
    keys = [(segment_keys(topic.remote.cluster_id, s).log, s.size_bytes) for s in topic.segments()]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        store = store_for(s3.endpoint, key_of(s3))
        while True:
            with lock:
                if not keys:
                    return
                key, size = keys.pop()
            try:
                for start in range(0, size, CHUNK):
                    data = store.get_range(key, start, min(size, start + CHUNK))
                    if len(data) != min(CHUNK, size - start):
                        raise AssertionError(f"GET {key}: {len(data)} bytes")
            except BaseException as exc:
                errors.append(exc)
                return

    meter = Meter(s3, None)
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    usage = meter.stop()
    if errors:
        raise errors[0]
    return usage


# ---------------------------------------------------------------------------- the run


def prepare(broker: BrokerProcess, topic: Topic) -> None:
    create(broker, topic)
    t = time.perf_counter()
    produce(broker, [topic.name], topic.records, partitions=topic.partitions)
    marks = watermarks(broker, topic)
    topic.highs = [high for _, high in marks]
    if sum(topic.highs) != topic.records or any(low for low, _ in marks):
        raise AssertionError(f"{topic.name}: watermarks {marks} after {topic.records} records")
    wait_for(lambda: settled(broker, topic), 1800, f"{topic.name} tiered", interval=0.5)
    print(
        f"  {topic.name}: {topic.records:,} records in {topic.partitions} partitions, "
        f"{len(topic.segments())} segments tiered ({topic.tiered_records():,} records), "
        f"produced and tiered in {time.perf_counter() - t:.1f} s",
        flush=True,
    )


def memory_beside_gets(reader: SparkReader, s3: S3Server, topic: Topic) -> Read:
    """The from-memory read while another process (``bench.spliced_gets --receive``) GETs
    every segment object of the topic into its memory, one object at a time: the least any
    tiered reader adds to the from-memory source (the bytes brought from the store into user
    space once), overlapped with Spark's work for free. Seconds: until both are done."""
    assert topic.remote is not None
    cluster = topic.remote.cluster_id
    objects = [(segment_keys(cluster, s).log, s.size_bytes) for s in topic.segments()]
    with GetsBeside(store_for(s3.endpoint, key_of(s3)), objects, receive=True) as gets:
        gets.go()
        read = reader.read("memory", topic)
        moved, seconds, cpu = gets.result()
    u = read.usage
    u.seconds = max(u.seconds, seconds)
    u.client_cpu = cpu
    u.moved = moved
    u.others = max(0.0, u.others - u.client_cpu / (u.seconds * (os.cpu_count() or 1)))
    return read


def read_once(
    kind: str, topic: Topic, reader: SparkReader, broker: BrokerProcess, s3: S3Server
) -> Read:
    if kind in ("sluice", "kafka", "memory"):
        return reader.read(kind, topic)
    if kind == "beside":
        return memory_beside_gets(reader, s3, topic)
    if kind == "consumer":
        return consume(broker, s3, topic)
    return Read(raw_gets(s3, topic))


def measure(
    mib: int, counts: list[int], runs: int, workdir: Path | None, store: str = "embedded"
) -> dict[str, Any]:
    if not stock_connector_jars():
        raise SystemExit("Spark's Kafka connector is missing: run make spark-kafka")
    out: dict[str, Any] = {"load_before": os.getloadavg(), "mib": mib, "runs": runs}
    out["store"] = store
    records = mib * MiB // RECORD
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-spark-", dir=workdir))
    s3: S3Server = (
        MinioServer(work / "minio")
        if store == "minio"
        else EmbeddedS3(work / "s3", admin=TEST_ADMIN)
    )
    settings = broker_settings(s3.endpoint, CACHE, chunk_bytes=CHUNK, key=key_of(s3))
    broker = BrokerProcess(work / "broker", settings)
    topics = [Topic(f"backfill-{p}", p, records) for p in counts]
    out["topics"] = topics
    try:
        s3.start()
        store_for(s3.endpoint, key_of(s3)).ensure_bucket()
        broker.start()
        for topic in topics:
            prepare(broker, topic)
        session = local_session(2)
        reader = SparkReader(session, broker, s3)
        reader.warm_up(topics[0])
        out["decode"] = decode_alone(s3, broker, topics[0])
        results: dict[tuple[int, str], list[Read]] = {}
        out["results"] = results
        for topic in topics:
            for run in range(runs):
                for kind in KINDS:
                    got = read_once(kind, topic, reader, broker, s3)
                    results.setdefault((topic.partitions, kind), []).append(got)
                    print(
                        f"  {topic.name} run {run + 1} {kind}: "
                        f"{mib * MiB / MB / got.usage.seconds:.0f} MB/s "
                        f"({got.usage.seconds:.2f} s, {log_gets(got.usage)} GETs of .log)",
                        flush=True,
                    )
        out["spark_version"] = session.version
    except BaseException:
        print(f"broker log tail ({broker.log_path}):\n{broker.logs()[-3000:]}", flush=True)
        raise
    finally:
        stop_session()
        broker.stop()
        s3.stop()
        out["load_after"] = os.getloadavg()
        shutil.rmtree(work, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------- report


def median_read(reads: list[Read]) -> Read:
    return sorted(reads, key=lambda r: r.usage.seconds)[(len(reads) - 1) // 2]


def mb_s(topic: Topic, read: Read) -> float:
    return topic.records * RECORD / MB / read.usage.seconds


def cpu(kind: str, read: Read) -> str:
    u = read.usage
    parts = []
    if kind in IN_SPARK:
        parts.append(f"Spark {u.cores(read.spark_cpu):.2f}")
    if u.broker_cpu:
        parts.append(f"broker {u.cores(u.broker_cpu):.2f}")
    parts.append(f"S3 {u.cores(u.s3_cpu):.2f}")
    if kind == "consumer":
        parts.append(f"consumer {u.cores(u.client_cpu):.2f}")
    if kind == "raw":
        parts.append(f"boto3 {u.cores(u.client_cpu):.2f}")
    if kind == "beside":
        parts.append(f"GETs {u.cores(u.client_cpu):.2f}")
    return ", ".join(parts) + f"; others {u.others * 100:.0f} %"


NAMES = {
    "sluice": 'Spark `format("sluice")`',
    "kafka": 'Spark `format("kafka")` (spark-sql-kafka-0-10)',
    "consumer": "confluent-kafka consumer (one Python process)",
    "memory": "Spark, a Python data source yielding the same rows from memory",
    "beside": "the same from memory, the topic's segment objects GET into memory beside it",
    "raw": "raw S3 GETs of the topic's segment objects, 2 threads",
}


def render(r: dict[str, Any]) -> str:
    topics: list[Topic] = r["topics"]
    results: dict[tuple[int, str], list[Read]] = r["results"]
    mib, runs = r["mib"], r["runs"]
    minio = r.get("store") == "minio"
    gets = "-"  # MinIO logs no requests
    med = {key: median_read(reads) for key, reads in results.items()}
    first = topics[0].partitions
    rows = []
    for topic in topics:
        p = topic.partitions
        rate = {kind: mb_s(topic, med[(p, kind)]) for kind in KINDS}
        hot = topic.records - topic.tiered_records()
        for kind in KINDS:
            read = med[(p, kind)]
            spread = sorted(mb_s(topic, x) for x in results[(p, kind)])
            if kind == "sluice":
                ratio = (
                    f"{rate['sluice'] / rate['kafka']:.2f}x kafka; "
                    f"{rate['sluice'] / rate['consumer']:.2f}x consumer; "
                    f"{rate['sluice'] / rate['memory']:.2f}x from memory; "
                    f"{rate['sluice'] / rate['beside']:.2f}x from memory beside GETs; "
                    f"{rate['sluice'] / rate['raw']:.2f}x raw GETs; "
                    f"{rate['sluice'] / mb_s(topics[0], med[(first, 'sluice')]):.2f}x "
                    f"{first} partition{'s' if first > 1 else ''}"
                )
            elif kind == "raw":
                ratio = "1.00x raw GETs"
            elif kind == "memory":
                ratio = "1.00x from memory"
            elif kind == "beside":
                pairs = sorted(
                    m.usage.seconds / b.usage.seconds
                    for m, b in zip(results[(p, "memory")], results[(p, kind)], strict=True)
                )
                ratio = f"{rate['beside'] / rate['memory']:.2f}x from memory" + (
                    f" (each run over the from-memory read just before it: "
                    f"{pairs[0]:.2f}-{pairs[-1]:.2f}x)"
                    if runs > 1
                    else ""
                )
            else:
                ratio = f"{rate[kind] / rate['raw']:.2f}x raw GETs"
            tasks = str(read.tasks) if kind in IN_SPARK else "-"
            rows.append(
                f"| {p} | {NAMES[kind]} | {rate[kind]:.0f}"
                + (f" ({spread[0]:.0f}-{spread[-1]:.0f})" if runs > 1 else "")
                + f" | {topic.records / read.usage.seconds:,.0f}"
                f" | {ratio} | {tasks} | {gets if minio else log_gets(read.usage)}"
                f" | {cpu(kind, read)} |"
            )
        rows.append(
            f"| {p} | ({len(topic.segments())} segments tiered, "
            f"{topic.tiered_records() / topic.records * 100:.1f} % of the records; "
            f"{hot:,} hot) | | | | | | |"
        )
    cpu_lines = []
    for topic in topics:
        p = topic.partitions
        megabytes = topic.records * RECORD / MB
        sl, ka, me = med[(p, "sluice")], med[(p, "kafka")], med[(p, "memory")]
        cpu_lines.append(
            f"P={p}: sluice: Spark {sl.spark_cpu * 1000 / megabytes:.1f} ms/MB, broker "
            f"{sl.usage.broker_cpu * 1000 / megabytes:.1f}; kafka: Spark "
            f"{ka.spark_cpu * 1000 / megabytes:.1f}, broker "
            f"{ka.usage.broker_cpu * 1000 / megabytes:.1f}; from memory: Spark "
            f"{me.spark_cpu * 1000 / megabytes:.1f}"
        )
    decode_cpu, decode_bytes = r["decode"]
    decode_ms = decode_cpu * 1000 / (decode_bytes / MB)
    lb, la = r["load_before"], r["load_after"]
    counts = ",".join(str(t.partitions) for t in topics)
    server = (
        "MinIO (`make minio`, Go, a real S3 server that is not moto)"
        if minio
        else "the embedded S3 server (durable moto)"
    )
    lines = [
        BEGIN_MINIO if minio else BEGIN,
        "## Spark backfill, MinIO as the object store" if minio else "## Spark backfill (issue 6)",
        "",
        f"`python -m bench.bench_spark --mib {mib} --partitions {counts} --runs {runs}"
        + (" --store minio" if minio else "")
        + "` on "
        f"{platform.node()} (nproc {os.cpu_count()}), {time.strftime('%Y-%m-%d %H:%M')}, "
        f"Spark {r.get('spark_version', '?')} local[2]; load average before "
        f"{lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f}, after {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}. "
        f"One broker, {server} and Spark on loopback, all on the same 2 cores.",
        "",
        f"Each topic: {mib} MiB of {RECORD} B records ({topics[0].records:,} records, random "
        "bytes, uncompressed), record i in partition i % P; segment.bytes "
        f"{SEGMENT // MiB} MiB, every closed segment uploaded and then deleted locally "
        "(local.retention.bytes=1), so only each partition's active segment is hot. Broker: "
        f"remote.fetch.chunk.bytes {CHUNK // MiB} MiB, remote.fetch.cache.bytes "
        f"{CACHE // MiB} MiB (smaller than a topic: reads through the broker are cold). "
        f'`format("sluice")`: defaults (sluice.read.chunk.bytes {CHUNK // MiB} MiB, '
        "sluice.read.split.bytes 128 MiB: consecutive segments of a partition share a task "
        "up to that size, sluice.read.prefetch.chunks 1). "
        "MB/s = 10^6 bytes of record values per second of the median run"
        + (f" (range of {runs} runs)" if runs > 1 else "")
        + ". Input partitions: Spark's tasks for the read. GETs: ranged GETs of segment "
        "objects the S3 server logged during the read"
        + (" (MinIO does not log them: -)." if minio else "."),
        "",
        "| partitions | reader | MB/s | records/s | ratio | input partitions | GETs | CPU "
        "(cores; others: share of the machine) |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "What each figure measures: the wall time of `df.agg(count(*), sum(length(value)), "
        "sum(offset)).collect()` with `startingOffsets=earliest`, `endingOffsets=latest` "
        "(planning included), checked: every record once (count, bytes, offsets' sum against "
        "the watermarks); the consumer: `consume(10000)` in a loop from offset 0 of every "
        "partition to the high watermarks, the same three sums checked; raw: every segment "
        "object of the topic GET by 2 threads through `S3ObjectStore.get_range` (boto3), "
        "the rate the store gives this job. An unmeasured read of 20,000 records of each "
        "Spark kind warms the JVM and starts the Python workers first. From memory: a Python "
        "data source of the bench (`memory_source`) whose input partitions (the same as "
        '`format("sluice")` plans: the same offsets in the same tasks) yield Arrow batches '
        "of the same rows built in the worker, with "
        "nothing fetched or decoded: the ceiling Spark puts on any Python data source here. "
        "Beside GETs: the same from-memory read while another process "
        "(`bench.spliced_gets --receive`, presigned URLs on its stdin) GETs every segment "
        "object of the topic, one at a time, into one reused buffer: the least a reader of "
        "the tiered bytes adds to the from-memory source (the bytes received into user space "
        "once, nothing checked or decoded), overlapped with Spark's work for free; timed "
        "until both are done.",
        "",
        "Where the CPU goes (CPU milliseconds per MB of values, median runs): "
        + "; ".join(cpu_lines)
        + ". The executor's own work for a tiered split (`spark.source`'s reader in one "
        "process without Spark: ranged GETs (presigned by boto3, received by "
        "tiered.ranged_get), CRC checks, records decoded into Arrow "
        f"batches), over the tiered splits of the {topics[0].partitions}-partition topic: "
        f"{decode_ms:.1f} ms/MB ({1000 / decode_ms:.0f} MB/s on one core). The rest of "
        "`format(\"sluice\")`'s Spark CPU is Spark's side of any Python data source, as "
        "the from-memory source shows: the Python worker writes each Arrow batch to the JVM "
        "over a socket, where it becomes rows. Spark's Kafka source decodes in the JVM and "
        "leaves the remote reads to the broker, whose CPU it adds.",
        END_MINIO if minio else END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="MiB produced to each topic")
    parser.add_argument("--partitions", default="1,2,4,8", help="partition counts, one topic each")
    parser.add_argument("--runs", type=int, default=3, help="runs of each read (median)")
    parser.add_argument("--workdir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    parser.add_argument(
        "--store",
        choices=STORES,
        default="embedded",
        help="the object store: the embedded S3 server (default) or MinIO (make minio)",
    )
    args = parser.parse_args(argv)
    try:
        counts = [int(x) for x in args.partitions.split(",")]
    except ValueError:
        parser.error("--partitions takes comma-separated numbers, e.g. 1,2,4,8")
    if any(c < 1 for c in counts):
        parser.error("--partitions: every count must be at least 1")
    if args.mib * MiB < 2 * SEGMENT * max(counts):
        parser.error(
            f"--mib must be at least {2 * SEGMENT // MiB * max(counts)} "
            "(two segments per partition)"
        )
    if args.store == "minio" and not MINIO_BINARY.exists():
        parser.error(f"--store minio: {MINIO_BINARY} is missing: run make minio")
    result = measure(args.mib, counts, max(1, args.runs), args.workdir, args.store)
    section = render(result)
    print(section)
    if not args.no_write:
        if args.store == "minio":
            replace_section(RESULTS, BEGIN_MINIO, END_MINIO, section)
        else:
            replace_section(RESULTS, BEGIN, END, section)
        print(f"updated {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
