"""Requests in flight behind one refused by a full disk fail alike (found by the soak).

An idempotent producer has up to five requests in flight per partition. When the disk
refused the first with KAFKA_STORAGE_ERROR (not written) and then took the second (a
smaller write fit, or space came back), the second was OUT_OF_ORDER_SEQUENCE: librdkafka
then bumps its epoch and re-sends everything it has in flight on every partition under new
sequence numbers, duplicating what was written but not yet acknowledged elsewhere. As
Kafka's failed log directory goes offline, a data directory whose write just failed on a
full disk now refuses every write for ``log.dir.full.backoff.ms``: the requests behind
fail the same way and are retried in order. A retry of a batch written before is still
answered with its offsets."""

from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Any

import pytest

from dataplane.durable import write_atomically
from dataplane.log import leader_epochs
from dataplane.log.local_log import LocalLog
from dataplane.log.partition_log import PartitionLog
from dataplane.log.segment import Segment
from tests.dataplane.test_log_partition import open_log, produce
from wire.errors import LogDirFull

PID = 7


def refuse_next_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next segment write fails as on a full disk (ENOSPC); later ones succeed."""
    real = Segment.append_pieces
    full = [True]

    def append_pieces(self: Segment, *args: Any) -> int:
        if full[0]:
            full[0] = False
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args)

    monkeypatch.setattr(Segment, "append_pieces", append_pieces)


def with_sequence_1_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backoff_s: float
) -> PartitionLog:
    """A log where producer PID wrote sequence 0 and the disk then refused sequence 1
    (``log.dir.full.backoff.ms`` set to ``backoff_s``)."""
    monkeypatch.setattr(LocalLog, "full_backoff_s", backoff_s)
    plog = open_log(tmp_path)
    assert produce(plog, [(None, b"a")], producer=(PID, 0, 0)) == (0, 0)
    refuse_next_write(monkeypatch)
    with pytest.raises(LogDirFull):  # the disk refuses seq 1
        produce(plog, [(None, b"b")], producer=(PID, 0, 1))
    return plog


def test_writes_behind_a_refused_one_are_refused_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = with_sequence_1_refused(tmp_path, monkeypatch, 0.3)
    with pytest.raises(LogDirFull, match=r"log\.dir\.full\.backoff\.ms"):  # seq 2, in flight
        produce(plog, [(None, b"c")], producer=(PID, 0, 2))
    # a retry of the batch written before is answered as the duplicate it is
    assert produce(plog, [(None, b"a")], producer=(PID, 0, 0)) == (0, 0)

    time.sleep(0.35)  # the producer retries in order once the backoff is over
    assert produce(plog, [(None, b"b")], producer=(PID, 0, 1)) == (1, 1)
    assert produce(plog, [(None, b"c")], producer=(PID, 0, 2)) == (2, 2)
    plog.close()


@pytest.mark.parametrize("where", ["leader-epoch checkpoint", "segment roll"])
def test_a_full_disk_outside_the_segment_write_refuses_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Writes of an append other than the segment's (a new leader epoch's checkpoint, a
    roll's new files) failed for lack of space as raw OSErrors: KAFKA_STORAGE_ERROR without
    the refusal window, so the request in flight behind could be answered
    OUT_OF_ORDER_SEQUENCE. Found while tracing the soak's seed-7 duplicates (librdkafka
    bumped its epoch after KAFKA_STORAGE_ERROR then OUT_OF_ORDER_SEQUENCE); their brokers
    did not log this path, so it is not their proven cause."""
    monkeypatch.setattr(LocalLog, "full_backoff_s", 0.3)
    plog = open_log(tmp_path)
    assert produce(plog, [(None, b"a")], producer=(PID, 0, 0)) == (0, 0)

    failures = [1]

    def fail_once(real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if failures[0]:
                failures[0] -= 1
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kwargs)

        return wrapper

    if where == "segment roll":
        monkeypatch.setattr(LocalLog, "roll_due", lambda self, *a, **k: True)
        monkeypatch.setattr(LocalLog, "roll", fail_once(LocalLog.roll))
    else:
        plog.leader_epoch = plog.epochs.latest_epoch + 1  # a new term: its checkpoint first
        monkeypatch.setattr(leader_epochs, "write_atomically", fail_once(write_atomically))
    with pytest.raises(LogDirFull):  # the disk refuses seq 1
        produce(plog, [(None, b"b")], producer=(PID, 0, 1))
    with pytest.raises(LogDirFull, match=r"log\.dir\.full\.backoff\.ms"):  # seq 2, in flight
        produce(plog, [(None, b"c")], producer=(PID, 0, 2))
    time.sleep(0.35)
    assert produce(plog, [(None, b"b")], producer=(PID, 0, 1)) == (1, 1)
    assert produce(plog, [(None, b"c")], producer=(PID, 0, 2)) == (2, 2)
    plog.close()


def test_a_batch_behind_a_refused_one_is_refused_after_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request behind a refused one arrives after log.dir.full.backoff.ms (the soak's
    duplicates: it was OUT_OF_ORDER_SEQUENCE, and librdkafka bumped its epoch): it is
    refused alike until the refused batch comes again; other producers are not held."""
    plog = with_sequence_1_refused(tmp_path, monkeypatch, 0.0)
    for _ in range(2):  # seq 2, in flight, arrives when the disk takes writes again
        with pytest.raises(LogDirFull, match="sequence 1 was refused"):
            produce(plog, [(None, b"c")], producer=(PID, 0, 2))
    assert produce(plog, [(None, b"x")], producer=(PID + 1, 0, 0)) == (1, 1)
    assert produce(plog, [(None, b"a")], producer=(PID, 0, 0)) == (0, 0)  # a retry: its offsets
    assert produce(plog, [(None, b"b")], producer=(PID, 0, 1)) == (2, 2)
    assert produce(plog, [(None, b"c")], producer=(PID, 0, 2)) == (3, 3)
    assert not plog.producers.refused
    plog.close()


def test_a_new_epoch_is_not_held_behind_the_old_ones_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = with_sequence_1_refused(tmp_path, monkeypatch, 0.0)
    assert produce(plog, [(None, b"b")], producer=(PID, 1, 0)) == (1, 1)
    assert not plog.producers.refused
    plog.close()
