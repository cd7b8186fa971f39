"""A broker fenced between its registration and the moment it replays it registers again
at once (found by the soak).

A restarted broker registered; the controller's answer reached it, but a one-way partition
held back its metadata log. The controller fenced it after one session timeout (a broker
does not heartbeat until it has replayed its registration: one that cannot replay does not
act on what it leads, and its leaderships must move). The broker then went on waiting for
an unfenced registration that could never come, for its full 30 s, and every partition
whose ISR was that broker alone stayed without a leader meanwhile. Now it gives up the wait
as soon as its image shows the registration fenced, and registers again.

The member here is a real ClusterMember with a real metadata image; its controller is an
address nobody listens on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dataplane.cluster import records as r
from dataplane.cluster.image import MetadataImage
from dataplane.cluster.member import ClusterMember
from dataplane.config import BrokerConfig
from tests.support.processes import free_port
from wire.errors import NotController, StaleBrokerEpoch

NODE = 1
EPOCH = 42


def member(tmp_path: Path) -> ClusterMember:
    controller = f"127.0.0.1:{free_port()}"
    settings = {
        "node.id": str(NODE),
        "controller.quorum.voters": f"2@{controller}",
        "controller.quorum.voter.listeners": f"2@127.0.0.1:{free_port()}",
        "controller.listener": f"127.0.0.1:{free_port()}",
    }
    config = BrokerConfig.build(data_dir=str(tmp_path), listen="127.0.0.1:0", overrides=settings)
    return ClusterMember(config, MetadataImage(node_id=NODE, cluster_id="registration"), tmp_path)


def replay(image: MetadataImage, index: int, *records: r.Record) -> None:
    image.apply(index, r.encode(list(records)))


def registration() -> r.RegisterBroker:
    return r.RegisterBroker(NODE, EPOCH, "127.0.0.1", 9092, "127.0.0.1", 9093, "incarnation")


def test_a_registration_fenced_before_it_is_replayed_is_given_up_at_once(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        m = member(tmp_path)
        waiting = asyncio.ensure_future(m._wait_applied(EPOCH))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        replay(m.image, EPOCH, registration())
        replay(m.image, EPOCH + 1, r.FenceBroker(NODE))
        with pytest.raises(StaleBrokerEpoch):
            await asyncio.wait_for(waiting, 5)  # before: 30 s, then TimeoutError
        await m.channels.close()

    asyncio.run(run())


def test_a_registration_replayed_unfenced_ends_the_wait(tmp_path: Path) -> None:
    async def run() -> None:
        m = member(tmp_path)
        waiting = asyncio.ensure_future(m._wait_applied(EPOCH))
        await asyncio.sleep(0.3)
        replay(m.image, EPOCH, registration())
        await asyncio.wait_for(waiting, 5)
        await m.channels.close()

    asyncio.run(run())


async def silent(voter: int, asked: dict[int, int]) -> asyncio.Server:
    """A voter's Kafka listener that reads requests and answers none (a paused process:
    the kernel accepts its connections); ``asked[voter]`` counts the reads."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            asked[voter] = asked.get(voter, 0) + 1
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_a_voter_asked_on_a_guess_that_never_answers_does_not_hold_the_request(
    tmp_path: Path,
) -> None:
    """A restarted broker knows no controller yet and asks the voters in turn. One that is
    paused accepts the connection (the kernel does) and never answers: it got the whole
    timeout of the request (5 s for a registration) before the next voter was asked. Now a
    guess gets one election timeout (500 ms), so within 3 s both silent voters are asked."""
    asked: dict[int, int] = {}

    async def run() -> None:
        servers = {v: await silent(v, asked) for v in (2, 3)}
        port = {v: s.sockets[0].getsockname()[1] for v, s in servers.items()}
        settings = {
            "node.id": str(NODE),
            "controller.quorum.voters": f"2@127.0.0.1:{free_port()},3@127.0.0.1:{free_port()}",
            "controller.quorum.voter.listeners": f"2@127.0.0.1:{port[2]},3@127.0.0.1:{port[3]}",
            "controller.listener": f"127.0.0.1:{free_port()}",
        }
        config = BrokerConfig.build(
            data_dir=str(tmp_path), listen="127.0.0.1:0", overrides=settings
        )
        m = ClusterMember(config, MetadataImage(node_id=NODE, cluster_id="guess"), tmp_path)
        assert m.controller_id == -1
        with pytest.raises(NotController, match="no controller answered within 3 s"):
            await m.send_to_controller(m._heartbeat_request(shut_down=False), timeout=3)
        await m.channels.close()
        for server in servers.values():
            server.close()

    asyncio.run(run())
    assert set(asked) == {2, 3}, asked


def test_a_voter_guessing_the_controller_does_not_ask_itself(tmp_path: Path) -> None:
    """A voter that knows no controller asks the other voters, never itself: were it the
    controller it would decide locally, and its own Kafka listener opens only once it is
    registered (the soak's start-up trails had every third guess refused by the broker
    itself). The trail names whom it asked, each with "?" for a guess."""
    asked: dict[int, int] = {}
    trail: list[str] = []

    async def run() -> None:
        servers = {v: await silent(v, asked) for v in (NODE, 2, 3)}
        port = {v: s.sockets[0].getsockname()[1] for v, s in servers.items()}
        own = f"127.0.0.1:{free_port()}"
        settings = {
            "node.id": str(NODE),
            "controller.quorum.voters": (
                f"{NODE}@{own},2@127.0.0.1:{free_port()},3@127.0.0.1:{free_port()}"
            ),
            "controller.quorum.voter.listeners": ",".join(f"{v}@127.0.0.1:{port[v]}" for v in port),
            "controller.listener": own,
        }
        config = BrokerConfig.build(
            data_dir=str(tmp_path), listen="127.0.0.1:0", overrides=settings
        )
        m = ClusterMember(config, MetadataImage(node_id=NODE, cluster_id="guess"), tmp_path)
        with pytest.raises(NotController):
            await m.send_to_controller(
                m._heartbeat_request(shut_down=False), timeout=2, trail=trail
            )
        await m.channels.close()
        for server in servers.values():
            server.close()

    asyncio.run(run())
    assert set(asked) == {2, 3}, asked
    assert {entry.split(":")[0] for entry in trail} == {"2?", "3?"}, trail
