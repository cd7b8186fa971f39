"""Redpanda's ABI in detail, through a hand-written guest (examples/wat/rp_meta.wat) that
reports what the host hands it: the ten batch-header fields and read_batch_header's result
(the largest payload), each record's attributes, absolute timestamp and offset, the WASI
clock at the record's timestamp, the return codes (-2 buffer too small, -2 malformed
payload, -2 unknown option, -3 unknown topic), argv and the environment."""

from __future__ import annotations

import struct

from tests.transforms.conftest import Start
from tests.transforms.data import T0, batches, records
from transforms.records import InputBatch, InputRecord, OutputRecord, encode_payload

HEADER = struct.Struct("<qiihxxiqqqhxxii")
RECORD = struct.Struct("<B7xqqqi")


def by_key(result_records: list[OutputRecord], key: bytes) -> list[OutputRecord]:
    return [r for r in result_records if r.key == key]


def test_header_records_clock_and_codes(start: Start) -> None:
    instance = start("wat", "rp_meta", outputs=("first", "second"), env={"K1": "v1", "LANG": "x y"})
    rs = [
        InputRecord(100, T0, b"k0", b"v" * 10, ((b"h", b"v"),)),
        InputRecord(101, T0 + 7, None, None),
        InputRecord(105, T0 - 3, b"", b"longest value here", ((b"a", None),)),
    ]
    batch = InputBatch.of(rs, leader_epoch=9)
    result = instance.process(batch)
    first = next(o for o in result.outputs if o.topic == "first").decode()
    header = HEADER.unpack(by_key(first, b"H")[0].value or b"")
    payloads = [encode_payload(r.key, r.value, r.headers) for r in rs]
    assert header == (100, 3, 9, 0, 5, T0, T0 + 7, -1, -1, -1, max(map(len, payloads)))
    reported = by_key(first, b"R")
    assert len(reported) == 3
    for r, out, payload in zip(rs, reported, payloads, strict=True):
        value = out.value or b""
        attrs, ts, offset, clock, n = RECORD.unpack_from(value)
        assert (attrs, ts, offset, n) == (0, r.timestamp, r.offset, len(payload))
        assert clock == r.timestamp * 1_000_000  # WASI realtime: the record's timestamp, in ns
        assert value[RECORD.size :] == payload
    codes = struct.unpack("<iiii", by_key(first, b"C")[0].value or b"")
    header_payload_len = len(encode_payload(b"H", by_key(first, b"H")[0].value, ()))
    assert codes == (-2, -2, -2, header_payload_len)
    # write_record_with_options(topic "second") put the header record there
    second = next(o for o in result.outputs if o.topic == "second").decode()
    assert [r.key for r in second] == [b"H"]
    env = by_key(first, b"E")[0]  # argv, then the environment
    assert env.value == (
        b"t\x00K1=v1\x00LANG=x y\x00REDPANDA_INPUT_TOPIC=in\x00"
        b"REDPANDA_OUTPUT_TOPIC_0=first\x00REDPANDA_OUTPUT_TOPIC_1=second\x00"
    )
    # the second batch: no environment record, the same details
    result = instance.process(InputBatch.of(records(4, first_offset=500)))
    assert not by_key(result.records(), b"E")
    assert [RECORD.unpack_from(r.value or b"")[2] for r in by_key(result.records(), b"R")] == [
        500,
        501,
        502,
        503,
    ]


def test_log_append_time_batches(start: Start) -> None:
    instance = start("wat", "rp_meta", outputs=("first", "second"))
    append_time = T0 + 123_456
    result = instance.process(InputBatch.of(records(3), log_append_time=append_time))
    for out in by_key(result.records(), b"R"):
        _attrs, ts, _offset, clock, _n = RECORD.unpack_from(out.value or b"")
        assert ts == append_time
        assert clock == append_time * 1_000_000
    header = HEADER.unpack(by_key(result.records(), b"H")[0].value or b"")
    assert header[3] == 0x08  # attributes: LogAppendTime


def test_compressed_input_is_decompressed_and_its_codec_hidden(start: Start) -> None:
    compressed = batches()[-1]  # zstd, read with InputBatch.from_kafka
    assert compressed.header.attributes & 0x07 == 0
    instance = start("wat", "rp_meta", outputs=("first", "second"))
    result = instance.process(compressed)
    offsets = [RECORD.unpack_from(r.value or b"")[2] for r in by_key(result.records(), b"R")]
    assert offsets == [r.offset for r in compressed.decode()]
    header = HEADER.unpack(by_key(result.records(), b"H")[0].value or b"")
    assert header[2] == 3  # the batch's partition leader epoch
