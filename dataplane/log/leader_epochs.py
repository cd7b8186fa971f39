"""The leader-epoch cache of one partition: where each leader epoch starts in the log.

Kafka's ``LeaderEpochFileCache``: an ordered list of (epoch, start offset) entries, both
strictly increasing, the first offset written under each epoch. Followers use it (through
OffsetForLeaderEpoch on the leader) to find where their log diverges from the leader's.

File ``leader-epoch-checkpoint`` in the partition directory, Kafka's text format::

    0                  version
    2                  number of entries
    0 0                epoch start-offset
    3 120

It is rewritten atomically (temporary file, fsync, rename, directory fsync) on every
change. The partition log writes an entry *before* the batches it describes, so the file
never lacks an epoch that durable data carries; entries beyond the log end (a crash
before the data was written, or during a truncation) are dropped on load. A missing or
damaged file is rebuilt from the batch headers of the log (see ``PartitionLog``).
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path

from dataplane.durable import write_atomically

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch -> start offset, persisted to ``path`` (None: in memory only)."""

    def __init__(self, path: Path | None, entries: list[EpochEntry] | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = list(entries or [])

    # ------------------------------------------------------------------ file

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache | None:
        """The cache stored at ``path``; None when the file is missing or malformed."""
        try:
            text = path.read_text()
        except OSError:
            return None
        except UnicodeDecodeError:  # not text at all: as malformed as it gets
            text = ""
        entries = parse_checkpoint(text)
        if entries is None:
            log.warning("%s is malformed; it will be rebuilt from the log", path)
            return None
        return cls(path, entries)

    def to_text(self) -> str:
        lines = [str(CHECKPOINT_VERSION), str(len(self._entries))]
        lines.extend(f"{e.epoch} {e.start_offset}" for e in self._entries)
        return "\n".join(lines) + "\n"

    def flush(self) -> None:
        """Write the checkpoint, not fsynced: it changes at every leadership change, on the
        event loop, and an fsync there stalled every partition of a broker behind a busy
        disk (the soak). Nothing needs it durable: on load it is cut to the log, and rebuilt
        from batch headers when it lags the log, is malformed or is empty."""
        if self.path is not None:
            write_atomically(self.path, self.to_text().encode(), sync=False)

    # ------------------------------------------------------------------ queries

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at ``offset`` was written in (-1 if before the first)."""
        starts = [e.start_offset for e in self._entries]
        i = bisect.bisect_right(starts, offset) - 1
        return self._entries[i].epoch if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's ``endOffsetFor``.

        - undefined (-1) requested, empty cache, or an epoch newer than the latest:
          (-1, -1);
        - the latest epoch: (latest, ``log_end_offset``);
        - otherwise the end is the start offset of the first epoch larger than the one
          requested, paired with the largest known epoch <= the requested one; when the
          requested epoch is older than every known epoch, with the requested epoch itself
          (the data is gone: the follower is sent to where the leader's log begins).
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return undefined
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return undefined
        end = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, end
        return self._entries[higher - 1].epoch, end

    # ------------------------------------------------------------------ changes

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True when the cache changed.

        Ignored: a negative epoch or offset; the latest epoch again at the same or a later
        offset; an epoch when some entry of the same or a newer epoch starts *before*
        ``start_offset`` (data of a newer epoch precedes it: not monotonic). Otherwise
        every entry starting at or after ``start_offset`` or of an epoch >= ``epoch`` is
        removed first (as Kafka's LeaderEpochFileCache): an epoch under which nothing was
        written before ``start_offset`` -- say a replica led at epoch 5 without writing,
        then followed a leader whose epoch-4 batches now land at the same offset -- is
        replaced.
        """
        if epoch < 0 or start_offset < 0:
            return False
        latest = self.latest_entry
        if latest is not None:
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
            if any(e.epoch >= epoch and e.start_offset < start_offset for e in self._entries):
                log.warning(
                    "%s: ignoring epoch %d at %d: the cache already has %s",
                    self.path,
                    epoch,
                    start_offset,
                    self._entries[-3:],
                )
                return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        if flush:
            self.flush()
        return True

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> bool:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return False
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        if flush:
            self.flush()
        return True

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> bool:
        """The log now starts at ``start_offset``: drop entries wholly before it and move
        the start of the entry covering it up to ``start_offset``."""
        starts = [e.start_offset for e in self._entries]
        covering = bisect.bisect_right(starts, start_offset) - 1
        if covering < 0:
            return False
        entry = self._entries[covering]
        if covering == 0 and entry.start_offset == start_offset:
            return False
        self._entries[: covering + 1] = [EpochEntry(entry.epoch, start_offset)]
        if flush:
            self.flush()
        return True

    def clear(self, *, flush: bool = True) -> None:
        self._entries.clear()
        if flush:
            self.flush()


def parse_checkpoint(text: str) -> list[EpochEntry] | None:
    """Entries of a ``leader-epoch-checkpoint`` file, or None when it is malformed."""
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    try:
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            return None
        count = int(lines[1])
        if count != len(lines) - 2:
            return None
        entries: list[EpochEntry] = []
        for line in lines[2:]:
            epoch_text, offset_text = line.split()
            entry = EpochEntry(int(epoch_text), int(offset_text))
            if entry.epoch < 0 or entry.start_offset < 0:
                return None
            if entries and (
                entry.epoch <= entries[-1].epoch or entry.start_offset <= entries[-1].start_offset
            ):
                return None
            entries.append(entry)
    except ValueError:
        return None
    return entries
