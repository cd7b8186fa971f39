"""The history of a fault-injection run: what every client saw, one JSON object a line.

Every event carries ``t``, float seconds since the start of the run on a monotonic clock, and
``kind``, which names its type:

======== ==================================================================================
kind     fields (besides ``t``)
======== ==================================================================================
send     producer, topic, value, seq, txn: a produce attempt. Values are globally unique;
         ``seq`` increases per producer; ``txn`` is a transaction id or null.
ack      producer, value, topic, partition, offset: the broker acknowledged (acks=all). For
         a transactional send it only means appended; visibility follows the txn's outcome.
send_error producer, value, error: the client gave up; the record may or may not be in the
         log (indeterminate).
txn_end  producer, txn, outcome (committed | aborted | unknown), values: the outcome of a
         transaction as the client saw it (unknown: the commit call failed or timed out).
read     consumer, group (or null), isolation, topic, partition, offset, value, hw: a record a
         consumer saw; ``hw`` is the high watermark (the last stable offset for
         read_committed) of that fetch, or null when the client does not expose it.
commit   consumer, group, topic, partition, offset: an offset commit the broker acknowledged.
committed observer, group, topic, partition, offset: an OffsetFetch answer seen at ``t``
         (-1 when the group has no offset).
final    isolation, topic, partition, offset, value: one record of the complete log read
         from the start after every fault healed (both isolations are read in full).
nemesis  name, phase (start | stop), detail: an entry of the fault schedule.
======== ==================================================================================

``HistoryWriter`` appends events from any number of client threads; ``read_history`` turns a
file back into typed events and says which line is wrong when one is.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, TypeAlias


class EventKind(StrEnum):
    """The ``kind`` field of a history line."""

    SEND = "send"
    ACK = "ack"
    SEND_ERROR = "send_error"
    TXN_END = "txn_end"
    READ = "read"
    COMMIT = "commit"
    COMMITTED = "committed"
    FINAL = "final"
    NEMESIS = "nemesis"


class Isolation(StrEnum):
    """A consumer's isolation level."""

    READ_COMMITTED = "read_committed"
    READ_UNCOMMITTED = "read_uncommitted"


class TxnOutcome(StrEnum):
    """How a transaction ended, as its producer saw it."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"  # the commit call failed or timed out


class NemesisPhase(StrEnum):
    """Whether a fault begins or heals."""

    START = "start"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Send:
    """A produce attempt."""

    kind: ClassVar[EventKind] = EventKind.SEND
    t: float
    producer: str
    topic: str
    value: str
    seq: int
    txn: str | None = None


@dataclass(frozen=True, slots=True)
class Ack:
    """The broker acknowledged a send (acks=all) at this offset."""

    kind: ClassVar[EventKind] = EventKind.ACK
    t: float
    producer: str
    value: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class SendError:
    """The client gave up on a send: the record may or may not be in the log."""

    kind: ClassVar[EventKind] = EventKind.SEND_ERROR
    t: float
    producer: str
    value: str
    error: str


@dataclass(frozen=True, slots=True)
class TxnEnd:
    """The outcome of a transaction as its producer saw it, with the values it sent in it."""

    kind: ClassVar[EventKind] = EventKind.TXN_END
    t: float
    producer: str
    txn: str
    outcome: TxnOutcome
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Read:
    """A record a consumer saw, with the high watermark (or last stable offset) of its fetch."""

    kind: ClassVar[EventKind] = EventKind.READ
    t: float
    consumer: str
    group: str | None
    isolation: Isolation
    topic: str
    partition: int
    offset: int
    value: str
    hw: int | None


@dataclass(frozen=True, slots=True)
class Commit:
    """An offset commit the broker acknowledged."""

    kind: ClassVar[EventKind] = EventKind.COMMIT
    t: float
    consumer: str
    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Committed:
    """A group's committed offset as an OffsetFetch returned it (-1: none)."""

    kind: ClassVar[EventKind] = EventKind.COMMITTED
    t: float
    observer: str
    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Final:
    """One record of the full log read after every fault healed."""

    kind: ClassVar[EventKind] = EventKind.FINAL
    t: float
    isolation: Isolation
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class Nemesis:
    """An entry of the fault schedule."""

    kind: ClassVar[EventKind] = EventKind.NEMESIS
    t: float
    name: str
    phase: NemesisPhase
    detail: Mapping[str, Any] = field(default_factory=dict, hash=False)


Event: TypeAlias = Send | Ack | SendError | TxnEnd | Read | Commit | Committed | Final | Nemesis


def to_json(event: Event) -> dict[str, Any]:
    """An event as the object of its JSON line: ``kind``, then its fields in order."""
    out: dict[str, Any] = {"kind": event.kind}
    for f in fields(event):
        value = getattr(event, f.name)
        out[f.name] = dict(value) if isinstance(value, Mapping) else value
    return out


_ISOLATIONS = {member.value: member for member in Isolation}


def _isolation(name: str) -> Isolation:
    # a dict lookup: Isolation(name) costs several times as much, on millions of lines
    try:
        return _ISOLATIONS[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a valid Isolation") from None


def _send(d: dict[str, Any]) -> Send:
    return Send(d["t"], d["producer"], d["topic"], d["value"], d["seq"], d["txn"])


def _ack(d: dict[str, Any]) -> Ack:
    return Ack(d["t"], d["producer"], d["value"], d["topic"], d["partition"], d["offset"])


def _send_error(d: dict[str, Any]) -> SendError:
    return SendError(d["t"], d["producer"], d["value"], d["error"])


def _txn_end(d: dict[str, Any]) -> TxnEnd:
    return TxnEnd(d["t"], d["producer"], d["txn"], TxnOutcome(d["outcome"]), tuple(d["values"]))


def _read(d: dict[str, Any]) -> Read:
    return Read(
        d["t"],
        d["consumer"],
        d["group"],
        _isolation(d["isolation"]),
        d["topic"],
        d["partition"],
        d["offset"],
        d["value"],
        d["hw"],
    )


def _commit(d: dict[str, Any]) -> Commit:
    return Commit(d["t"], d["consumer"], d["group"], d["topic"], d["partition"], d["offset"])


def _committed(d: dict[str, Any]) -> Committed:
    return Committed(d["t"], d["observer"], d["group"], d["topic"], d["partition"], d["offset"])


def _final(d: dict[str, Any]) -> Final:
    return Final(
        d["t"], _isolation(d["isolation"]), d["topic"], d["partition"], d["offset"], d["value"]
    )


def _nemesis(d: dict[str, Any]) -> Nemesis:
    return Nemesis(d["t"], d["name"], NemesisPhase(d["phase"]), d.get("detail") or {})


_DECODERS: dict[str, Callable[[dict[str, Any]], Event]] = {
    EventKind.SEND: _send,
    EventKind.ACK: _ack,
    EventKind.SEND_ERROR: _send_error,
    EventKind.TXN_END: _txn_end,
    EventKind.READ: _read,
    EventKind.COMMIT: _commit,
    EventKind.COMMITTED: _committed,
    EventKind.FINAL: _final,
    EventKind.NEMESIS: _nemesis,
}


class HistoryError(ValueError):
    """A history file holds a line that is not an event."""


def event_from_json(d: dict[str, Any]) -> Event:
    """The typed event of one decoded history line (KeyError/ValueError when malformed)."""
    decoder = _DECODERS.get(d.get("kind", ""))
    if decoder is None:
        raise ValueError(f"unknown kind {d.get('kind')!r}; expected one of {', '.join(_DECODERS)}")
    return decoder(d)


def iter_history(path: str | Path) -> Iterator[Event]:
    """The events of a history file, in file order, decoded as they are read."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield event_from_json(json.loads(line))
            except json.JSONDecodeError as e:
                raise HistoryError(
                    f"{path}:{number}: not a JSON object ({e.msg}); a torn last line from a "
                    "killed run can be deleted, any other line means the writer is broken"
                ) from e
            except KeyError as e:
                raise HistoryError(
                    f"{path}:{number}: event lacks the field {e.args[0]!r}; "
                    "every event needs the fields its kind lists in tests/chaos/history.py"
                ) from e
            except (ValueError, TypeError) as e:
                raise HistoryError(
                    f"{path}:{number}: {e}; fix the writer of this event kind"
                ) from e


def read_history(path: str | Path) -> list[Event]:
    """Every event of a history file, in file order."""
    return list(iter_history(path))


class HistoryWriter:
    """Appends events to a JSON-lines file, one flushed line per event, from any thread.

    An existing file is continued, not replaced: give each run a path of its own."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    def write(self, event: Event) -> None:
        line = json.dumps(to_json(event), separators=(",", ":")) + "\n"
        with self._lock:
            if self._file.closed:
                raise ValueError(f"history {self.path} is closed: write events before close()")
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
