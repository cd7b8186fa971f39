"""The handler of every API the broker serves: which module, which versions.

``APIS`` is the one table of what the broker serves: each API's key, the module under
``dataplane.handlers`` with its ``handle(ctx, request)``, how the versions are narrowed from
the schemas' range (kio's, or ``wire.internal``'s for Sluice's own APIs), and whether it is
announced in ApiVersions (``internal``: broker to controller, not announced).

A handler module is imported when its API is first requested, not at start: a broker asked
only for Produce, Fetch and Metadata does not build the kio schemas of the other forty-odd
APIs (their imports were a third of a broker's start-up CPU). The versions and the
ApiVersions answer come from this table and kio's schema index, without a handler.
``tests/dataplane/test_registry.py`` imports every module of the table and checks it
against its row, so a module that fails to import fails the suite, not a client's request.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from dataplane.handlers._versions import SUPPORTED_VERSIONS
from dataplane.handlers.context import RequestContext
from wire.framing import kio_versions
from wire.internal import (
    DESCRIBE_REMOTE_LOG_KEY,
    FENCE_BROKER_KEY,
    REMOTE_LOG_METADATA_KEY,
    TRANSFORMS_KEY,
)

Reply: TypeAlias = Any | Awaitable[Any | None] | None
"""A response entity (kio, or an already encoded ``EncodedResponse``), None for no answer
(Produce with acks=0), or an awaitable of either when the handler must wait."""
Handler: TypeAlias = Callable[[RequestContext, Any], Reply]


@dataclass(frozen=True, slots=True)
class Api:
    """One served API: its key, its handler module, its versions within the schemas'."""

    key: int
    module: str
    min_version: int | None = None
    max_version: int | None = None
    internal: bool = False


APIS: tuple[Api, ...] = (
    Api(0, "produce"),
    Api(1, "fetch"),
    Api(2, "list_offsets"),
    Api(3, "metadata"),
    Api(8, "offset_commit"),
    Api(9, "offset_fetch"),
    Api(10, "find_coordinator"),
    Api(11, "join_group"),
    Api(12, "heartbeat"),
    Api(13, "leave_group"),
    Api(14, "sync_group"),
    Api(15, "describe_groups"),
    Api(16, "list_groups"),
    Api(17, "sasl_handshake"),
    Api(18, "api_versions"),
    Api(19, "create_topics"),
    Api(20, "delete_topics"),
    Api(21, "delete_records"),
    Api(22, "init_producer_id", max_version=5),  # v6 (KIP-939's 2PC): Kafka 4.3 offers 0-5
    Api(23, "offset_for_leader_epoch"),
    Api(24, "add_partitions_to_txn"),
    Api(25, "add_offsets_to_txn"),
    Api(26, "end_txn", max_version=4),  # v5: transaction protocol 2, not served
    Api(27, "write_txn_markers"),
    Api(28, "txn_offset_commit", max_version=4),  # v5: transaction protocol 2, not served
    Api(29, "describe_acls"),
    Api(30, "create_acls"),
    Api(31, "delete_acls"),
    Api(32, "describe_configs"),
    Api(33, "alter_configs"),
    Api(36, "sasl_authenticate"),
    Api(37, "create_partitions"),
    Api(42, "delete_groups"),
    Api(44, "incremental_alter_configs"),
    Api(45, "alter_partition_reassignments"),
    Api(46, "list_partition_reassignments"),
    Api(47, "offset_delete"),
    Api(50, "describe_user_scram_credentials"),
    Api(51, "alter_user_scram_credentials"),
    Api(56, "alter_partition", min_version=3, internal=True),  # v3: topic ids
    Api(60, "describe_cluster"),
    Api(62, "broker_registration", min_version=4, internal=True),
    Api(63, "broker_heartbeat", min_version=1, internal=True),
    Api(64, "unregister_broker"),
    Api(65, "describe_transactions"),
    Api(66, "list_transactions"),
    Api(67, "allocate_producer_ids", internal=True),
    Api(REMOTE_LOG_METADATA_KEY, "remote_log_metadata", internal=True),
    Api(DESCRIBE_REMOTE_LOG_KEY, "describe_remote_log", internal=True),
    Api(TRANSFORMS_KEY, "transforms", internal=True),
    Api(FENCE_BROKER_KEY, "fence_broker", internal=True),
)


def handler_module(api: Api) -> Any:
    """The module that serves ``api``, imported now if it was not yet."""
    module = importlib.import_module(f"dataplane.handlers.{api.module}")
    if api.key != module.API_KEY:
        raise RuntimeError(f"{module.__name__} serves API key {module.API_KEY}, not {api.key}")
    return module


class Served:
    """An API the server accepts: its versions, and its handler, loaded on the first call
    (then ``handle`` is the module's function itself: no indirection per request)."""

    __slots__ = ("api", "handle", "versions")

    def __init__(self, api: Api) -> None:
        versions = kio_versions(api.key)
        if versions is None:
            raise RuntimeError(f"{api.module}: no schema for API key {api.key}")
        low = versions[0] if api.min_version is None else max(versions[0], api.min_version)
        high = versions[1] if api.max_version is None else min(versions[1], api.max_version)
        self.api = api
        self.versions = (low, high)
        self.handle: Handler = self._first_call

    @property
    def internal(self) -> bool:
        return self.api.internal

    def load(self) -> Handler:
        handle: Handler = handler_module(self.api).handle
        self.handle = handle
        return handle

    def _first_call(self, ctx: RequestContext, request: Any) -> Reply:
        return self.load()(ctx, request)


SERVED: dict[int, Served] = {api.key: Served(api) for api in APIS}
"""Every API the server accepts, by key."""
SUPPORTED_VERSIONS.update({k: s.versions for k, s in SERVED.items() if not s.internal})
