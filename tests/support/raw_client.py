"""A minimal blocking Kafka protocol client for tests that need exact bytes on the wire.

Requests are kio entities; responses are decoded with kio. Lets tests send malformed,
oversized or unknown frames and pipeline requests on one connection.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader, entity_writer


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ frames

    def encode(self, request: Any, correlation_id: int | None = None) -> bytes:
        if correlation_id is None:
            self.correlation += 1
            correlation_id = self.correlation
        header_cls = HeaderV2 if request.__header_schema__ is HeaderV2 else HeaderV1
        header = header_cls(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=correlation_id,
            client_id="raw-test",
        )
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header)
        entity_writer(type(request))(buf, request)
        body = buf.getvalue()
        return struct.pack(">i", len(body)) + body

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: Any) -> int:
        self.send_raw(self.encode(request))
        return self.correlation

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            chunks += chunk
        return bytes(chunks)

    def receive(self, request_type: Any) -> tuple[int, Any]:
        """Read one response to a request of ``request_type``; (correlation id, response)."""
        frame = self.read_frame()
        response_cls = load_response_schema(request_type.__api_key__, request_type.__version__)
        correlation = struct.unpack_from(">i", frame, 0)[0]
        offset = 4
        if response_cls.__header_schema__.__flexible__:
            offset += 1  # empty tagged fields
        response, _ = entity_reader(response_cls)(frame, offset)
        return correlation, response

    def request(self, request: Any) -> Any:
        correlation = self.send(request)
        got, response = self.receive(type(request))
        assert got == correlation, f"correlation {got} != {correlation}"
        return response

    def is_closed(self, timeout: float = 5) -> bool:
        """True when the broker closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
