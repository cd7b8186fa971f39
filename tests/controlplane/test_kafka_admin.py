"""The control plane's Kafka client against a scripted broker on loopback: the reassignment
and unregister requests, and ``on_any`` trying the next broker when one cannot be reached."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta

from controlplane.kafka import Admin, KafkaResponseError, Reassignment, Unreachable, on_any
from controlplane.store import BrokerRecord
from tests.conftest import free_port

ZERO = i32Timedelta.parse(datetime.timedelta(0))
Answer = Callable[[Any], Any]


@asynccontextmanager
async def scripted_broker(answer: Answer, seen: list[Any]) -> AsyncIterator[int]:
    """A server that decodes each request with kio and sends ``answer(request)``."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                api_key, version = struct.unpack_from(">hh", frame, 0)
                header, offset = entity_reader(RequestHeader)(frame, 0)
                request_cls = load_request_schema(api_key, version)
                request, _ = entity_reader(request_cls)(frame, offset)
                seen.append(request)
                response = answer(request)
                body = io.BytesIO()
                body.write(struct.pack(">i", header.correlation_id))
                if load_response_schema(api_key, version).__header_schema__.__flexible__:
                    body.write(b"\0")
                entity_writer(type(response))(body, response)
                data = body.getvalue()
                writer.write(struct.pack(">i", len(data)) + data)
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    port = free_port()
    server = await asyncio.start_server(serve, "127.0.0.1", port)
    try:
        yield port
    finally:
        server.close()
        await server.wait_closed()


def response_of(request: Any, **fields: Any) -> Any:
    return load_response_schema(request.__api_key__, request.__version__)(**fields)


async def test_alter_partition_reassignments_sends_targets_and_returns_refusals() -> None:
    seen: list[Any] = []

    def answer(request: Any) -> Any:
        cls = load_response_schema(45, 0)
        module = __import__(cls.__module__, fromlist=["x"])
        return cls(
            throttle_time=ZERO,
            error_code=ErrorCode.none,
            error_message=None,
            responses=(
                module.ReassignableTopicResponse(
                    name="a",
                    partitions=(
                        module.ReassignablePartitionResponse(
                            partition_index=i32(0), error_code=ErrorCode.none, error_message=None
                        ),
                        module.ReassignablePartitionResponse(
                            partition_index=i32(1),
                            error_code=ErrorCode.invalid_replica_assignment,
                            error_message="broker 9 is not registered",
                        ),
                    ),
                ),
            ),
        )

    async with scripted_broker(answer, seen) as port:
        refused = await Admin("127.0.0.1", port, 5).alter_partition_reassignments(
            {("a", 0): [0, 1, 2], ("a", 1): [9, 1], ("b", 3): None}
        )
    assert list(refused) == [("a", 1)]
    assert refused[("a", 1)].code == ErrorCode.invalid_replica_assignment
    assert refused[("a", 1)].detail == "broker 9 is not registered"
    (request,) = seen
    sent = {
        (str(t.name), int(p.partition_index)): p.replicas
        for t in request.topics
        for p in t.partitions
    }
    assert sent == {("a", 0): (0, 1, 2), ("a", 1): (9, 1), ("b", 3): None}


async def test_list_partition_reassignments_and_unregister() -> None:
    seen: list[Any] = []

    def answer(request: Any) -> Any:
        if request.__api_key__ == 64:
            code = ErrorCode.none if request.broker_id == 3 else ErrorCode.broker_id_not_registered
            return response_of(request, throttle_time=ZERO, error_code=code, error_message=None)
        cls = load_response_schema(46, 0)
        module = __import__(cls.__module__, fromlist=["x"])
        return cls(
            throttle_time=ZERO,
            error_code=ErrorCode.none,
            error_message=None,
            topics=(
                module.OngoingTopicReassignment(
                    name="a",
                    partitions=(
                        module.OngoingPartitionReassignment(
                            partition_index=i32(2),
                            replicas=(0, 1, 3),
                            adding_replicas=(0,),
                            removing_replicas=(3,),
                        ),
                    ),
                ),
            ),
        )

    async with scripted_broker(answer, seen) as port:
        admin = Admin("127.0.0.1", port, 5)
        ongoing = await admin.list_partition_reassignments()
        await admin.unregister_broker(3)
        with pytest.raises(KafkaResponseError) as info:
            await admin.unregister_broker(4)
    assert ongoing == {("a", 2): Reassignment(replicas=(0, 1, 3), adding=(0,), removing=(3,))}
    assert info.value.code == ErrorCode.broker_id_not_registered
    assert seen[0].topics is None, "every reassignment is listed"


def broker(broker_id: int, port: int) -> BrokerRecord:
    return BrokerRecord("c", broker_id, "127.0.0.1", port, f"/d/{broker_id}", f"/l/{broker_id}")


async def test_on_any_tries_the_next_broker_when_one_cannot_be_reached() -> None:
    seen: list[Any] = []

    def answer(request: Any) -> Any:
        return response_of(
            request, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None
        )

    async with scripted_broker(answer, seen) as port:
        down = [broker(0, free_port()), broker(1, free_port())]
        await on_any([*down, broker(2, port)], lambda a: a.unregister_broker(5), 5)
        assert len(seen) == 1
        with pytest.raises(Unreachable):
            await on_any(down, lambda a: a.unregister_broker(5), 5)


async def test_on_any_does_not_send_a_change_twice_after_a_broken_connection() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4)
        writer.close()

    port = free_port()
    server = await asyncio.start_server(hang_up, "127.0.0.1", port)
    calls: list[int] = []

    async def call(admin: Admin) -> None:
        calls.append(admin.port)
        await admin.unregister_broker(1)

    other = free_port()
    try:
        with pytest.raises(OSError, match="closed") as lost:
            await on_any([broker(0, port), broker(1, other)], call, 5)
        assert not isinstance(lost.value, Unreachable)  # sent, then the connection broke
        assert calls == [port]
        with pytest.raises(Unreachable):
            await on_any([broker(0, port), broker(1, other)], call, 5, read_only=True)
        assert calls == [port, port, other]
    finally:
        server.close()
        await server.wait_closed()
