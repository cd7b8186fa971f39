"""This broker's place in its cluster: the metadata quorum, registration, heartbeats.

Every broker runs a Raft node for the metadata log: a voter if its id is in
``controller.quorum.voters`` (or, without that setting, the single voter of its own
cluster), otherwise a learner that the leader adds once the broker has registered. The
replayed log is the broker's ``MetadataImage``. Voters also carry a ``QuorumController``,
active while their node leads.

Requests for the controller (registration, heartbeats, ISR changes, producer-id blocks,
admin requests that change metadata) go to the active controller: called directly when it
is this broker, otherwise sent over the Kafka protocol to its Kafka listener (from
``controller.quorum.voter.listeners``), retried on NOT_CONTROLLER until a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.allocate_producer_ids.v0 import request as allocate_req
from kio.schema.alter_partition.v3 import request as alter_req
from kio.schema.broker_heartbeat.v1 import request as heartbeat_req
from kio.schema.broker_registration.v4 import request as register_req
from kio.schema.create_topics.v7 import request as create_req
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64, u16

from dataplane.cluster import records as r
from dataplane.cluster.controller import IsrChange, QuorumController
from dataplane.cluster.image import MetadataImage, PartitionState
from dataplane.cluster.topics import NewTopic, create_topic
from dataplane.raft.server import RaftServer, ServerConfig
from dataplane.raft.transport import LocalTransport, TcpTransport
from wire.client import Channels
from wire.errors import (
    BrokerError,
    InvalidConfig,
    NotController,
    StaleBrokerEpoch,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
    exception_for,
)
from wire.internal import RemoteLogMetadataRequest
from wire.sasl import SaslCredentials, load_credentials

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig

ENDPOINT_PREFIX = "ENDPOINT:"
"""BrokerRegistration listeners that carry a named Kafka listener's address."""
log = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"
Address = tuple[str, int]


def incarnation_id(configured: str) -> uuid.UUID:
    """This process's incarnation: ``broker.incarnation.id`` as its supervisor set it (so
    it can name this process to the controller once it exits), else a new random one."""
    if not configured:
        return uuid.uuid4()
    try:
        return uuid.UUID(configured)
    except ValueError as exc:
        raise InvalidConfig(
            f"broker.incarnation.id must be a UUID, got {configured!r}; leave it unset for a "
            "random one"
        ) from exc


class ControllerIsLocal(NotController):
    """The request is for this very broker: it became the active controller."""


def parse_endpoints(raw: str, key: str) -> dict[int, Address]:
    """``id@host:port,...`` -> {id: (host, port)}; InvalidConfig naming ``key``."""
    out: dict[int, Address] = {}
    for item in (x.strip() for x in raw.split(",")):
        if not item:
            continue
        ident, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not ident.isdigit() or not port.isdigit() or not host:
            raise InvalidConfig(f"{key}: expected id@host:port, got {item!r}")
        out[int(ident)] = (host, int(port))
    return out


def parse_address(raw: str, key: str) -> Address:
    host, colon, port = raw.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise InvalidConfig(f"{key}: expected host:port, got {raw!r}")
    return host, int(port)


def inter_broker_credentials(config: BrokerConfig) -> SaslCredentials | None:
    """``inter.broker.credentials.file`` read (None when unset); InvalidConfig when bad."""
    path = config.get_str("inter.broker.credentials.file")
    if not path:
        return None
    try:
        return load_credentials(path)
    except ValueError as exc:
        raise InvalidConfig(f"inter.broker.credentials.file: {exc}") from exc


class ClusterMember:
    def __init__(self, config: BrokerConfig, image: MetadataImage, data_dir: Path) -> None:
        self.config = config
        self.image = image
        self.node_id = image.node_id
        self.directory = data_dir / METADATA_DIR
        raw_voters = config.get_str("controller.quorum.voters")
        self.voters = parse_endpoints(raw_voters, "controller.quorum.voters")
        self.voter_listeners = parse_endpoints(
            config.get_str("controller.quorum.voter.listeners"), "controller.quorum.voter.listeners"
        )
        self.standalone = not self.voters
        if self.standalone:
            self.raft_address: Address = ("", 0)
        else:
            own = config.get_str("controller.listener")
            if not own:
                raise InvalidConfig("controller.listener is required with controller.quorum.voters")
            self.raft_address = parse_address(own, "controller.listener")
            if self.node_id in self.voters and self.voters[self.node_id] != self.raft_address:
                raise InvalidConfig(
                    f"controller.listener {own} differs from this broker's entry in "
                    "controller.quorum.voters"
                )
            missing = set(self.voters) - set(self.voter_listeners)
            if missing:
                raise InvalidConfig(
                    "controller.quorum.voter.listeners lacks the Kafka listener of voter(s) "
                    f"{sorted(missing)}"
                )
        self.is_voter = self.standalone or self.node_id in self.voters
        self.incarnation = incarnation_id(config.get_str("broker.incarnation.id"))
        self.epoch = -1
        """This broker's registration epoch; -1 until registered."""
        self._shut_down = False
        """The controlled shutdown began: the lifecycle stops (no heartbeat would unfence)."""
        self.raft: Any = None
        self.controller: QuorumController | None = None
        self.credentials = inter_broker_credentials(config)
        """What this broker authenticates with on other brokers' inter-broker listener."""
        self.channels = self.new_channels("")
        self._tasks: list[asyncio.Task[None]] = []
        self._registered = asyncio.Event()
        self.registration_marks: dict[str, float] = {}
        """When (time.monotonic()) the registration that succeeded was answered by the
        controller and replayed here: the start-up log line's split of its registration."""
        self.fatal = asyncio.Event()
        """Set when this broker can no longer take part in the cluster (its metadata log
        cannot be written or applied): the process halts (``dataplane.main``)."""
        self.failure: Exception | None = None
        self.advertised: Address = config.advertised
        self.endpoints: dict[str, list[Any]] = {}
        """Every Kafka listener's advertised [host, port] by name, registered with this
        broker (set by the broker from ``listeners``)."""

    def new_channels(self, purpose: str) -> Channels:
        """Channels to other brokers' inter-broker listeners, for one purpose (its client
        id's suffix): authenticated as this broker, stalled connections bounded."""
        suffix = f"-{purpose}" if purpose else ""
        return Channels(
            f"sluice-broker-{self.node_id}{suffix}",
            self.credentials,
            unacked_timeout_ms=self.config.get_int("inter.broker.unacked.timeout.ms"),
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        voters = [self.node_id] if self.standalone else sorted(self.voters)
        transport: Any
        if self.standalone:
            transport = LocalTransport(self.node_id)
        else:
            addresses = dict(self.voters)
            addresses[self.node_id] = self.raft_address
            secret = None if self.credentials is None else self.credentials.password.encode()
            transport = TcpTransport(
                self.node_id,
                addresses,
                secret=secret,
                unacked_timeout_ms=self.config.get_int("controller.quorum.request.timeout.ms"),
            )
        self.raft = RaftServer(
            self.node_id,
            voters,
            self.directory,
            self.image,
            transport,
            config=ServerConfig(
                election_ticks=max(
                    2,
                    self.config.get_int("controller.quorum.election.timeout.ms")
                    // int(ServerConfig.tick_ms),
                )
            ),
            on_state_change=self._on_raft_change,
            on_failure=self._on_raft_failure,
        )
        if self.is_voter:
            self.controller = QuorumController(self.image, self.raft, self.config)
        self.image.listeners.append(self._on_metadata)
        await self.raft.start()
        self._tasks.append(asyncio.get_running_loop().create_task(self._lifecycle()))

    def _on_raft_failure(self, exc: Exception) -> None:
        self.failure = exc
        self.fatal.set()

    async def wait_registered(self, timeout: float | None = None) -> None:
        """Until this broker is registered and its image holds its own registration."""
        await asyncio.wait_for(self._registered.wait(), timeout)

    async def shut_down_gracefully(self, timeout: float = 5.0) -> None:
        """Controlled shutdown, as Kafka's: have the controller fence this broker now (its
        leaderships move at once instead of after a session timeout) and hand the Raft
        leadership to another voter. Best effort: a failure only delays the failover. Once
        per process: later calls return at once."""
        if self.standalone or self.epoch < 0 or self._shut_down:
            return
        self._shut_down = True
        live = [b for b in self.image.live_brokers() if b.broker_id != self.node_id]
        if not live:
            return
        try:
            await self._fence_self(timeout)
            await self._until_fenced_here(timeout)
            if self.raft is not None and self.raft.is_leader:
                others = [v for v in self.voters if v != self.node_id]
                alive = {b.broker_id for b in live}
                target = next((v for v in others if v in alive), None)
                if target is not None:
                    await self.raft.transfer_leadership(target, timeout=timeout)
            log.info("broker %d: controlled shutdown done", self.node_id)
        except (BrokerError, OSError, TimeoutError) as exc:
            log.warning("broker %d: controlled shutdown incomplete: %s", self.node_id, exc)

    async def _fence_self(self, timeout: float) -> None:
        local = self.local_controller()
        if local is None:
            try:
                await self.send_to_controller(
                    self._heartbeat_request(shut_down=True), timeout=timeout
                )
                return
            except ControllerIsLocal:
                local = self.local_controller()
        if local is not None:
            await asyncio.wait_for(local.fence(self.node_id, "controlled shutdown"), timeout)

    async def _until_fenced_here(self, timeout: float) -> None:
        """Until this broker's own image shows it fenced: its partitions have moved here too,
        so what it still answers before its listener closes names the new leaders."""

        def fenced() -> bool:
            mine = self.image.brokers.get(self.node_id)
            return mine is None or mine.fenced

        await self._until_image(fenced, timeout)

    async def _until_image(self, holds: Callable[[], bool], timeout: float) -> None:
        """Until ``holds()`` is true of this broker's image, checked now and after each
        metadata delta it applies; TimeoutError after ``timeout`` seconds."""
        if holds():
            return
        done = asyncio.Event()

        def seen(_delta: Any) -> None:
            if holds():
                done.set()

        self.image.listeners.append(seen)
        try:
            await asyncio.wait_for(done.wait(), timeout)
        finally:
            self.image.listeners.remove(seen)

    def _heartbeat_request(self, *, shut_down: bool) -> Any:
        """This broker's BrokerHeartbeat; ``shut_down``: a controlled shutdown's (fence me)."""
        return heartbeat_req.BrokerHeartbeatRequest(
            broker_id=BrokerId(self.node_id),
            broker_epoch=i64(self.epoch),
            current_metadata_offset=i64(self.image.applied_index),
            want_fence=shut_down,
            want_shut_down=shut_down,
            offline_log_dirs=(),
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self.controller is not None:
            await self.controller.stop()
        await self.channels.close()
        if self.raft is not None:
            await self.raft.close()

    def _on_raft_change(self) -> None:
        if self.controller is not None:
            self.controller.on_raft_change()

    def _on_metadata(self, delta: Any) -> None:
        if self.standalone or self.raft is None:
            return
        if delta.restored or delta.brokers:
            learners = {
                b.broker_id: (b.raft_host, b.raft_port)
                for b in self.image.brokers.values()
                if b.broker_id not in self.voters
            }
            self.raft.set_learners(learners)

    # ------------------------------------------------------------------ controller access

    @property
    def controller_id(self) -> int:
        """The active controller's id as this broker knows it (-1 if none)."""
        leader = None if self.raft is None else self.raft.leader_id
        return -1 if leader is None else int(leader)

    def controller_gone(self, broker_id: int, incarnation: str) -> bool:
        """The supervisor saw the process of ``broker_id`` (``incarnation``) exit: if it
        was the active controller as this voter knows it, campaign now rather than after an
        election timeout (``RaftNode.leader_gone``). True if this broker campaigns."""
        info = self.image.brokers.get(broker_id)
        if self.raft is None or info is None or info.incarnation != incarnation:
            return False  # a restarted broker's new registration: its process is not gone
        if self.controller_id != broker_id or not self.raft.leader_gone(broker_id):
            return False
        log.info("controller %d exited (its supervisor says): campaigning now", broker_id)
        return True

    def local_controller(self) -> QuorumController | None:
        c = self.controller
        return c if c is not None and self.raft.is_leader else None

    def _controller_channel(self, attempt: int) -> tuple[int, Any, bool]:
        """The active controller's id and channel, or a voter's in turn while none is
        known (then True: a guess)."""
        leader = self.controller_id
        guess = leader < 0 or leader not in self.voter_listeners
        if guess:
            # not this broker: were it the controller, local_controller() would say so,
            # and its own listener opens only once it is registered
            ids = sorted(v for v in self.voter_listeners if v != self.node_id)
            if not ids:
                raise NotController("no controller is known yet")
            leader = ids[attempt % len(ids)]
        host, port = self.voter_listeners[leader]
        return leader, self.channels.get("controller", host, port), guess

    async def send_to_controller(
        self, request: Any, timeout: float = 10.0, trail: list[str] | None = None
    ) -> Any:
        """Send a Kafka request to the active controller; retried until ``timeout`` while
        the answer is NOT_CONTROLLER or the controller cannot be reached. ``trail``, when
        given, gets a line per attempt (whom it asked, "?" for a guess, what came back
        and when): the registration logs it, as what a slow start waited for.

        A voter asked on a guess (no controller known yet, as after a restart) gets one
        election timeout to answer: a live one that is not the controller says so at once,
        while a paused or cut-off one would hold the request, and the broker's registration,
        for all of ``timeout`` (the soak's restarted brokers waited a median 0.9 s for
        their registration's answer after a controller was active)."""
        start = time.monotonic()
        deadline = start + timeout
        guess_s = self.config.get_seconds("controller.quorum.election.timeout.ms")
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            if self.local_controller() is not None:
                raise ControllerIsLocal(f"broker {self.node_id} is the controller now")
            asked = "none"
            try:
                voter, channel, guess = self._controller_channel(attempt)
                asked = f"{voter}{'?' if guess else ''}"
                wait = min(remaining, guess_s) if guess else remaining
                response = await channel.request(request, timeout=max(0.1, wait))
                code = getattr(response, "error_code", ErrorCode.none)
                if trail is not None:
                    trail.append(f"{asked}:{code.name}@{time.monotonic() - start:.2f}")
                if code != ErrorCode.not_controller:
                    return response
            except (OSError, TimeoutError, NotController) as exc:
                if trail is not None:
                    trail.append(f"{asked}:{type(exc).__name__}@{time.monotonic() - start:.2f}")
                if time.monotonic() >= deadline:
                    raise NotController(
                        f"no controller answered within {timeout:.0f} s: {exc}"
                    ) from exc
            if time.monotonic() >= deadline:
                return response
            await asyncio.sleep(0.05 if attempt < 10 else 0.2)

    # ------------------------------------------------------------------ topics

    async def create_topic(self, topic: NewTopic, timeout: float = 30.0) -> bool:
        """Create ``topic`` through the active controller — decided here when this broker
        is it, else sent as a CreateTopics request — and wait until this broker's image
        holds it. True if created, False if it existed; raises the creation's error."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                created = await self._create_topic_once(topic, deadline - time.monotonic())
                break
            except NotController:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.05)
        while topic.name not in self.image.topics:
            if time.monotonic() >= deadline:
                raise NotController(f"topic {topic.name} not in this broker's metadata yet")
            await asyncio.sleep(0.01)
        return created

    async def _create_topic_once(self, topic: NewTopic, timeout: float) -> bool:
        local = self.local_controller()
        if local is not None:
            try:
                await local.decide(lambda changes: create_topic(changes, self.config, topic))
            except TopicAlreadyExists:
                return False
            return True
        try:
            response = await self.send_to_controller(_create_topics_request(topic), timeout)
        except ControllerIsLocal:
            return await self._create_topic_once(topic, timeout)
        (result,) = response.topics
        if result.error_code == ErrorCode.topic_already_exists:
            return False
        if result.error_code != ErrorCode.none:
            raise exception_for(result.error_code, result.error_message or "")
        return True

    # ------------------------------------------------------------------ producer ids

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """A block of producer ids committed for this broker: (first id, length)."""
        if self.epoch < 0:
            raise NotController(f"broker {self.node_id} is not registered yet")
        local = self.local_controller()
        if local is not None:
            return await local.allocate_producer_ids(self.node_id, self.epoch)
        try:
            response = await self.send_to_controller(
                allocate_req.AllocateProducerIdsRequest(
                    broker_id=BrokerId(self.node_id), broker_epoch=i64(self.epoch)
                ),
                timeout=5,
            )
        except ControllerIsLocal:
            return await self.allocate_producer_ids()
        if response.error_code != ErrorCode.none:
            raise exception_for(
                response.error_code, f"AllocateProducerIds: {response.error_code.name}"
            )
        return int(response.producer_id_start), int(response.producer_id_len)

    # ------------------------------------------------------------------ remote tier

    async def commit_remote(self, state: PartitionState, records: list[r.Record]) -> None:
        """Have the controller commit remote-tier records for a partition this broker leads
        (at ``state.leader_epoch``); returns once they are in the metadata log. Raises the
        controller's refusal (FencedLeaderEpoch when leadership moved) or NotController."""
        local = self.local_controller()
        if local is not None:
            await local.commit_remote(
                self.node_id, state.topic, state.partition, state.leader_epoch, records
            )
            return
        try:
            response = await self.send_to_controller(
                RemoteLogMetadataRequest(
                    broker_id=i32(self.node_id),
                    broker_epoch=i64(self.epoch),
                    topic=state.topic,
                    partition=i32(state.partition),
                    leader_epoch=i32(state.leader_epoch),
                    records=r.encode(records),
                ),
                timeout=10,
            )
        except ControllerIsLocal:
            await self.commit_remote(state, records)
            return
        if response.error_code != ErrorCode.none:
            raise exception_for(response.error_code, response.error_message or "")
        await self.wait_applied(int(response.metadata_offset), timeout=10)

    async def wait_applied(self, index: int, timeout: float) -> None:
        """Until this broker's image has applied metadata log entry ``index`` (an entry the
        controller committed); NotController if it does not within ``timeout``."""
        try:
            await self._until_image(lambda: self.image.applied_index >= index, timeout)
        except TimeoutError:
            raise NotController(
                f"metadata entry {index} not replayed here within {timeout:.0f} s; retry"
            ) from None

    # ------------------------------------------------------------------ registration

    async def _lifecycle(self) -> None:
        interval = self.config.get_seconds("broker.heartbeat.interval.ms")
        while True:
            try:
                if self._shut_down:
                    pass  # fenced for good: neither registering again nor heartbeating
                elif self.epoch < 0:
                    await self._register()
                else:
                    await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except (BrokerError, OSError, TimeoutError) as exc:
                log.debug("broker %d lifecycle: %s", self.node_id, exc)
            except Exception:
                log.exception("broker %d lifecycle", self.node_id)
            await asyncio.sleep(interval if self.epoch >= 0 else min(interval, 0.1))

    async def _register(self) -> None:
        started = time.monotonic()
        trail: list[str] = []
        host, port = self.advertised
        raft_host, raft_port = self.raft_address
        local = self.local_controller()
        if local is not None:
            epoch = await local.register(
                self.node_id,
                host,
                port,
                raft_host,
                raft_port,
                str(self.incarnation),
                self.endpoints,
            )
        else:
            response = await self._send_registration(trail, started, host, port)
            if response.error_code != ErrorCode.none:
                raise NotController(f"registration refused: {response.error_code.name}")
            epoch = int(response.broker_epoch)
        self.registration_marks["registration answered"] = time.monotonic()
        await self._wait_applied(epoch)
        self.registration_marks["registration replayed"] = time.monotonic()
        self.epoch = epoch
        self._registered.set()
        log.info(
            "broker %d registered (epoch %d) in %.2f s; asked (controller:answer@s): %s",
            self.node_id,
            epoch,
            time.monotonic() - started,
            " ".join(trail[-8:]) or "itself",
        )

    async def _send_registration(
        self, trail: list[str], started: float, host: str, port: int
    ) -> Any:
        raft_host, raft_port = self.raft_address
        try:
            return await self.send_to_controller(
                register_req.BrokerRegistrationRequest(
                    broker_id=BrokerId(self.node_id),
                    cluster_id=self.image.cluster_id,
                    incarnation_id=self.incarnation,
                    listeners=(
                        register_req.Listener(
                            name="PLAINTEXT", host=host, port=u16(port), security_protocol=i16(0)
                        ),
                        register_req.Listener(
                            name="CONTROLLER",
                            host=raft_host,
                            port=u16(raft_port),
                            security_protocol=i16(0),
                        ),
                        # every named listener, as ENDPOINT:<name> (Sluice's convention
                        # between its brokers: "PLAINTEXT" above is the --listen address)
                        *(
                            register_req.Listener(
                                name=f"{ENDPOINT_PREFIX}{name}",
                                host=str(address[0]),
                                port=u16(int(address[1])),
                                security_protocol=i16(0),
                            )
                            for name, address in self.endpoints.items()
                        ),
                    ),
                    features=(),
                    rack=None,
                    is_migrating_zk_broker=False,
                    log_dirs=(),
                    previous_broker_epoch=i64(self.epoch),
                ),
                timeout=5,
                trail=trail,
            )
        except NotController:
            log.info(
                "broker %d: no registration answer in %.2f s; asked (controller:answer@s): %s",
                self.node_id,
                time.monotonic() - started,
                " ".join(trail[-8:]),
            )
            raise

    async def _wait_applied(self, epoch: int) -> None:
        """Until this broker's image holds its registration of ``epoch``. No heartbeats
        meanwhile: a broker that cannot replay the metadata log does not act on what it
        leads, so the controller must fence it after a session timeout and move its
        leaderships (Kafka keeps such a broker fenced). Once the image shows the
        registration fenced: StaleBrokerEpoch, and the lifecycle registers again at once
        (it used to wait out the full 30 s for an unfenced registration that could not
        come)."""
        deadline = time.monotonic() + 30
        while True:
            mine = self.image.brokers.get(self.node_id)
            if mine is not None and mine.epoch >= epoch:
                if not mine.fenced:
                    return
                log.warning(
                    "broker %d was fenced before it replayed its registration (epoch %d); "
                    "registering again",
                    self.node_id,
                    epoch,
                )
                raise StaleBrokerEpoch(f"broker {self.node_id} was fenced after registering")
            if time.monotonic() > deadline:
                raise TimeoutError("the metadata log did not reach this broker's registration")
            await asyncio.sleep(0.02)

    async def _heartbeat(self) -> None:
        local = self.local_controller()
        try:
            if local is not None and local.active:
                fenced = local.heartbeat(self.node_id, self.epoch)
            else:
                response = await self.send_to_controller(
                    self._heartbeat_request(shut_down=False), timeout=2
                )
                if response.error_code == ErrorCode.stale_broker_epoch:
                    raise StaleBrokerEpoch("stale broker epoch")
                fenced = bool(response.is_fenced)
        except StaleBrokerEpoch:
            fenced = True
        if fenced:
            log.warning("broker %d is fenced; registering again", self.node_id)
            self.epoch = -1

    # ------------------------------------------------------------------ partition changes

    async def alter_partitions(
        self, asked: Sequence[tuple[PartitionState, Sequence[int]]]
    ) -> list[BrokerError | None]:
        """Ask the controller to set the ISRs of partitions this broker leads, all in one
        AlterPartition (one commit): each one's refusal, or None, in the order asked.
        Raises when the request as a whole fails (NotController)."""
        changes = [
            IsrChange(s.topic, s.partition, s.leader_epoch, s.partition_epoch, tuple(isr))
            for s, isr in asked
        ]
        local = self.local_controller()
        if local is not None:
            decided = await local.alter_partitions(self.node_id, changes)
            return [x if isinstance(x, BrokerError) else None for x in decided]
        by_topic: dict[str, list[IsrChange]] = {}
        ids = {}
        for change in changes:
            if (info := self.image.topics.get(change.topic)) is not None:  # else deleted
                by_topic.setdefault(change.topic, []).append(change)
                ids[change.topic] = info.topic_id
        if not by_topic:
            return [UnknownTopicOrPartition(f"{c.topic} was deleted") for c in changes]
        response = await self.send_to_controller(
            alter_req.AlterPartitionRequest(
                broker_id=BrokerId(self.node_id),
                broker_epoch=i64(self.epoch),
                topics=tuple(
                    alter_req.TopicData(
                        topic_id=ids[name],
                        partitions=tuple(_partition_data(c) for c in topic_changes),
                    )
                    for name, topic_changes in by_topic.items()
                ),
            ),
            timeout=5,
        )
        if response.error_code != ErrorCode.none:
            raise NotController(f"AlterPartition: {response.error_code.name}")
        codes = {
            (topic.topic_id, int(part.partition_index)): ErrorCode(part.error_code)
            for topic in response.topics
            for part in topic.partitions
        }
        outcomes: list[BrokerError | None] = []
        for change in changes:
            topic_id = ids.get(change.topic)
            code = (
                ErrorCode.unknown_topic_or_partition
                if topic_id is None
                else codes.get((topic_id, change.partition), ErrorCode.unknown_server_error)
            )
            outcomes.append(
                None
                if code == ErrorCode.none
                else exception_for(code, f"ISR change refused: {code.name}")
            )
        return outcomes


def _partition_data(change: IsrChange) -> alter_req.PartitionData:
    return alter_req.PartitionData(
        partition_index=i32(change.partition),
        leader_epoch=i32(change.leader_epoch),
        new_isr_with_epochs=tuple(
            alter_req.BrokerState(broker_id=BrokerId(b), broker_epoch=i64(-1)) for b in change.isr
        ),
        leader_recovery_state=i8(0),
        partition_epoch=i32(change.partition_epoch),
    )


def _create_topics_request(topic: NewTopic) -> create_req.CreateTopicsRequest:
    return create_req.CreateTopicsRequest(
        topics=(
            create_req.CreatableTopic(
                name=TopicName(topic.name),
                num_partitions=i32(topic.partitions),
                replication_factor=i16(topic.replication_factor),
                assignments=tuple(
                    create_req.CreatableReplicaAssignment(
                        partition_index=i32(index), broker_ids=tuple(BrokerId(b) for b in ids)
                    )
                    for index, ids in topic.assignment
                ),
                configs=tuple(
                    create_req.CreatableTopicConfig(name=k, value=v)
                    for k, v in topic.configs.items()
                ),
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        validate_only=False,
    )
