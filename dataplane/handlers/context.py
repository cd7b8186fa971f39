"""What a handler sees: the broker's parts and the request's version and client."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from wire.framing import build, response_module

if TYPE_CHECKING:
    from dataplane.broker import Broker
    from dataplane.security.session import Session

T = TypeVar("T")


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str = ""
    session: Session | None = None
    """The connection's authentication (None for a request that came from no listener)."""

    @property
    def listener(self) -> str | None:
        """The name of the listener the request came through (None: no listener)."""
        return None if self.session is None else self.session.listener.name

    @property
    def principal(self) -> str:
        """Who sent the request: ``User:NAME`` after SASL, ``User:<certificate DN>`` on an
        SSL listener with a client certificate, else ``User:ANONYMOUS`` (Kafka's)."""
        return "User:ANONYMOUS" if self.session is None else self.session.principal

    def make(self, entity: type[T], /, **values: Any) -> T:
        """Build the response entity ``entity`` — a kio class the handler names statically
        (its API's newest version) — in this request's version, from the fields that
        version has. (tests/dataplane/test_handler_fields.py checks that every field a
        handler sets exists in some version, so a typo is not silently dropped.)"""
        cls = _in_version(self.api_key, self.api_version, entity.__module__, entity.__name__)
        result: T = build(cls, **values)
        return result


@cache
def _in_version(api_key: int, api_version: int, module_name: str, name: str) -> Any:
    if not module_name.startswith("kio."):  # one of Sluice's own APIs (one version)
        return getattr(importlib.import_module(module_name), name)
    return getattr(response_module(api_key, api_version), name)
