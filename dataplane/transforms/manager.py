"""Which transforms run on this broker: one runner per (transform, input partition) this
broker leads, reconciled to the metadata image after every change.

A runner starts when this broker becomes the leader of an input partition of a deployed,
unpaused transform, and stops when it stops leading it, when the transform is paused,
redeployed (a new ``deployed`` version starts a new runner from the committed offset) or
deleted. A runner that FAILED stays failed — its error shown by describe — until the
transform is resumed (``resumed`` bumped) or redeployed.

Modules are read once per broker (``ModuleStore``) and compiled once per module (the
engine's ``Runtime``, off the event loop); each runner gets its own instance, on its own
thread. Guest log lines go to ``_sluice.transform_logs``, keyed by the transform's name.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dataplane import clock
from dataplane.cluster import records as r
from dataplane.cluster.image import Delta, MetadataImage
from dataplane.cluster.member import ClusterMember
from dataplane.cluster.producer_ids import ProducerIdManager
from dataplane.cluster.topics import NewTopic
from dataplane.config import BrokerConfig
from dataplane.config.transform_table import ENGINE_KEYS
from dataplane.metering.meter import Meter
from dataplane.replication.manager import ReplicaManager
from dataplane.transforms.modules import ModuleStore
from dataplane.transforms.producer import OutputProducer, ProduceFailed
from dataplane.transforms.progress import Progress
from dataplane.transforms.runner import Instance, Runner, RunnerContext, RunnerState
from transforms import Limits, TransformSpec, validate_module
from wire.record_batch import Record

if TYPE_CHECKING:
    from transforms import CompiledModule, Runtime

log = logging.getLogger(__name__)

LOGS_TOPIC = "_sluice.transform_logs"


class TransformManager:
    def __init__(
        self,
        config: BrokerConfig,
        image: MetadataImage,
        cluster: ClusterMember,
        replicas: ReplicaManager,
        producer_ids: ProducerIdManager,
    ) -> None:
        self.config = config
        self.image = image
        self.cluster = cluster
        self.replicas = replicas
        self.producer_ids = producer_ids
        self.enabled = config.get_bool("transforms.enable")
        self.channels = cluster.new_channels("transforms")
        timeout = config.get_seconds("transforms.produce.timeout.ms")
        self.limits = Limits.from_config({k: config.get_int(k) for k in ENGINE_KEYS})
        self.modules = ModuleStore(
            Path(config.data_dir),
            image,
            cluster,
            self.channels,
            max_bytes=self.limits.module_max_bytes,
            timeout_s=timeout,
        )
        self.progress = Progress(image, self.channels, timeout)
        self.runtime: Runtime | None = None
        self._compiled: dict[str, CompiledModule] = {}
        self._compiling: dict[str, asyncio.Task[CompiledModule]] = {}
        self.runners: dict[tuple[str, int], tuple[tuple[int, int], Runner]] = {}
        """(transform, partition) -> ((deployed, resumed) it runs, runner)."""
        self._logs_producer: OutputProducer | None = None
        self.meter: Meter | None = None
        """Usage metering of guest calls (set by the broker)."""
        self.active = False
        self._reconciling = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.active = True
        self.reconcile()

    async def stop(self) -> None:
        self.active = False
        runners = [runner for _, runner in self.runners.values()]
        self.runners.clear()
        for runner in runners:
            await runner.stop()
        for task in self._compiling.values():
            task.cancel()
        await self.channels.close()

    def on_metadata(self, delta: Delta) -> None:
        if delta.transforms or delta.partitions or delta.restored or delta.removed:
            self.reconcile()

    # ------------------------------------------------------------------ reconcile

    def wanted(self) -> dict[tuple[str, int], tuple[r.Transform, int]]:
        """(transform, partition) -> (definition, partition) for every input partition this
        broker leads of every deployed, unpaused transform."""
        out: dict[tuple[str, int], tuple[r.Transform, int]] = {}
        for transform in self.image.transforms.values():
            if transform.paused:
                continue
            info = self.image.topics.get(transform.input_topic)
            if info is None:
                continue
            for p in range(info.partitions):
                part = self.replicas.partitions.get((transform.input_topic, p))
                if part is not None and part.is_leader:
                    out[(transform.name, p)] = (transform, p)
        return out

    def reconcile(self) -> None:
        if not self.active or not self.enabled:
            return
        wanted = self.wanted()
        for key, (version, runner) in list(self.runners.items()):
            target = wanted.get(key)
            if target is None or _version(target[0]) != version:
                del self.runners[key]
                asyncio.get_running_loop().create_task(runner.stop())
        for key, (transform, p) in wanted.items():
            if key in self.runners:
                continue
            part = self.replicas.partitions[(transform.input_topic, p)]
            runner = Runner(transform, part, self._context())
            self.runners[key] = (_version(transform), runner)
            runner.start()

    def _context(self) -> RunnerContext:
        return RunnerContext(
            image=self.image,
            new_instance=self._instance,
            new_producer=self.new_producer,
            committed=self._committed,
            commit=self._commit,
            write_logs=self.write_logs,
            read_max_bytes=self.config.get_int("transforms.read.max.bytes"),
            start_from_latest=self.config.get_str("transforms.start.offset") == "latest",
            metered=self._metered,
        )

    def _metered(self, transform: str, records: int, guest_ns: int) -> None:
        if self.meter is not None:
            self.meter.transform(transform, records, guest_ns)

    def new_producer(self) -> OutputProducer:
        return OutputProducer(
            self.image,
            self.channels,
            self.producer_ids,
            timeout_s=self.config.get_seconds("transforms.produce.timeout.ms"),
        )

    # ------------------------------------------------------------------ engine

    async def _instance(self, transform: r.Transform, partition: int) -> Instance:
        compiled = await self._compile(transform.module_sha256)
        spec = TransformSpec(
            name=transform.name,
            input_topic=transform.input_topic,
            output_topics=tuple(transform.output_topics),
            environment=tuple(transform.env.items()),
        )
        runtime = self._runtime()
        instance: Instance = await runtime.ainstantiate(compiled, spec, self.limits)
        return instance

    def _runtime(self) -> Runtime:
        if self.runtime is None:
            # the engine (wasmtime) loads with the first transform, not at the broker's start
            from transforms import Runtime  # noqa: PLC0415

            self.runtime = Runtime()
        return self.runtime

    async def _compile(self, digest: str) -> CompiledModule:
        compiled = self._compiled.get(digest)
        if compiled is not None:
            return compiled
        task = self._compiling.get(digest)
        if task is None or (task.done() and task.exception() is not None):
            task = asyncio.get_running_loop().create_task(self._load_and_compile(digest))
            self._compiling[digest] = task
        compiled = await asyncio.shield(task)
        self._compiled[digest] = compiled
        return compiled

    async def _load_and_compile(self, digest: str) -> CompiledModule:
        module = await self.modules.load(digest)
        validated = validate_module(module, max_bytes=self.limits.module_max_bytes)
        started = time.monotonic()
        compiled = await asyncio.to_thread(self._runtime().compile, validated)
        log.info("compiled module %s in %.1f s", digest[:12], time.monotonic() - started)
        return compiled

    # ------------------------------------------------------------------ progress and logs

    async def _committed(self, transform: r.Transform, partition: int) -> int:
        return await self.progress.committed(transform.name, transform.input_topic, partition)

    async def _commit(self, transform: r.Transform, partition: int, offset: int) -> None:
        await self.progress.commit(transform.name, transform.input_topic, partition, offset)

    async def write_logs(
        self, transform: r.Transform, partition: int, lines: Sequence[tuple[str, str]]
    ) -> None:
        """Append guest log lines to the logs topic (key: the transform's name)."""
        if not lines:
            return
        if LOGS_TOPIC not in self.image.topics:
            factor = min(3, max(1, len(self.image.live_brokers())))
            retention = str(self.config.get_int("transforms.logs.retention.ms"))
            await self.cluster.create_topic(
                NewTopic(LOGS_TOPIC, 1, factor, {"retention.ms": retention})
            )
        if self._logs_producer is None:
            self._logs_producer = self.new_producer()
        producer = self._logs_producer
        now = clock.now_ms()
        records = [
            Record(
                i,
                now,
                transform.name.encode(),
                json.dumps(
                    {
                        "transform": transform.name,
                        "partition": partition,
                        "stream": stream,
                        "text": text,
                    }
                ).encode(),
                (("stream", stream.encode()), ("partition", str(partition).encode())),
            )
            for i, (stream, text) in enumerate(lines)
        ]
        try:
            await producer.send_records(LOGS_TOPIC, 0, records)
        except ProduceFailed as exc:  # e.g. out of sequence: sequences start over, once
            log.info(
                "writing log lines of %s again with a new producer id: %s", transform.name, exc
            )
            await producer.reset()
            await producer.send_records(LOGS_TOPIC, 0, records)

    # ------------------------------------------------------------------ status

    def status(self, name: str) -> list[dict[str, object]]:
        """This broker's runners of ``name``, one entry per input partition it leads."""
        out: list[dict[str, object]] = []
        for (transform, partition), (_, runner) in sorted(self.runners.items()):
            if transform != name:
                continue
            s = runner.status
            out.append(
                {
                    "partition": partition,
                    "broker": self.image.node_id,
                    "state": s.state.value,
                    "error": s.error,
                    "committed_offset": s.committed_offset,
                    "lag": runner.lag(),
                    "processed": s.processed,
                    "outputs": s.outputs,
                    "fuel_used": s.fuel_used,
                }
            )
        return out

    def failed(self) -> list[tuple[str, int, str]]:
        return [
            (name, p, runner.status.error)
            for (name, p), (_, runner) in self.runners.items()
            if runner.status.state is RunnerState.FAILED
        ]


def _version(transform: r.Transform) -> tuple[int, int]:
    return transform.deployed, transform.resumed
