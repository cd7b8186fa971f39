"""Where transform modules live: the internal topic ``__sluice_transform_modules``.

A module is stored as one record, key = its SHA-256 (hex), value = the WebAssembly bytes,
in a compacted one-partition topic replicated to min(3, live brokers) brokers, as
Redpanda keeps its binaries in an internal topic. So a module survives broker restarts,
failover and scaling without an object store, and the metadata log (whose entries every
broker replays and snapshots) carries only the definition and the hash.

A broker that runs a transform reads the module from the topic's leader (Fetch, like any
consumer) once and keeps it in ``DATA_DIR/.transform-modules/<sha256>.wasm``, checked
against its hash on every load.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
from pathlib import Path

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from dataplane import clock
from dataplane.cluster.image import MetadataImage
from dataplane.cluster.member import ClusterMember
from dataplane.cluster.topics import NewTopic
from dataplane.durable import write_atomically
from dataplane.transforms.producer import OutputProducer
from wire.client import Channels
from wire.errors import BrokerError
from wire.record_batch import Record, decode_records, iter_headers

log = logging.getLogger(__name__)

MODULES_TOPIC = "__sluice_transform_modules"
CACHE_DIR = ".transform-modules"
RECORD_OVERHEAD = 1 << 20
"""Room above the largest module in the topic's max.message.bytes."""


class ModuleUnavailable(BrokerError):
    """The module of a transform cannot be read (yet); the runner retries."""


def module_hash(module: bytes) -> str:
    return hashlib.sha256(module).hexdigest()


class ModuleStore:
    def __init__(
        self,
        data_dir: Path,
        image: MetadataImage,
        cluster: ClusterMember,
        channels: Channels,
        *,
        max_bytes: int,
        timeout_s: float,
    ) -> None:
        self.cache = data_dir / CACHE_DIR
        self.image = image
        self.cluster = cluster
        self.channels = channels
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def ensure_topic(self) -> None:
        if MODULES_TOPIC in self.image.topics:
            return
        factor = min(3, max(1, len(self.image.live_brokers())))
        await self.cluster.create_topic(
            NewTopic(
                MODULES_TOPIC,
                1,
                factor,
                {
                    "cleanup.policy": "compact",
                    "max.message.bytes": str(self.max_bytes + RECORD_OVERHEAD),
                    "min.insync.replicas": str(min(2, factor)),
                },
            )
        )

    async def store(self, module: bytes, producer: OutputProducer) -> str:
        """Write ``module`` to the topic (acknowledged by its ISR); its hash."""
        digest = module_hash(module)
        await self.ensure_topic()
        now = clock.now_ms()
        await producer.send_records(MODULES_TOPIC, 0, [Record(0, now, digest.encode(), module)])
        self._keep(digest, module)
        return digest

    async def load(self, digest: str) -> bytes:
        """The module with hash ``digest``: from the local copy, else from the topic."""
        path = self.cache / f"{digest}.wasm"
        try:
            module = path.read_bytes()
            if module_hash(module) == digest:
                return module
            log.warning("%s does not match its hash; reading it again", path)
        except FileNotFoundError:
            pass
        module = await self._fetch(digest)
        self._keep(digest, module)
        return module

    def _keep(self, digest: str, module: bytes) -> None:
        self.cache.mkdir(parents=True, exist_ok=True)
        write_atomically(self.cache / f"{digest}.wasm", module)

    async def _fetch(self, digest: str) -> bytes:
        """Read the topic from its start and take the last record with ``digest``."""
        state = self.image.partition(MODULES_TOPIC, 0)
        leader = None if state is None else self.image.brokers.get(state.leader)
        if state is None or leader is None or leader.fenced:
            raise ModuleUnavailable(f"{MODULES_TOPIC} has no leader")
        channel = self.channels.get("transform-modules", leader.host, leader.port)
        key = digest.encode()
        found: bytes | None = None
        offset = 0
        while True:
            request = fetch_req.FetchRequest(
                replica_id=BrokerId(-1),
                max_wait=i32Timedelta.parse(datetime.timedelta(0)),
                min_bytes=i32(0),
                max_bytes=i32(self.max_bytes + RECORD_OVERHEAD),
                topics=(
                    fetch_req.FetchTopic(
                        topic=TopicName(MODULES_TOPIC),
                        partitions=(
                            fetch_req.FetchPartition(
                                partition=i32(0),
                                current_leader_epoch=i32(state.leader_epoch),
                                fetch_offset=i64(offset),
                                log_start_offset=i64(-1),
                                partition_max_bytes=i32(self.max_bytes + RECORD_OVERHEAD),
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
            try:
                response = await channel.request(request, self.timeout_s)
            except (OSError, TimeoutError) as exc:
                raise ModuleUnavailable(f"reading {MODULES_TOPIC}: {exc}") from exc
            part = response.responses[0].partitions[0]
            if part.error_code != ErrorCode.none:
                raise ModuleUnavailable(f"reading {MODULES_TOPIC}: {part.error_code.name}")
            data = bytes(part.records or b"")
            headers = list(iter_headers(data))
            for header in headers:
                batch = data[header.position : header.position + header.size]
                for rec in decode_records(batch):
                    if rec.key == key and rec.value is not None:
                        found = rec.value
                offset = header.last_offset + 1
            if not headers or offset >= part.high_watermark:
                break
        if found is None or module_hash(found) != digest:
            raise ModuleUnavailable(f"module {digest[:12]} is not in {MODULES_TOPIC}")
        return found
