"""Durable file writes shared by the partition log and the Raft storage."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte is written."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_atomically(path: Path, content: bytes, *, sync: bool = True) -> None:
    """Write, fsync, rename over ``path`` and fsync the directory. ``sync=False`` leaves
    out both fsyncs, for a file its reader rebuilds when a crash left it stale or empty:
    readers see the old content or the new, never a mix, and nothing waits on the disk."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, content)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)
