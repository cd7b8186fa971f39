"""The leader's view of one partition: the high watermark follows the ISR, and while an ISR
change is in flight it waits for every replica of the "maximal" ISR (KIP-497), so that a
follower the controller may add, and then elect, never lacks an acknowledged record."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dataplane.cluster.image import PartitionState
from dataplane.log.leader_epochs import CHECKPOINT_FILE
from dataplane.replication.partition import Partition
from tests.dataplane.test_log_partition import fill
from tests.dataplane.test_log_replication import open_named
from wire.errors import NotLeaderOrFollower, OffsetNotAvailable


def state(isr: tuple[int, ...], partition_epoch: int = 0) -> PartitionState:
    return PartitionState("t", 0, (1, 2, 3), isr, 1, 0, partition_epoch)


def leader(tmp_path: Path, isr: tuple[int, ...]) -> Partition:
    part = Partition(open_named(tmp_path), node_id=1)
    part.become_leader(state(isr))
    fill(part.plog, 10)
    return part


def test_high_watermark_is_the_smallest_end_of_the_isr(tmp_path: Path) -> None:
    part = leader(tmp_path, (1, 2))
    part.record_follower_fetch(3, 0, 1.0)  # outside the ISR: does not hold the HW back
    part.record_follower_fetch(2, 7, 1.0)
    assert part.plog.high_watermark == 7
    part.record_follower_fetch(2, 10, 1.0)
    assert part.plog.high_watermark == 10


def test_a_follower_being_added_holds_the_high_watermark(tmp_path: Path) -> None:
    part = leader(tmp_path, (1, 2))
    part.record_follower_fetch(2, 4, 1.0)
    part.record_follower_fetch(3, 4, 1.0)
    assert part.isr_to_expand() == [3], "caught up to the high watermark (4)"
    part.ask_isr([1, 2, 3])
    part.record_follower_fetch(2, 10, 1.0)
    assert part.plog.high_watermark == 4, "broker 3 may be in the ISR the controller commits"
    part.record_follower_fetch(3, 8, 1.0)
    assert part.plog.high_watermark == 8

    part.become_leader(state((1, 2, 3), partition_epoch=1))  # the change committed
    assert part.pending_isr == ()
    part.record_follower_fetch(3, 10, 1.0)
    assert part.plog.high_watermark == 10


def test_a_refused_change_releases_the_high_watermark(tmp_path: Path) -> None:
    part = leader(tmp_path, (1, 2))
    part.record_follower_fetch(3, 0, 1.0)
    part.ask_isr([1, 2, 3])
    part.record_follower_fetch(2, 10, 1.0)
    assert part.plog.high_watermark == 0
    part.isr_request_failed()
    assert part.plog.high_watermark == 10


def test_a_follower_being_removed_counts_until_the_removal_commits(tmp_path: Path) -> None:
    part = leader(tmp_path, (1, 2, 3))
    part.record_follower_fetch(2, 10, 1.0)
    part.record_follower_fetch(3, 5, 1.0)
    part.ask_isr([1, 2])
    part.record_follower_fetch(2, 10, 1.0)
    assert part.plog.high_watermark == 5, "broker 3 is still in the committed ISR"
    part.become_leader(state((1, 2), partition_epoch=1))
    assert part.plog.high_watermark == 10


def test_a_new_leader_does_not_know_its_high_watermark_until_the_followers_fetch(
    tmp_path: Path,
) -> None:
    """KIP-207: a follower learns the high watermark one fetch late, so a new leader's may be
    below records the previous leader acknowledged; until it reaches the start of the new
    epoch it is unknown (ListOffsets answers OFFSET_NOT_AVAILABLE, a retriable error)."""
    part = Partition(open_named(tmp_path), node_id=1)
    part.become_follower(PartitionState("t", 0, (1, 2, 3), (1, 2, 3), 2, 0, 0))
    fill(part.plog, 10)
    part.plog.advance_high_watermark(8)  # the last fetch answer said 8
    part.become_leader(PartitionState("t", 0, (1, 2, 3), (1, 3), 1, 1, 1))
    assert part.epoch_start_offset == 10
    assert not part.high_watermark_known
    with pytest.raises(OffsetNotAvailable, match="behind the start of leader epoch 1"):
        part.check_high_watermark_known()
    part.record_follower_fetch(3, 10, 1.0)
    assert part.plog.high_watermark == 10
    assert part.high_watermark_known
    part.check_high_watermark_known()


def test_a_term_the_log_cannot_record_is_not_led_at_all(tmp_path: Path) -> None:
    """Found by the soak: a replica elected leader on a full disk failed to write its
    leader-epoch checkpoint half way through taking the role, yet stayed leader with its
    previous term's followers, took writes at the new epoch and acknowledged records its
    followers did not have. A term now starts whole or not at all."""
    part = leader(tmp_path, (1, 2))
    part.record_follower_fetch(2, 10, 1.0)
    assert part.plog.high_watermark == 10
    part.become_follower(state((1, 2)))
    blocker = part.plog.directory / (CHECKPOINT_FILE + ".tmp")
    blocker.mkdir()  # the checkpoint cannot be written (as on a full disk)
    new_term = dataclasses.replace(state((1, 2)), leader_epoch=1)
    with pytest.raises(OSError):
        part.become_leader(new_term)
    assert not part.is_leader
    with pytest.raises(NotLeaderOrFollower):
        part.check_leader(-1)
    blocker.rmdir()
    part.become_leader(new_term)  # the replica manager's retry
    assert part.is_leader
    assert part.state == new_term
    assert part.plog.end_offset_for_epoch(1)[0] == 1
