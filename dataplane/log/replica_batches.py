"""The checks of batches a follower copies from its leader (``PartitionLog.append_replica``).

The checks of ``wire.record_batch.validate_batches`` that hold for any stored batch --
magic, lengths, CRC, codec -- and that offsets never go backwards; not the client-only
rules: a leader's log holds control batches and the empty batches compaction keeps.
Sans-io; imports only ``wire``.
"""

from __future__ import annotations

import crc32c

from wire.compression import CODEC_ZSTD
from wire.errors import (
    CorruptRecord,
    OffsetMismatch,
    UnsupportedCompression,
    UnsupportedMessageFormat,
)
from wire.record_batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
)


def replica_batches(view: memoryview, log_end_offset: int) -> list[BatchHeader]:
    """Headers of the complete batches of a fetch response's records, all checked; a
    trailing partial batch is left out. The first must start at or after
    ``log_end_offset`` and each after the one before (OffsetMismatch otherwise)."""
    headers: list[BatchHeader] = []
    position = 0
    end = len(view)
    expected = log_end_offset
    while end - position >= HEADER_SIZE:
        header = parse_header(view, position)
        if header.magic != 2:
            raise UnsupportedMessageFormat(
                f"record batch magic {header.magic} at byte {position} of replicated data"
            )
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecord(f"record batch length {header.batch_length} at byte {position}")
        if position + header.size > end:
            break  # a fetch response may end with a partial batch
        actual = crc32c.crc32c(view[position + CRC_START : position + header.size])
        if actual != header.crc:
            raise CorruptRecord(
                f"record batch CRC mismatch at offset {header.base_offset}: header says "
                f"{header.crc:#010x}, data gives {actual:#010x}"
            )
        if header.codec > CODEC_ZSTD:
            raise UnsupportedCompression(f"unknown compression codec {header.codec}")
        if header.last_offset_delta < 0 or header.record_count < 0:
            raise CorruptRecord(f"negative offset delta or count at offset {header.base_offset}")
        if header.base_offset < expected:
            raise OffsetMismatch(
                f"replicated batch at offset {header.base_offset} does not follow "
                f"{expected - 1} (log end offset {log_end_offset})"
            )
        headers.append(header)
        expected = header.next_offset
        position += header.size
    return headers
