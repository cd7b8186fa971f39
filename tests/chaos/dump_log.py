"""Batch headers of a partition directory, for reading what a soak's brokers wrote:
``python -m tests.chaos.dump_log DIR [--from OFFSET] [--to OFFSET]`` prints offsets, leader
epoch, producer id, epoch and sequences of every batch in the range."""

from __future__ import annotations

import argparse
from pathlib import Path

from wire.record_batch import iter_headers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.dump_log")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--from", dest="start", type=int, default=0)
    parser.add_argument("--to", type=int, default=2**63 - 1)
    args = parser.parse_args(argv)
    print("base..last leader_epoch producer_id producer_epoch first_seq..last_seq attributes")
    for segment in sorted(args.directory.glob("*.log")):
        for h in iter_headers(segment.read_bytes()):
            last = h.base_offset + h.last_offset_delta
            if last < args.start or h.base_offset > args.to:
                continue
            print(
                f"{h.base_offset}..{last} e{h.leader_epoch} pid={h.producer_id} "
                f"pe={h.producer_epoch} "
                f"seq={h.base_sequence}..{h.base_sequence + h.last_offset_delta} "
                f"attrs={h.attributes:#x}  [{segment.name}]"
            )


if __name__ == "__main__":
    main()
