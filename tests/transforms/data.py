"""Input the guests are run on: keys, null keys, headers, binary, empty and null values, JSON
documents valid and not, in batches of several sizes and kinds."""

from __future__ import annotations

from transforms.records import InputBatch, InputRecord
from wire.compression import CODEC_GZIP, CODEC_ZSTD
from wire.record_batch import Record, encode_batch

JSON_VALUES = [
    b'{"level":"error","msg":"disk full"}',
    b'{"level":"info"}',
    b' {"level" : "error" }\n',
    b'{"msg":"x","level":"error","n":[1,2,{"a":null,"b":[true,false]}],"f":-1.5e3}',
    b'{"level":"ERROR"}',
    b'{"level":"error","level":"warn"}',
    b'{"level":"warn","level":"error"}',
    b'{"lev\\u0065l":"\\u0065rror"}',
    b'{"level":5}',
    b'{"level":null}',
    b'{"level":"error"',
    b'{"level":"error"}x',
    b'["level","error"]',
    b"null",
    b'"error"',
    b"{}",
    b'{"level":"error","bad":01}',
    b'{"level":"error","n":NaN}',
    b'{"level":"error","s":"\xff\xfe"}',
    b'{"level":"error","s":"a\tb"}',
    b'{"level":"err\\u00f6r"}',
    b'{"a":{"level":"error"}}',
    b'{"level":"error","x":tru}',
    '{"level":"error","\u00fc":"\u00f6 \u2603"}'.encode(),
    b'{"level":"error","n":1.}',
    b'{"level":"error","n":-}',
    b'{"level":"error","n":1e+}',
    b'{"level":"error","esc":"\\"\\\\\\/\\b\\f\\n\\r\\t\\ud83d\\ude00"}',
    b'{"level":"error","bad":"\\x"}',
    b'{"level":"error",}',
    b'{"level":"error"}   ',
]

OTHER_VALUES: list[bytes | None] = [
    None,
    b"",
    b"hello world",
    b"\x00\x01\x02\xff\xfe",
    bytes(range(256)),
    b"mixed Case 123 \xc3\xa9t\xc3\xa9",
    b"x" * 5000,
]

KEYS: list[bytes | None] = [None, b"", b"b-key", b"a-key", b"bravo", b"\x00\xffbinary", b"k" * 300]

HEADERS: list[tuple[tuple[bytes, bytes | None], ...]] = [
    (),
    ((b"h1", b"v1"),),
    ((b"null", None), (b"bin", b"\x00\xff"), (b"empty", b"")),
]

T0 = 1_700_000_000_000


def records(n: int, first_offset: int = 0) -> list[InputRecord]:
    values: list[bytes | None] = [*JSON_VALUES, *OTHER_VALUES]
    return [
        InputRecord(
            offset=first_offset + i,
            timestamp=T0 + 37 * i,
            key=KEYS[i % len(KEYS)],
            value=values[i % len(values)],
            headers=HEADERS[i % len(HEADERS)],
        )
        for i in range(n)
    ]


def _compressed(rs: list[InputRecord], codec: int) -> InputBatch:
    raw = encode_batch(
        [
            Record(
                r.offset, r.timestamp, r.key, r.value, tuple((k.decode(), v) for k, v in r.headers)
            )
            for r in rs
        ],
        base_offset=rs[0].offset,
        codec=codec,
        leader_epoch=3,
    )
    return InputBatch.from_kafka(raw)


def batches() -> list[InputBatch]:
    """Batches of 1, 7, 60 and 200 records, a LogAppendTime batch, a batch with a gap in its
    offsets, and gzip and zstd batches read from Kafka's format."""
    all_records = records(400)
    out = []
    pos = 0
    for size in (1, 7, 60, 200):
        out.append(InputBatch.of(all_records[pos : pos + size]))
        pos += size
    out.append(InputBatch.of(all_records[pos : pos + 40], log_append_time=T0 + 99_999))
    pos += 40
    gap = [*all_records[pos : pos + 10], *all_records[pos + 15 : pos + 30]]
    out.append(InputBatch.of(gap))
    pos += 30
    out.append(_compressed(all_records[pos : pos + 31], CODEC_GZIP))
    pos += 31
    out.append(_compressed(all_records[pos : pos + 31], CODEC_ZSTD))
    return out
