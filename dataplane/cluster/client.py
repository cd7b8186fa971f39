"""How a broker talks Kafka to other brokers: follower fetches, controller requests.

A ``Channel`` is one pipelined connection to one broker: requests are kio entities, many
may be in flight, answers are matched by correlation id. It connects on first use and
again after a failure; a broken connection fails every request in flight with
``OSError`` (the caller retries — follower fetches and heartbeats repeat anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_RESPONSE = 256 * 1024 * 1024


class Channel:
    def __init__(self, host: str, port: int, *, client_id: str, connect_timeout: float = 2.0):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Any]] = {}
        self._correlation = 0
        self._connecting: asyncio.Lock = asyncio.Lock()
        self.closed = False

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    async def request(self, request: Any, timeout: float) -> Any:
        """Send ``request`` and return the decoded response; OSError/TimeoutError on failure."""
        writer = await self._connect()
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        header_cls = request.__header_schema__
        header = header_cls(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=i32(correlation),
            client_id=self.client_id,
        )
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        entity_writer(header_cls)(buf, header)
        entity_writer(type(request))(buf, request)
        frame = buf.getbuffer()
        _SIZE.pack_into(frame, 0, len(frame) - 4)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = (future, request)
        writer.write(bytes(frame))
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(correlation, None)

    async def _connect(self) -> asyncio.StreamWriter:
        if self.closed:
            raise OSError(f"channel to {self.host}:{self.port} is closed")
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout
            )
            self._writer = writer
            self._reader_task = asyncio.get_running_loop().create_task(self._read(reader, writer))
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: BaseException = OSError(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if size < 4 or size > MAX_RESPONSE:
                    raise OSError(f"bad response size {size} from {self.host}:{self.port}")
                frame = await reader.readexactly(size)
                correlation = _SIZE.unpack_from(frame, 0)[0]
                entry = self._pending.get(correlation)
                if entry is None:
                    continue  # its caller gave up (timeout)
                future, request = entry
                cls = getattr(request, "__response_schema__", None) or load_response_schema(
                    request.__api_key__, request.__version__
                )
                offset = 4 + (1 if cls.__header_schema__.__flexible__ else 0)
                try:
                    response, _ = entity_reader(cls)(frame, offset)
                except Exception as exc:
                    if not future.done():
                        future.set_exception(OSError(f"undecodable response: {exc}"))
                    continue
                if not future.done():
                    future.set_result(response)
        except (OSError, asyncio.IncompleteReadError) as exc:
            error = exc if isinstance(exc, OSError) else error
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            for future, _ in self._pending.values():
                if not future.done():
                    future.set_exception(OSError(str(error)))

    async def close(self) -> None:
        self.closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        task, self._reader_task = self._reader_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task


class Channels:
    """One channel per (purpose, broker address), created on demand."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._channels: dict[tuple[str, str, int], Channel] = {}

    def get(self, purpose: str, host: str, port: int) -> Channel:
        key = (purpose, host, port)
        channel = self._channels.get(key)
        if channel is None or channel.closed:
            channel = self._channels[key] = Channel(host, port, client_id=self.client_id)
        return channel

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
