"""Durable state of one Raft node: the log, the hard state (term, vote) and the snapshot.

A node's directory holds three files (all integers big-endian, CRCs are CRC-32C)::

    raft.log      header, then entry frames, appended
        0   4   magic b"SLRL"
        4   2   version (1)
        6   2   reserved (0)
        then per entry:
        0   4   body length L (17 + payload length)
        4   4   CRC of the body
        8   8   term            } body
        16  8   index           }
        24  1   kind (0 data, 1 noop)
        25  L-17 payload        }

    raft.state    the hard state, replaced atomically
        0   4   magic b"SLRH"
        4   2   version (1)
        6   2   reserved (0)
        8   8   term
        16  8   vote (-1: none)
        24  4   CRC of bytes 0..23

    raft.snapshot the latest snapshot, replaced atomically
        0   4   magic b"SLRS"
        4   2   version (1)
        6   2   reserved (0)
        8   8   last included index
        16  8   last included term
        24  8   data length N
        32  N   application bytes
        32+N 4  CRC of every byte before it

"Replaced atomically" is: write ``NAME.tmp``, fsync it, rename over ``NAME``, fsync the
directory. The log is appended with one ``write`` and one ``fsync`` per ``persist`` call,
however many entries it carries (the driver batches everything that arrived meanwhile).

Recovery reads the snapshot and the hard state (a damaged one is ``StorageCorrupt``: they
are never torn), then scans the log and truncates it at the first frame that is short, fails
its CRC, or does not follow its predecessor (index + 1, term not lower): that is a torn tail
of a write that was never acknowledged. Entries at or below the snapshot index are dropped;
if the log does not hold the snapshot's last entry with the snapshot's term (a crash between
installing a leader's snapshot and rewriting the log), the whole log is dropped: its entries
follow a different history.

Compaction (a new snapshot) rewrites the log with the entries after the snapshot into
``raft.log.tmp`` and renames it over ``raft.log``: cheap for a metadata log that is
snapshotted every few thousand entries. The whole log is read into memory at start-up.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import crc32c

from dataplane.durable import write_all, write_atomically
from dataplane.raft.errors import StorageCorrupt
from dataplane.raft.types import Entry, EntryKind, HardState, Snapshot

log = logging.getLogger(__name__)

LOG_FILE = "raft.log"
STATE_FILE = "raft.state"
SNAPSHOT_FILE = "raft.snapshot"

_LOG_HEADER = struct.pack(">4sHH", b"SLRL", 1, 0)
_FRAME = struct.Struct(">IIQQB")  # length, crc, term, index, kind
_BODY_FIXED = 17  # term, index, kind
_STATE = struct.Struct(">4sHHQq")
_SNAP_HEAD = struct.Struct(">4sHHQQQ")
MAX_ENTRY_BYTES = 64 << 20


def encode_entries(entries: Sequence[Entry]) -> bytes:
    parts: list[bytes] = []
    for e in entries:
        body = struct.pack(">QQB", e.term, e.index, e.kind) + e.payload
        parts.append(struct.pack(">II", len(body), crc32c.crc32c(body)))
        parts.append(body)
    return b"".join(parts)


class RaftStorage:
    """The files of one node. Not thread-safe: one ``persist`` at a time (the driver runs
    them one after another in a worker thread)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob("*.tmp"):
            leftover.unlink()
        self.hard_state = self._load_hard_state()
        self.snapshot = self._load_snapshot()
        self._path = self.directory / LOG_FILE
        self._positions: list[int] = []  # byte offset of entry first_index + i
        self._terms: list[int] = []
        self._first = self.snapshot.index + 1
        self._end = len(_LOG_HEADER)
        self._fd = -1
        self.entries = self._recover_log()
        self.fsyncs = 0

    # --- recovery -----------------------------------------------------------------------

    def _load_hard_state(self) -> HardState:
        path = self.directory / STATE_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return HardState()
        if len(data) != _STATE.size + 4 or crc32c.crc32c(data[:-4]) != int.from_bytes(
            data[-4:], "big"
        ):
            raise StorageCorrupt(f"{path}: bad length or CRC")
        magic, version, _, term, vote = _STATE.unpack_from(data)
        if magic != b"SLRH" or version != 1:
            raise StorageCorrupt(f"{path}: not a Raft hard-state file")
        return HardState(term, None if vote < 0 else vote)

    def _load_snapshot(self) -> Snapshot:
        path = self.directory / SNAPSHOT_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return Snapshot()
        if len(data) < _SNAP_HEAD.size + 4 or crc32c.crc32c(data[:-4]) != int.from_bytes(
            data[-4:], "big"
        ):
            raise StorageCorrupt(f"{path}: bad length or CRC")
        magic, version, _, index, term, size = _SNAP_HEAD.unpack_from(data)
        if magic != b"SLRS" or version != 1 or size != len(data) - _SNAP_HEAD.size - 4:
            raise StorageCorrupt(f"{path}: not a Raft snapshot file")
        return Snapshot(index, term, data[_SNAP_HEAD.size : -4])

    def _recover_log(self) -> list[Entry]:  # noqa: C901, PLR0912, PLR0915 - log recovery: every way a file can be torn
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) < len(_LOG_HEADER):
            if data:
                log.warning("%s: torn header, starting an empty log", self._path)
            self._rewrite([], b"")
            return []
        if data[: len(_LOG_HEADER)] != _LOG_HEADER:
            raise StorageCorrupt(f"{self._path}: not a Raft log file")
        entries: list[Entry] = []
        positions: list[int] = []
        pos = len(_LOG_HEADER)
        while pos + 8 <= len(data):
            size, crc = struct.unpack_from(">II", data, pos)
            end = pos + 8 + size
            if size < _BODY_FIXED or size > MAX_ENTRY_BYTES + _BODY_FIXED or end > len(data):
                break
            body = data[pos + 8 : end]
            if crc32c.crc32c(body) != crc:
                break
            term, index, kind = struct.unpack_from(">QQB", body)
            if entries and (index != entries[-1].index + 1 or term < entries[-1].term):
                break
            try:
                entry_kind = EntryKind(kind)
            except ValueError:
                break
            entries.append(Entry(term, index, body[_BODY_FIXED:], entry_kind))
            positions.append(pos)
            pos = end
        if pos != len(data):
            log.warning(
                "%s: truncating a torn tail of %d bytes at offset %d",
                self._path,
                len(data) - pos,
                pos,
            )
        snap = self.snapshot
        kept = [e for e in entries if e.index > snap.index]
        if kept and entries[0].index > snap.index + 1:
            raise StorageCorrupt(
                f"{self._path}: log starts at {entries[0].index}, snapshot ends at {snap.index}"
            )
        if kept and entries[0].index <= snap.index:
            at = [e for e in entries if e.index == snap.index]
            if not at or at[0].term != snap.term:
                log.warning("%s: log does not continue the snapshot, dropping it", self._path)
                kept = []
        if len(kept) == len(entries):
            self._fd = os.open(self._path, os.O_RDWR)
            if pos != len(data):
                os.ftruncate(self._fd, pos)
                os.fsync(self._fd)
            self._first = kept[0].index if kept else snap.index + 1
            self._positions = positions
            self._terms = [e.term for e in entries]
            self._end = pos
        else:
            self._rewrite(kept, encode_entries(kept))
        return kept

    def _rewrite(self, entries: Sequence[Entry], encoded: bytes) -> None:
        """Replace the log file by one holding exactly ``entries`` (``encoded``)."""
        first = entries[0].index if entries else self.snapshot.index + 1
        self._rewrite_raw(encoded, first, [e.term for e in entries])

    def _rewrite_raw(self, encoded: bytes, first: int, terms: list[int]) -> None:
        """Atomically replace the log file by the header and ``encoded`` frames, whose
        first entry is ``first`` and whose terms are ``terms``."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        write_atomically(self._path, _LOG_HEADER + encoded)
        self._fd = os.open(self._path, os.O_RDWR)
        self._positions = []
        offset = 0
        while offset < len(encoded):
            (size,) = struct.unpack_from(">I", encoded, offset)
            self._positions.append(len(_LOG_HEADER) + offset)
            offset += 8 + size
        assert len(self._positions) == len(terms)
        self._terms = terms
        self._first = first
        self._end = len(_LOG_HEADER) + len(encoded)

    # --- writes -------------------------------------------------------------------------

    @property
    def last_index(self) -> int:
        return self._first + len(self._positions) - 1

    def persist(
        self,
        *,
        snapshot: Snapshot | None = None,
        truncate_from: int | None = None,
        entries: Sequence[Entry] = (),
        hard_state: HardState | None = None,
    ) -> None:
        """Make a Ready's persistence durable, in order: snapshot, truncation, entries,
        hard state. One fsync covers all the entries."""
        if snapshot is not None:
            self._write_snapshot(snapshot)
        dirty = False
        if truncate_from is not None and truncate_from <= self.last_index:
            keep = max(truncate_from - self._first, 0)
            self._end = self._positions[keep] if keep < len(self._positions) else self._end
            del self._positions[keep:]
            del self._terms[keep:]
            os.ftruncate(self._fd, self._end)
            dirty = True
        if entries:
            if entries[0].index != self.last_index + 1:
                raise ValueError(
                    f"appending {entries[0].index} after {self.last_index}: not contiguous"
                )
            encoded = encode_entries(entries)
            pos = self._end
            for e in entries:
                self._positions.append(pos)
                self._terms.append(e.term)
                pos += _FRAME.size + len(e.payload)
            os.lseek(self._fd, self._end, os.SEEK_SET)
            write_all(self._fd, encoded)
            self._end = pos
            dirty = True
        if dirty:
            os.fsync(self._fd)
            self.fsyncs += 1
        if hard_state is not None:
            vote = -1 if hard_state.vote is None else hard_state.vote
            body = _STATE.pack(b"SLRH", 1, 0, hard_state.term, vote)
            write_atomically(
                self.directory / STATE_FILE, body + crc32c.crc32c(body).to_bytes(4, "big")
            )
            self.hard_state = hard_state
            self.fsyncs += 1

    def _write_snapshot(self, snap: Snapshot) -> None:
        head = _SNAP_HEAD.pack(b"SLRS", 1, 0, snap.index, snap.term, len(snap.data))
        crc = crc32c.crc32c(snap.data, crc32c.crc32c(head))
        write_atomically(self.directory / SNAPSHOT_FILE, head + snap.data + crc.to_bytes(4, "big"))
        self.snapshot = snap
        self.fsyncs += 1
        # Keep the entries after the snapshot only if they continue it.
        offset = snap.index - self._first
        continues = 0 <= offset < len(self._terms) and self._terms[offset] == snap.term
        if continues and offset + 1 < len(self._positions):
            start = self._positions[offset + 1]
            tail = os.pread(self._fd, self._end - start, start)
            self._rewrite_raw(tail, snap.index + 1, self._terms[offset + 1 :])
        else:
            self._rewrite_raw(b"", snap.index + 1, [])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
