"""Each guest, built by its real toolchain, computes what the same logic computes in Python
over the same input, record for record and byte for byte."""

from __future__ import annotations

import pytest

from tests.transforms.conftest import REFERENCE, Start, json_keeps
from tests.transforms.data import JSON_VALUES, batches, records
from transforms.records import InputBatch, OutputRecord, encode_output

GUESTS = [
    ("go", "identity"),
    ("go", "uppercase"),
    ("go", "jsonfilter"),
    ("go", "route"),
    ("c", "identity"),
    ("c", "uppercase"),
    ("c", "jsonfilter"),
    ("as", "identity"),
    ("as", "uppercase"),
    ("as", "jsonfilter"),
    ("wat", "identity"),
]
OUTPUTS = ("out", "second")


def expected(name: str, batch: InputBatch) -> dict[str, list[OutputRecord]]:
    by_topic: dict[str, list[OutputRecord]] = {}
    for r in batch.decode():
        for out in REFERENCE[name](r, OUTPUTS):
            by_topic.setdefault(out.topic, []).append(out)
    return by_topic


@pytest.mark.parametrize(("family", "name"), GUESTS, ids=[f"{f}-{n}" for f, n in GUESTS])
def test_guest_equals_python(start: Start, family: str, name: str) -> None:
    instance = start(family, name, outputs=OUTPUTS)
    for batch in batches():
        result = instance.process(batch)
        want = expected(name, batch)
        assert result.last_offset == batch.header.last_offset
        assert [b.topic for b in result.outputs] == [t for t in OUTPUTS if t in want]
        for out in result.outputs:
            assert out.decode() == want[out.topic]
            # the framing the broker stores: offset deltas 0..n-1, timestamp delta 0
            assert out.records == encode_output(want[out.topic])
            assert out.record_count == len(want[out.topic])
        assert result.fuel_used > 0


def test_reference_json_filter_is_not_trivial() -> None:
    kept = [v for v in JSON_VALUES if json_keeps(v)]
    assert 8 <= len(kept) < len(JSON_VALUES) - 10


def test_route_sends_b_keys_to_the_second_topic(start: Start) -> None:
    instance = start("go", "route", outputs=OUTPUTS)
    batch = InputBatch.of(records(20))
    result = instance.process(batch)
    second = [o for o in result.outputs if o.topic == "second"]
    assert second
    assert all(r.key and r.key.startswith(b"b") for r in second[0].decode())


def test_an_instance_serves_batches_of_any_size_in_turn(start: Start) -> None:
    instance = start("c", "identity")
    for n in (1, 500, 3, 2000, 1):
        batch = InputBatch.of(records(n, first_offset=10_000))
        assert instance.process(batch).records() == [
            OutputRecord("out", r.key, r.value, r.headers) for r in batch.decode()
        ]
