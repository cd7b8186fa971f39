"""The history checker: a clean history passes, each injected bug is caught under its name."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.chaos.checker import Anomaly, AnomalyKind, Result, check, main
from tests.chaos.history import (
    Ack,
    Commit,
    Committed,
    Event,
    Final,
    HistoryError,
    HistoryWriter,
    Isolation,
    Nemesis,
    NemesisPhase,
    Read,
    Send,
    SendError,
    TxnEnd,
    TxnOutcome,
    read_history,
)

TOPIC = "T"
RU = Isolation.READ_UNCOMMITTED
RC = Isolation.READ_COMMITTED
TXN_CYCLE = ("committed", "aborted", "unknown-in", "unknown-out")


@dataclass
class _Record:
    offset: int
    value: str
    committed: bool  # visible to read_committed


def synthetic_history(
    values: int = 600, *, producers: int = 3, partitions: int = 3, seed: int = 7
) -> list[Event]:
    """A clean history: idempotent and transactional producers with indeterminate sends,
    transactions of every outcome (unknown ones all in or all out of the log), a consumer in
    a group of each isolation level with commits and OffsetFetch observations, nemeses, and
    the final log in both isolations. About 7 events per value."""
    rng = random.Random(seed)
    events: list[Event] = []
    clock = [0.0]

    def t() -> float:
        clock[0] += 0.001
        return round(clock[0], 6)

    logs: list[list[_Record]] = [[] for _ in range(partitions)]
    next_offset = [0] * partitions

    def append(value: str, partition: int, committed: bool) -> int:
        offset = next_offset[partition]
        next_offset[partition] += 1
        logs[partition].append(_Record(offset, value, committed))
        return offset

    seqs = Counter[str]()
    txns = 0
    made = 0
    step = 0
    while made < values:
        if step % 3 == 0:
            events.append(Nemesis(t(), rng.choice(("partition", "kill")), NemesisPhase.START))
            events.append(Nemesis(t(), "partition", NemesisPhase.STOP, {"nodes": [1, 2]}))
        step += 1
        producer = f"p{step % (producers + 1)}"
        if producer != "p0":  # an idempotent producer sends one value
            seq = seqs[producer]
            seqs[producer] += 1
            value = f"{producer}-{seq}"
            partition = seq % partitions
            events.append(Send(t(), producer, TOPIC, value, seq, None))
            made += 1
            if seq % 25 == 7:  # indeterminate: in the log on every other one
                if seq % 50 == 7:
                    append(value, partition, committed=True)
                events.append(SendError(t(), producer, value, "timed out"))
                continue
            offset = append(value, partition, committed=True)
            events.append(Ack(t(), producer, value, TOPIC, partition, offset))
            continue
        outcome = TXN_CYCLE[txns % len(TXN_CYCLE)]
        txn = f"p0-t{txns}"
        txns += 1
        visible = outcome in ("committed", "unknown-in")
        txn_values = []
        for _ in range(3):
            seq = seqs[producer]
            seqs[producer] += 1
            value = f"p0-{seq}"
            partition = seq % partitions
            txn_values.append(value)
            events.append(Send(t(), producer, TOPIC, value, seq, txn))
            offset = append(value, partition, committed=visible)
            events.append(Ack(t(), producer, value, TOPIC, partition, offset))
            made += 1
        for partition in range(partitions):
            next_offset[partition] += 1  # the transaction marker
        events.append(
            TxnEnd(t(), producer, txn, TxnOutcome(outcome.split("-")[0]), tuple(txn_values))
        )
    for consumer, isolation in (("c0", RU), ("c1", RC)):
        group = f"g-{consumer}"
        for partition, log in enumerate(logs):
            records = [r for r in log if isolation is RU or r.committed]
            for start in range(0, len(records), 10):
                fetch = records[start : start + 10]
                hw = fetch[-1].offset + 1 + rng.randrange(3)
                for r in fetch:
                    events.append(
                        Read(
                            t(), consumer, group, isolation, TOPIC, partition, r.offset, r.value, hw
                        )
                    )
                committed = fetch[-1].offset + 1
                events.append(Commit(t(), consumer, group, TOPIC, partition, committed))
                events.append(Committed(t(), "o1", group, TOPIC, partition, committed))
    for isolation in (RU, RC):
        for partition, log in enumerate(logs):
            for r in log:
                if isolation is RU or r.committed:
                    events.append(Final(t(), isolation, TOPIC, partition, r.offset, r.value))
    return events


@pytest.fixture(scope="module")
def clean() -> list[Event]:
    return synthetic_history()


def _only(result: Result, kind: AnomalyKind) -> Anomaly:
    """The single anomaly of the result, which must be of ``kind``."""
    assert [a.kind for a in result.anomalies] == [kind], "\n".join(map(str, result.anomalies))
    return result.anomalies[0]


def _first(events: list[Event], cls: type[Event], where: Callable[[Event], bool]) -> int:
    return next(i for i, e in enumerate(events) if isinstance(e, cls) and where(e))


def _acked_plain_value(events: list[Event]) -> Ack:
    """An acked value of an idempotent (non-transactional) producer."""
    return next(e for e in events if isinstance(e, Ack) and not e.producer.startswith("p0"))


def _txn(events: list[Event], outcome: TxnOutcome, nth: int = 0) -> TxnEnd:
    ends = [e for e in events if isinstance(e, TxnEnd) and e.outcome is outcome]
    return ends[nth]


def _fresh_offset(events: list[Event], partition: int) -> int:
    return 1 + max(e.offset for e in events if isinstance(e, Final) and e.partition == partition)


def _final(events: list[Event], value: str, isolation: Isolation) -> Final:
    return next(
        e for e in events if isinstance(e, Final) and e.value == value and e.isolation is isolation
    )


def test_clean_history_passes(clean: list[Event]) -> None:
    result = check(clean)
    assert result.ok, "\n".join(map(str, result.anomalies[:5]))
    c = result.counts
    assert c.sent == sum(1 for e in clean if isinstance(e, Send))
    assert 0 < c.send_errors_in_log < c.send_errors  # both present and missing ones
    assert min(c.txns_committed, c.txns_aborted, c.txns_unknown) > 0
    assert 0 < c.final_read_committed < c.final_read_uncommitted
    assert set(c.faults) == {"partition", "kill"}
    assert all(n == 0 for n in result.by_kind().values())
    assert "history check: OK" in result.table()


def test_lost_acked_value(clean: list[Event]) -> None:
    ack = _acked_plain_value(clean)
    events = [e for e in clean if not (isinstance(e, Final) and e.value == ack.value)]
    anomaly = _only(check(events), AnomalyKind.LOST)
    assert anomaly.subject == ack.value
    assert anomaly.events == (ack,)


def test_lost_committed_transaction_value(clean: list[Event]) -> None:
    end = _txn(clean, TxnOutcome.COMMITTED)
    gone = end.values[1]
    missing = _final(clean, gone, RC)
    events = [e for e in clean if e != missing]
    anomaly = _only(check(events), AnomalyKind.LOST)
    assert (anomaly.subject, anomaly.events) == (gone, (end,))


def test_duplicated_in_the_log(clean: list[Event]) -> None:
    ack = _acked_plain_value(clean)
    original = _final(clean, ack.value, RU)
    copy = replace(original, offset=_fresh_offset(clean, original.partition))
    anomaly = _only(check([*clean, copy]), AnomalyKind.DUPLICATED)
    assert anomaly.subject == ack.value
    assert {original, copy} <= set(anomaly.events)


def test_duplicated_acks(clean: list[Event]) -> None:
    ack = _acked_plain_value(clean)
    second = replace(ack, offset=_fresh_offset(clean, ack.partition), t=ack.t + 0.0001)
    anomaly = _only(check([*clean, second]), AnomalyKind.DUPLICATED)
    assert {ack, second} <= set(anomaly.events)


def test_order_of_a_producer(clean: list[Event]) -> None:
    events = list(clean)
    first = _first(events, Send, lambda e: isinstance(e, Send) and e.value == "p1-3")
    second = _first(events, Send, lambda e: isinstance(e, Send) and e.value == "p1-6")
    a, b = events[first], events[second]
    assert isinstance(a, Send)
    assert isinstance(b, Send)
    events[first], events[second] = replace(a, seq=b.seq), replace(b, seq=a.seq)
    anomaly = _only(check(events), AnomalyKind.ORDER)
    assert anomaly.subject == "p1 T/0"
    assert _final(clean, "p1-3", RU) in anomaly.events
    assert _final(clean, "p1-6", RU) in anomaly.events


def test_offset_reuse(clean: list[Event]) -> None:
    """A consumer read an indeterminate value at an offset the final log gives another value
    (a truncation below what was served)."""
    finals = {e.value for e in clean if isinstance(e, Final)}
    lost_in_doubt = next(e for e in clean if isinstance(e, SendError) and e.value not in finals)
    holder = _final(clean, "p2-0", RU)
    read = Read(
        1.0, "c9", None, RU, TOPIC, holder.partition, holder.offset, lost_in_doubt.value, None
    )
    anomaly = _only(check([*clean, read]), AnomalyKind.OFFSET_REUSE)
    assert anomaly.subject == f"T/{holder.partition}@{holder.offset}"
    assert read in anomaly.events
    assert holder in anomaly.events


def test_offset_reuse_by_acks(clean: list[Event]) -> None:
    """Two acks for one offset: the reuse is named (the second value sits elsewhere as well)."""
    acks = [e for e in clean if isinstance(e, Ack) and e.partition == 0]
    first, other = acks[0], acks[1]
    events = [replace(e, offset=first.offset) if e == other else e for e in clean]
    result = check(events)
    reuse = [a for a in result.anomalies if a.kind is AnomalyKind.OFFSET_REUSE]
    assert [a.subject for a in reuse] == [f"T/0@{first.offset}"]
    assert replace(other, offset=first.offset) in reuse[0].events


def test_ack_mismatch(clean: list[Event]) -> None:
    ack = _acked_plain_value(clean)
    wrong = replace(ack, offset=10**9)
    events = [wrong if e == ack else e for e in clean]
    anomaly = _only(check(events), AnomalyKind.ACK_MISMATCH)
    assert anomaly.subject == ack.value
    assert anomaly.events == (wrong, _final(clean, ack.value, RU))


def test_committed_offset_observed_backwards(clean: list[Event]) -> None:
    observations = [e for e in clean if isinstance(e, Committed)]
    before = observations[3]
    lower = replace(before, offset=before.offset - 1, t=before.t + 0.0001)
    anomaly = _only(check([*clean, lower]), AnomalyKind.COMMITTED_BACKWARDS)
    assert (anomaly.events[0], anomaly.events[-1]) == (before, lower)


def test_committed_offset_below_an_acked_commit() -> None:
    commit = Commit(1.0, "c0", "g", TOPIC, 0, 10)
    below = Committed(2.0, "o1", "g", TOPIC, 0, 5)
    none = Committed(3.0, "o1", "g", TOPIC, 0, -1)
    anomaly = _only(check([commit, below]), AnomalyKind.COMMITTED_BACKWARDS)
    assert anomaly.events == (commit, below)
    # an observation at the very time of the commit may precede it
    assert check([commit, replace(below, t=1.0)]).ok
    anomaly = _only(check([commit, none]), AnomalyKind.COMMITTED_BACKWARDS)
    assert anomaly.events == (commit, none)
    # another group or partition is another history
    assert check([commit, replace(below, group="h"), replace(below, partition=1)]).ok


def test_aborted_value_in_final_read_committed(clean: list[Event]) -> None:
    end = _txn(clean, TxnOutcome.ABORTED)
    shown = replace(_final(clean, end.values[0], RU), isolation=RC)
    anomaly = _only(check([*clean, shown]), AnomalyKind.ABORTED_VISIBLE)
    assert anomaly.events == (end, shown)


def test_aborted_value_read_committed(clean: list[Event]) -> None:
    end = _txn(clean, TxnOutcome.ABORTED)
    at = _final(clean, end.values[2], RU)
    read = Read(1.0, "c9", None, RC, TOPIC, at.partition, at.offset, at.value, None)
    anomaly = _only(check([*clean, read]), AnomalyKind.ABORTED_VISIBLE)
    assert anomaly.events == (end, read)
    assert check([*clean, replace(read, isolation=RU)]).ok


def _unknown_in_log(events: list[Event]) -> TxnEnd:
    """An unknown transaction the final read_committed log shows."""
    rc = {e.value for e in events if isinstance(e, Final) and e.isolation is RC}
    ends = [e for e in events if isinstance(e, TxnEnd) and e.outcome is TxnOutcome.UNKNOWN]
    return next(e for e in ends if e.values[0] in rc)


def test_unknown_transaction_all_or_nothing(clean: list[Event]) -> None:
    end = _unknown_in_log(clean)
    hidden = set(end.values)

    def seen_committed(e: Event) -> bool:
        return isinstance(e, Final | Read) and e.isolation is RC and e.value in hidden

    assert check(clean).ok  # all present
    assert check([e for e in clean if not seen_committed(e)]).ok  # none present
    missing = _final(clean, end.values[1], RC)
    half = [e for e in clean if e != missing]
    anomaly = _only(check(half), AnomalyKind.ATOMICITY)
    assert anomaly.subject == end.txn
    assert anomaly.events == (
        end,
        _final(clean, end.values[0], RC),
        _final(clean, end.values[2], RC),
    )


def test_unknown_transaction_read_then_gone(clean: list[Event]) -> None:
    """A read_committed consumer saw a value of an unknown transaction the log then lacks."""
    end = _unknown_in_log(clean)
    events = [
        e
        for e in clean
        if not (isinstance(e, Final) and e.isolation is RC and e.value in end.values)
    ]
    result = check(events)
    assert {a.kind for a in result.anomalies} == {AnomalyKind.ABORTED_VISIBLE}
    assert all(a.events[0] == end for a in result.anomalies)


def test_hw_backwards(clean: list[Event]) -> None:
    events = list(clean)
    reads = [i for i, e in enumerate(events) if isinstance(e, Read) and e.consumer == "c0"]
    # the last read of the first fetch of partition 0, and the first read of the second
    previous, target = events[reads[9]], events[reads[10]]
    assert isinstance(previous, Read)
    assert isinstance(target, Read)
    assert (previous.partition, target.partition) == (0, 0)
    assert previous.hw is not None
    lowered = replace(target, hw=previous.hw - 1)
    events[reads[10]] = lowered
    anomaly = _only(check(events), AnomalyKind.HW_BACKWARDS)
    assert anomaly.events == (previous, lowered)
    events[reads[10]] = replace(target, hw=None)  # a client that does not expose it
    assert check(events).ok


def test_hw_in_time_order_not_history_order(clean: list[Event]) -> None:
    """Reads written out of time order are compared by ``t``, not by their place in the file."""
    reads = [e for e in clean if isinstance(e, Read) and e.consumer == "c0" and e.partition == 1]
    chosen = set(reads)
    rest = [e for e in clean if e not in chosen]
    assert check([*rest, *reversed(reads)]).ok
    early, late = reads[0], reads[-1]
    assert early.hw is not None
    lowered = replace(late, hw=early.hw - 1)
    backwards = [*rest, *reversed([*reads[:-1], lowered])]
    anomaly = _only(check(backwards), AnomalyKind.HW_BACKWARDS)
    assert anomaly.events == (reads[-2], lowered)


def test_phantom(clean: list[Event]) -> None:
    ghost = Final(99.0, RU, TOPIC, 1, _fresh_offset(clean, 1), "ghost-1")
    anomaly = _only(check([*clean, ghost]), AnomalyKind.PHANTOM)
    assert (anomaly.subject, anomaly.events) == ("ghost-1", (ghost,))
    read = Read(1.0, "c9", "g", RU, TOPIC, 1, 10**6, "ghost-2", 5)
    anomaly = _only(check([*clean, read]), AnomalyKind.PHANTOM)
    assert anomaly.events == (read,)


def test_indeterminate_sends_in_or_out_of_the_log(clean: list[Event]) -> None:
    doubtful = {e.value for e in clean if isinstance(e, SendError)}
    without = [e for e in clean if not (isinstance(e, Final | Read) and e.value in doubtful)]
    result = check(without)
    assert result.ok
    assert result.counts.send_errors == len(doubtful)
    assert result.counts.send_errors_in_log == 0
    assert check(clean).counts.send_errors_in_log > 0


def test_jsonl_round_trip(tmp_path: Path, clean: list[Event]) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        for e in clean:
            writer.write(e)
    back = read_history(path)
    assert back == clean
    assert all(isinstance(e.isolation, Isolation) for e in back if isinstance(e, Read | Final))
    assert check(back) == check(clean)


def test_writer_is_shared_by_threads(tmp_path: Path, clean: list[Event]) -> None:
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    shares = [clean[i::4] for i in range(4)]

    def write_all(share: list[Event]) -> None:
        for e in share:
            writer.write(e)

    threads = [threading.Thread(target=write_all, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    assert Counter(read_history(path)) == Counter(clean)
    with pytest.raises(ValueError, match="closed"):
        writer.write(clean[0])


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"kind":"send","t":1.0', "not a JSON object"),
        ('{"kind":"sned","t":1.0}', "unknown kind 'sned'"),
        ('{"kind":"ack","t":1.0,"producer":"p1","value":"v"}', "lacks the field 'topic'"),
        (
            '{"kind":"final","t":1,"isolation":"dirty","topic":"T","partition":0,'
            '"offset":0,"value":"v"}',
            "'dirty' is not a valid Isolation",
        ),
    ],
)
def test_bad_lines_are_named(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"kind":"nemesis","t":0.5,"name":"kill","phase":"start","detail":{}}\n' + line)
    with pytest.raises(HistoryError, match=f"history.jsonl:2: .*{says}"):
        read_history(path)


def test_command_line(
    tmp_path: Path, clean: list[Event], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        for e in clean:
            writer.write(e)
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("history check: OK")
    assert "lost" in out
    assert "phantom" in out
    with HistoryWriter(path) as writer:
        for n in range(25):
            writer.write(Final(99.0, RU, TOPIC, 2, 10**6 + n, f"ghost-{n}"))
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "FAILED: 25 anomalies" in out
    assert out.count("phantom ghost-") == 20
    assert "... and 5 more" in out


def test_command_line_on_a_broken_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"kind":"send"\n')
    with pytest.raises(SystemExit) as exit_:
        main([str(path)])
    assert exit_.value.code == 2
    assert "history.jsonl:1: not a JSON object" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "absent.jsonl")])
    assert exit_.value.code == 2
