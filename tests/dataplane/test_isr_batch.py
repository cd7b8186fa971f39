"""ISR changes asked for together commit together (found by the soak).

After a fault heals, a leader gets its followers back on dozens of partitions at once. Each
ISR change used to be its own AlterPartition and its own metadata commit, decided one after
the other under the controller's lock, so a restarted broker's registration (and every
other decision) queued behind all of them, and a partition under ``min.insync.replicas`` 2
waited for its turn to accept writes again. Now a leader sends every change of one ISR check
in one request, as Kafka's AlterPartitionManager does, and the controller checks each on its
own and commits the accepted ones as one metadata entry.

The member here is a real ClusterMember of a one-broker cluster, its own controller, with
its real Raft log."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from dataplane.cluster.image import MetadataImage
from dataplane.cluster.member import ClusterMember
from dataplane.cluster.topics import NewTopic
from dataplane.config import BrokerConfig
from wire.errors import FencedLeaderEpoch, InvalidUpdateVersion

NODE = 0
PARTITIONS = 6


def test_changes_of_one_request_commit_as_one_entry_and_refusals_stay_apart(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        config = BrokerConfig.build(
            data_dir=str(tmp_path), listen="127.0.0.1:0", overrides={"node.id": str(NODE)}
        )
        member = ClusterMember(config, MetadataImage(node_id=NODE, cluster_id="isr"), tmp_path)
        await member.start()
        try:
            await member.wait_registered(30)
            await member.create_topic(NewTopic("isr-batch", PARTITIONS, 1))
            states = [member.image.partition("isr-batch", p) for p in range(PARTITIONS)]
            assert all(s is not None for s in states)
            asked = [(s, [NODE]) for s in states if s is not None]
            stale, deposed = asked[1][0], asked[2][0]
            asked[1] = (
                dataclasses.replace(stale, partition_epoch=stale.partition_epoch - 1),
                [NODE],
            )
            asked[2] = (dataclasses.replace(deposed, leader_epoch=deposed.leader_epoch + 1), [NODE])
            before = member.raft.node.last_index
            outcomes = await member.alter_partitions(asked)
            after = member.raft.node.last_index
        finally:
            await member.stop()
        assert outcomes[0] is None
        assert all(x is None for x in outcomes[3:])
        assert isinstance(outcomes[1], InvalidUpdateVersion), outcomes[1]
        assert isinstance(outcomes[2], FencedLeaderEpoch), outcomes[2]
        assert after - before == 1, (
            f"{PARTITIONS - 2} accepted changes took {after - before} entries"
        )
        for p in range(PARTITIONS):
            now = member.image.partition("isr-batch", p)
            assert now is not None
            accepted = p not in (1, 2)
            original = states[p]
            assert original is not None
            assert now.partition_epoch == original.partition_epoch + int(accepted), (p, now)

    asyncio.run(run())
