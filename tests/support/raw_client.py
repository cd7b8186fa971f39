"""A blocking Kafka connection for tests that need exact bytes on the wire: the wire
package's :class:`~wire.client.BlockingConnection`, opened from a bootstrap address.

Requests are kio entities; responses are decoded with kio. Lets tests send malformed,
oversized or unknown frames and pipeline requests on one connection.
"""

from __future__ import annotations

from wire.client import BlockingConnection


class RawClient(BlockingConnection):
    def __init__(self, bootstrap: str, timeout: float = 10) -> None:
        host, _, port = bootstrap.rpartition(":")
        super().__init__(host, int(port), client_id="raw-test", timeout=timeout)
