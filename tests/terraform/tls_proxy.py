"""A TLS-terminating TCP proxy on loopback, in front of the (plaintext) control plane: what a
deployment puts before it so that clients reach it over TLS. It offers HTTP/2 by ALPN (gRPC
needs it) and copies bytes both ways; it does not look into them.

    with TlsProxy(cert, key, "127.0.0.1:50051") as proxy:
        ...  # a gRPC client trusting the CA of ``cert`` connects to proxy.address
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from pathlib import Path
from types import TracebackType

from tests.support.processes import free_port


class TlsProxy:
    def __init__(self, cert: Path, key: Path, upstream: str) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.context.set_alpn_protocols(["h2"])
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.listener.settimeout(0.2)
        self.stopped = threading.Event()
        self.threads: list[threading.Thread] = []
        self.sockets: list[socket.socket] = []
        self.handshakes = 0
        """TLS handshakes completed (clients that spoke TLS to it)."""

    def __enter__(self) -> TlsProxy:
        self._spawn(self._accept)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopped.set()
        for sock in [self.listener, *self.sockets]:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self.threads:
            thread.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                raw, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(self._serve, raw)

    def _serve(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        try:
            client = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        self.handshakes += 1
        client.settimeout(None)
        upstream = socket.create_connection(self.upstream)
        self.sockets += [client, upstream]
        self._spawn(self._pipe, client, upstream)
        self._pipe(upstream, client)

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
