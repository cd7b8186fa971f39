"""A deleted cluster's archive file into Parquet rows of its events table.

The control plane archives a deleted cluster's usage that no billing run ingested yet
(``controlplane/billing_archive.py``: ``$SLUICE_HOME/billing-archive/NAME.ID.jsonl``, one
``UsageEvent.encode()`` a line) and lists those files in the spec's ``archives``. Each run
turns each listed file into ``<sink>/archive/day=<d>/archive.parquet`` (the cluster
incarnation's sink directory, ``ingest.sink_dir``; outside the streaming sink's log, which
never names these files): the events table's columns, one row per Usage entry, with
``kafka_partition`` = :data:`ARCHIVE_PARTITION` (beyond any real partition) and
``kafka_offset`` = the line number. The rollup keeps the record at the lowest (partition,
offset) of each key, so a copy of the same event read from the topic wins and an archived
event is never counted twice.

Idempotent: a day's file is replaced only when its bytes change (a run with the same
archive writes nothing), days no longer in the archive are removed; the archive file is
never touched (it is the usage of record). A listed file that is gone leaves the Parquet
rows written from it in place, with a warning.
"""

from __future__ import annotations

import io
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from billing.ingest import ARCHIVE_DIR, Entry, decode_record
from billing.spec import ArchiveSource
from wire.usage import MalformedUsage

ARCHIVE_PARTITION = 2**31 - 1
"""``kafka_partition`` of archived rows: after every topic partition, so the rollup's dedup
prefers the topic's copy of an event."""
ARCHIVE_FILE = "archive.parquet"

ARROW_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("epoch", pa.int64()),
        ("sequence", pa.int64()),
        ("key", pa.string()),
        ("start_ms", pa.int64()),
        ("end_ms", pa.int64()),
        ("hour_ms", pa.int64()),
        ("dimension", pa.string()),
        ("quantity", pa.int64()),
        ("topic", pa.string()),
        ("principal", pa.string()),
        ("resource", pa.string()),
        ("kafka_partition", pa.int32()),
        ("kafka_offset", pa.int64()),
    ]
)
"""The events table's data columns (``ingest.EVENT_COLUMNS``) as Arrow types."""


@dataclass
class ArchiveResult:
    name: str
    id: str
    events: int = 0
    rows: int = 0
    days: list[str] = field(default_factory=list)
    written: int = 0
    """Day files whose bytes changed in this run."""
    malformed: int = 0
    samples: list[tuple[int, str]] = field(default_factory=list)
    """(line number, reason), at most the cap."""
    missing: bool = False


def rows_by_day(
    lines: list[bytes], result: ArchiveResult, cap: int
) -> dict[str, list[tuple[Entry, int]]]:
    """Each line's entries with its line number (the rows' ``kafka_offset``), by day."""
    out: dict[str, list[tuple[Entry, int]]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entries = decode_record(None, line)
        except MalformedUsage as exc:
            result.malformed += 1
            if len(result.samples) < cap:
                result.samples.append((number, str(exc)[:200]))
            continue
        result.events += 1
        result.rows += len(entries)
        for entry in entries:
            out.setdefault(entry[12], []).append((entry, number))
    return out


def parquet_bytes(rows: list[tuple[Entry, int]]) -> bytes:
    """One day's rows as a Parquet file (the same rows give the same bytes)."""
    columns = list(zip(*((*e[:12], ARCHIVE_PARTITION, n) for e, n in rows), strict=True))
    table = pa.Table.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, ARROW_SCHEMA, strict=True)],
        schema=ARROW_SCHEMA,
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def write_archive(source: ArchiveSource, sink: Path, cap: int) -> ArchiveResult:
    """``source``'s archive file into ``sink/archive/day=<d>/archive.parquet``."""
    result = ArchiveResult(source.name, source.id)
    try:
        lines = source.path.read_bytes().splitlines()
    except FileNotFoundError:
        result.missing = True
        return result
    by_day = rows_by_day(lines, result, cap)
    root = sink / ARCHIVE_DIR
    result.days = sorted(by_day)
    for day, rows in sorted(by_day.items()):
        path = root / f"day={day}" / ARCHIVE_FILE
        data = parquet_bytes(rows)
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{ARCHIVE_FILE}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        result.written += 1
    if root.is_dir():
        for stale in root.glob("day=*"):
            if stale.name.removeprefix("day=") not in by_day:
                shutil.rmtree(stale)
                result.written += 1
    return result
