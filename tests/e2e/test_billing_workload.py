"""Metering and billing end to end (issue 16), against a real control plane, a 2-broker
cluster, the embedded S3 and the real PySpark pipeline, with a workload whose every byte
the test knows:

- record batches it encodes itself, produced (acks=all) to the leaders of a tiered topic of
  3 partitions (RF 2): bytes in;
- fetched back from the leaders with raw Fetch requests: bytes out;
- partition 0 read again from offset 0 once its closed segments live only in the object
  store: tiered retrieval (and bytes out again);
- the topic read with Spark's `format("sluice")` from offset 0: its tiered segments straight
  from the object store (Spark direct tiered reads, the `.log` objects of the tiered splits);
- a broker added and removed: broker-hours.

Then `cloudctl billing run --wait`, and every dimension is checked against what the test
did: bytes exactly (from the usage tables, `cloudctl usage`), broker-hours exactly from the
control plane's recorded transitions (its state database, read-only), partition-minutes as
whole minutes of the 3 partitions, storage within what was stored; and the invoice is
recomputed here from the raw usage events (read from __sluice_usage up to where the
pipeline read, deduplicated by key) and the rate card's prices, without Spark, to the cent.
"""

from __future__ import annotations

import datetime
import json
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from billing.catalog import PricingModel
from billing.ratecard import load_default
from billing.units import divisor
from spark.options import read_options
from spark.planning import TieredSplit, plan
from tests.cli.conftest import Cloud, running_cloud
from tests.controlplane.harness import wait_until
from tests.support.raw_client import RawClient
from tests.support.records import fetch_request, partition_response, produce_request
from tests.support.spark_session import local_session
from wire.record_batch import Record, encode_batch
from wire.usage import BUCKET_MS, HOUR_MS, USAGE_TOPIC, Dimension, UsageEvent

CLUSTER = "metered"
pytestmark = pytest.mark.timeout(900)  # a cluster, a workload and two Spark jobs

TOPIC = "work"
PARTITIONS = 3
BATCHES = 30
RECORDS_PER_BATCH = 20
VALUE = b"w" * 300
BROKER_TYPE = "kafka.m7g.large"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    with running_cloud(tmp_path_factory.mktemp("billing-home")) as running:
        yield running


def ok(cloud: Cloud, *args: str, timeout: float = 300) -> str:
    done = cloud.run(*args, timeout=timeout)
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return done.stdout


def usage_of_today(cloud: Cloud, *by: str) -> dict[str, Any]:
    """`cloudctl usage` of the cluster from a day ago to an hour ahead, as JSON."""
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    till = later.strftime("%Y-%m-%dT%H:%M:%SZ")
    args = ("usage", "--cluster", CLUSTER, "--from", "-1d", "--to", till, *by, "-o", "json")
    usage: dict[str, Any] = json.loads(ok(cloud, *args))
    return usage


def leaders(bootstrap: str) -> dict[int, str]:
    """Partition -> its leader's address."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    brokers = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    parts = metadata.topics[TOPIC].partitions
    return {p: brokers[parts[p].leader] for p in range(PARTITIONS)}


def produce(bootstrap: str) -> int:
    """Produce every batch to its partition's leader; the bytes of the batches."""
    sent = 0
    for partition, address in leaders(bootstrap).items():
        with RawClient(address) as client:
            for n in range(BATCHES):
                now = int(time.time() * 1000)
                records = [
                    Record(i, now, b"%d-%d" % (n, i), VALUE) for i in range(RECORDS_PER_BATCH)
                ]
                batch = encode_batch(records, timestamp_ms=now)
                answer = client.request(produce_request(TOPIC, batch, partition=partition))
                assert partition_response(answer).error_code == 0
                sent += len(batch)
    return sent


def fetch_all(address: str, partition: int) -> int:
    """Fetch ``partition`` from offset 0 to its high watermark; the record bytes returned."""
    total, offset = 0, 0
    with RawClient(address) as client:
        while True:
            part = partition_response(
                client.request(fetch_request(TOPIC, offset, partition=partition))
            )
            assert part.error_code == 0, part.error_code
            data = bytes(part.records or b"")
            if not data:
                return total
            total += len(data)
            offset = last_offset(data) + 1
            if offset >= part.high_watermark:
                return total


def last_offset(data: bytes) -> int:
    """The last offset of the last batch of a records section (base offset + delta)."""
    position, last = 0, -1
    while position + 61 <= len(data):
        base = int.from_bytes(data[position : position + 8], "big")
        length = int.from_bytes(data[position + 8 : position + 12], "big")
        delta = int.from_bytes(data[position + 23 : position + 27], "big")
        last = base + delta
        position += 12 + length
    return last


def local_start(cloud: Cloud, bootstrap: str, partition: int) -> int:
    """The first offset the leader of ``partition`` still holds on its disk."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    leader = metadata.topics[TOPIC].partitions[partition].leader
    cluster = json.loads(ok(cloud, "describe-cluster", CLUSTER, "-o", "json"))
    (broker,) = [b for b in cluster["brokers"] if b["id"] == leader]
    logs = (Path(broker["data_dir"]) / f"{TOPIC}-{partition}").glob("*.log")
    return min(int(f.stem) for f in logs)


def tiered_splits(options: dict[str, str]) -> list[TieredSplit]:
    """The splits of a read planned now that come from the object store."""
    planned = plan(read_options(options, streaming=False))
    return [s for s in planned.splits if isinstance(s, TieredSplit)]


def spark_read(cloud: Cloud) -> tuple[int, int]:
    """The topic read with ``format("sluice")`` by cluster name, from offset 0 up to where
    its tiered segments end (so that no byte comes through a broker: bytes out stay those
    of the raw fetches), every record checked; returns when the read ended (ms) and the
    bytes of the ``.log`` objects of its splits (each is read whole: smaller than one
    ranged GET)."""
    options = {
        "sluice.cluster": CLUSTER,
        "sluice.controlplane.endpoint": cloud.endpoint,
        "sluice.controlplane.token": (cloud.home / "token").read_text().strip(),
        "subscribe": TOPIC,
    }
    ends = dict.fromkeys(range(PARTITIONS), 0)
    for split in tiered_splits(options):
        ends[split.partition] = max(ends[split.partition], split.end)
    options["endingOffsets"] = json.dumps({TOPIC: {str(p): n for p, n in ends.items()}})
    planned = list(plan(read_options(options, streaming=False)).splits)
    assert planned, "nothing tiered yet"
    assert all(isinstance(s, TieredSplit) for s in planned), planned
    rows = local_session().read.format("sluice").options(**options).load().collect()
    assert len(rows) == sum(ends.values())
    assert all(bytes(r["value"]) == VALUE for r in rows)
    assert tiered_splits(options) == planned, "the same segments before and after the read"
    return int(time.time() * 1000), sum(s.size_bytes for s in tiered_splits(options))


def read_cursor(home: Path) -> int:
    """Where the control plane's metering of object store reads is (0: nowhere yet)."""
    db = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT next_bucket_ms FROM read_metering_cursors WHERE cluster = ?", (CLUSTER,)
        ).fetchone()
    finally:
        db.close()
    return 0 if row is None else int(row[0])


def broker_ms_recorded(home: Path) -> dict[int, int]:
    """broker_ms per minute bucket from the recorded transitions, up to the metering cursor."""
    db = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT at_ms, broker_count FROM capacity_history WHERE cluster = ? ORDER BY rowid",
            (CLUSTER,),
        ).fetchall()
        (cursor,) = db.execute(
            "SELECT next_bucket_ms FROM metering_cursors WHERE cluster = ?", (CLUSTER,)
        ).fetchone()
    finally:
        db.close()
    per_bucket: defaultdict[int, int] = defaultdict(int)
    for (at, count), following in zip(rows, [*rows[1:], (cursor, 0)], strict=True):
        start, end = at, min(following[0], cursor)
        while start < end:
            bucket = start - start % BUCKET_MS
            cut = min(end, bucket + BUCKET_MS)
            per_bucket[bucket] += count * (cut - start)
            start = cut
    return dict(per_bucket)


def usage_events(bootstrap: str, upto: dict[int, int]) -> list[UsageEvent]:
    """__sluice_usage below the offsets the pipeline read up to."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}"}
    )
    consumer.assign([TopicPartition(USAGE_TOPIC, p, 0) for p in upto])
    events: list[UsageEvent] = []
    remaining = {p: n for p, n in upto.items() if n > 0}
    deadline = time.monotonic() + 60
    try:
        while remaining and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            partition, offset = message.partition() or 0, message.offset() or 0
            if offset < upto[partition]:
                events.append(UsageEvent.decode(message.value() or b""))
            if offset + 1 >= upto[partition]:
                remaining.pop(partition, None)
    finally:
        consumer.close()
    assert not remaining, f"__sluice_usage not read up to {upto}"
    return events


def recompute_invoice(events: list[UsageEvent], month: str) -> dict[tuple[str, str], Decimal]:
    """Amount per (dimension, resource) for ``month``, with no Spark: dedup by key, sum the
    raw quantities, price them with the default rate card (provisioned)."""
    card = load_default()
    version = card.version_at(datetime.date.fromisoformat(month + "-01"))
    seen: set[bytes] = set()
    raw: defaultdict[tuple[Dimension, str], int] = defaultdict(int)
    for event in events:
        hour = datetime.datetime.fromtimestamp(event.hour_ms / 1000, tz=datetime.UTC)
        if event.key in seen or hour.strftime("%Y-%m") != month:
            continue
        seen.add(event.key)
        for usage in event.usage:
            raw[usage.dimension, usage.resource] += usage.quantity
    amounts: dict[tuple[str, str], Decimal] = {}
    for (dimension, resource), quantity in raw.items():
        price = version.price(PricingModel.PROVISIONED, dimension, resource)
        unit_price = Decimal(0) if price is None else price.unit_price
        exact = Fraction(quantity, divisor(dimension, month)) * Fraction(unit_price)
        amount = Decimal(exact.numerator) / Decimal(exact.denominator)
        amounts[dimension.value, resource] = amount.quantize(Decimal("0.01"), ROUND_HALF_UP)
    return amounts


def test_a_known_workload_is_metered_and_invoiced_exactly(cloud: Cloud) -> None:
    started_ms = int(time.time() * 1000)
    ok(
        cloud,
        "create-cluster",
        CLUSTER,
        "--brokers",
        "2",
        "--broker-type",
        BROKER_TYPE,
        "--config",
        "remote.log.manager.task.interval.ms=200",
        "--config",
        "log.retention.check.interval.ms=200",
        "--wait",
    )
    ok(
        cloud,
        "create-topic",
        "--cluster",
        CLUSTER,
        TOPIC,
        "--partitions",
        str(PARTITIONS),
        "--replication-factor",
        "2",
        "--config",
        "remote.storage.enable=true",
        "--config",
        "segment.bytes=30000",
        "--config",
        "local.retention.bytes=30000",
    )
    bootstrap = ok(cloud, "get-bootstrap-brokers", CLUSTER).strip()
    produced = produce(bootstrap)
    where = leaders(bootstrap)
    fetched = sum(fetch_all(where[p], p) for p in range(PARTITIONS))

    # partition 0 again from offset 0, once its first segments are only in the object store
    wait_until(lambda: local_start(cloud, bootstrap, 0) > 0 or None, 120, "partition 0 tiered")
    from_remote_start = fetch_all(where[0], 0)
    fetched += from_remote_start
    read_directly = spark_read(cloud)

    ok(cloud, "update-broker-count", CLUSTER, "--brokers", "3", "--wait")
    ok(cloud, "update-broker-count", CLUSTER, "--brokers", "2", "--wait")
    # the minute in progress completes, and the brokers flush after it
    now_ms = int(time.time() * 1000)
    time.sleep((BUCKET_MS - now_ms % BUCKET_MS) / 1000 + 12)
    wait_until(
        lambda: read_cursor(cloud.home) > read_directly[0], 60, "the minute of the reads metered"
    )

    run = json.loads(ok(cloud, "billing", "run", "--wait", "-o", "json", timeout=600))
    assert run["state"] == "SUCCEEDED", run

    usage = usage_of_today(cloud, "--by", "topic")
    raw: defaultdict[tuple[str, str], int] = defaultdict(int)
    for row in usage["rows"]:
        raw[row["dimension"], row["topic"]] += int(row["raw_quantity"])
    assert raw["bytes_in", TOPIC] == produced
    assert raw["bytes_out", TOPIC] == fetched
    # part of every read from the object store (the first reads may have found segments
    # tiered already)
    assert 0 < raw["tiered_retrieval_bytes", TOPIC] <= fetched
    assert raw["replication_bytes", TOPIC] >= produced  # RF 2, plus the moves of scaling
    assert raw["spark_tiered_read_bytes", TOPIC] == read_directly[1] > 0
    elapsed_ms = int(time.time() * 1000) - started_ms
    assert 0 < raw["hot_storage_byte_ms", TOPIC] <= 2 * 2 * produced * elapsed_ms
    # sampled at each minute's end and counted for the whole minute (dataplane/metering's
    # table): a segment tiered late in a minute counts from that minute's start
    assert 0 < raw["tiered_storage_byte_ms", TOPIC] <= produced * (elapsed_ms + BUCKET_MS)
    minutes, rest = divmod(raw["partition_ms", TOPIC], PARTITIONS * BUCKET_MS)
    assert rest == 0
    assert 1 <= minutes <= elapsed_ms // BUCKET_MS + 1

    offsets = json.loads((cloud.home / "billing" / "offsets" / f"{CLUSTER}.json").read_text())
    upto = {int(p): int(n) for p, n in offsets["offsets"].items()}
    events = usage_events(bootstrap, upto)
    metered = {
        e.sequence: sum(u.quantity for u in e.usage if u.dimension == Dimension.BROKER_MS)
        for e in events
        if e.source == "controlplane"
    }
    recorded = broker_ms_recorded(cloud.home)
    assert metered == {b: q for b, q in recorded.items() if q and b in metered}
    # the control plane goes on metering while the run reads (a slow run: two minutes or
    # more), so what it has not read yet is a tail after everything it read, never a gap
    unread = set(recorded) - set(metered)
    assert all(b > max(metered) for b in unread), ("only a tail may be unread", unread)

    months = {
        datetime.datetime.fromtimestamp(e.hour_ms / 1000, tz=datetime.UTC).strftime("%Y-%m")
        for e in events
    }
    for month in sorted(months):
        invoice = json.loads(
            ok(cloud, "invoice", "--month", month, "--cluster", CLUSTER, "-o", "json")
        )
        billed: defaultdict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for line in invoice["lines"]:
            billed[line["dimension"], line["resource"]] += Decimal(line["amount"])
        expected = recompute_invoice(events, month)
        assert dict(billed) == expected
        total = sum(expected.values(), Decimal(0))
        assert Decimal(invoice["total"]) == total
        (hours,) = [
            Decimal(line["quantity"])
            for line in invoice["lines"]
            if (line["dimension"], line["resource"]) == ("broker_ms", BROKER_TYPE)
        ]
        # a third of an hour has no finite decimal: the line shows 24 places
        assert abs(hours * HOUR_MS - sum(metered.values())) < Decimal("1e-12")


def test_a_deleted_cluster_keeps_its_unbilled_usage(cloud: Cloud) -> None:
    """Deleting the cluster after the run: its usage since (the brokers' last flushes, the
    control plane's last minutes up to the deletion) is archived before the brokers stop."""
    billed = json.loads((cloud.home / "billing" / "offsets" / f"{CLUSTER}.json").read_text())
    ok(cloud, "delete-cluster", CLUSTER, "--yes", "--wait")
    (archive,) = (cloud.home / "billing-archive").glob(f"{CLUSTER}.*.jsonl")
    assert archive.stat().st_mode & 0o777 == 0o600
    events = [UsageEvent.decode(line) for line in archive.read_bytes().splitlines()]
    assert len({e.key for e in events}) == len(events)
    sources = {e.source for e in events}
    assert "controlplane" in sources, "the minutes metered at the deletion"
    assert any(s.startswith("broker-") for s in sources), "the brokers' flushes since the run"
    last = max(e.end_ms for e in events if e.source == "controlplane")
    ended = int(time.time() * 1000)
    assert ended - last < 5 * BUCKET_MS, "metered up to the deletion"
    assert billed["offsets"], "the run had read the topic: the archive holds what came after"

    # the next run bills the archive: every archived event whose key the events table of
    # the first run does not hold, once, in the usage tables and the invoice
    output = cloud.home / "billing"
    before = table_usage(output / "hourly" / f"cluster={CLUSTER}")
    ingested = event_keys(output / "events" / f"cluster={CLUSTER}")
    added: defaultdict[tuple[str, str], int] = defaultdict(int)
    for e in events:
        if e.key.decode() not in ingested:
            hour = datetime.datetime.fromtimestamp(e.hour_ms / 1000, tz=datetime.UTC)
            for u in e.usage:
                added[hour.strftime("%Y-%m"), u.dimension.value] += u.quantity
    assert added
    run = json.loads(ok(cloud, "billing", "run", "--wait", "-o", "json", timeout=600))
    assert run["state"] == "SUCCEEDED", run
    want = defaultdict(int, before)
    for k, q in added.items():
        want[k] += q
    assert table_usage(output / "hourly" / f"cluster={CLUSTER}") == dict(want)
    usage = usage_of_today(cloud)
    got: defaultdict[str, int] = defaultdict(int)
    for row in usage["rows"]:
        got[row["dimension"]] += int(row["raw_quantity"])
    by_dimension: defaultdict[str, int] = defaultdict(int)
    for (_, dimension), q in want.items():
        by_dimension[dimension] += q
    assert dict(got) == dict(by_dimension)
    for month in sorted({m for m, _ in want}):
        invoice = json.loads(
            ok(cloud, "invoice", "--month", month, "--cluster", CLUSTER, "-o", "json")
        )
        lines: defaultdict[str, Decimal] = defaultdict(Decimal)
        for line in invoice["lines"]:
            lines[line["dimension"]] += Decimal(line["quantity"])  # billing units
        wanted = {d: q for (m, d), q in want.items() if m == month}
        assert set(lines) == set(wanted)
        for dimension, quantity in wanted.items():
            exact = Decimal(quantity) / Decimal(divisor(Dimension(dimension), month))
            assert abs(lines[dimension] - exact) < Decimal("1e-12"), dimension


def table_usage(hourly: Path) -> dict[tuple[str, str], int]:
    """(month, dimension) -> raw quantity of a cluster's hourly table (read without Spark)."""
    out: defaultdict[tuple[str, str], int] = defaultdict(int)
    for path in hourly.rglob("*.parquet"):
        if path.name.startswith((".", "_")):
            continue
        month = path.parent.name.removeprefix("day=")[:7]
        for row in pq.read_table(path).to_pylist():
            out[month, row["dimension"]] += int(row["quantity"])
    return dict(out)


def event_keys(events: Path) -> set[str]:
    """The keys of a cluster's events tables (no killed batch here: every file counts)."""
    keys: set[str] = set()
    for path in events.rglob("day=*/*.parquet"):
        if not path.name.startswith((".", "_")):
            keys.update(pq.read_table(path, columns=["key"]).column("key").to_pylist())
    return keys
