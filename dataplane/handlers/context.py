"""What a handler sees: the broker's parts and the request's version and client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wire.framing import build, response_module

if TYPE_CHECKING:
    from dataplane.broker import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str = ""

    def schema(self, name: str) -> Any:
        """The response entity class ``name`` of this request's version."""
        return getattr(response_module(self.api_key, self.api_version), name)

    def make(self, entity: str, /, **values: Any) -> Any:
        """Build response entity ``entity`` of this version from the fields it has."""
        return build(self.schema(entity), **values)
