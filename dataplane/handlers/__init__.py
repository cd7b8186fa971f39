"""One module per Kafka API. Each has ``API_KEY`` and ``handle(ctx, request)``.

``handle`` returns the response entity, ``None`` for no response (Produce with acks=0),
or an awaitable of either when it must wait (long-poll fetch, fsync, group rebalance).
The supported version range of an API is kio's full range unless the module narrows it
with ``MIN_VERSION`` / ``MAX_VERSION``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from wire.framing import kio_versions

Handler = Callable[[Any, Any], Any]

MODULES = (
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "offset_commit",
    "offset_fetch",
    "find_coordinator",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "describe_groups",
    "list_groups",
    "api_versions",
    "create_topics",
    "delete_topics",
    "delete_records",
    "init_producer_id",
    "offset_for_leader_epoch",
    "describe_configs",
    "alter_configs",
    "create_partitions",
    "delete_groups",
    "incremental_alter_configs",
    "offset_delete",
    "describe_cluster",
    "alter_partition",
    "broker_registration",
    "broker_heartbeat",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "unregister_broker",
    "remote_log_metadata",
    "describe_remote_log",
    "allocate_producer_ids",
)

HANDLERS: dict[int, Handler] = {}
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {}
"""What ApiVersions announces to clients."""
INTERNAL_VERSIONS: dict[int, tuple[int, int]] = {}
"""Broker-to-controller APIs (``INTERNAL = True``): served, not announced."""
SERVED_VERSIONS: dict[int, tuple[int, int]] = {}
"""Both: what the server accepts."""


def _register() -> None:
    for name in MODULES:
        try:
            module = importlib.import_module(f"dataplane.handlers.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"dataplane.handlers.{name}":
                continue  # not written yet
            raise
        key = module.API_KEY
        versions = kio_versions(key)
        assert versions is not None, name
        low = max(versions[0], getattr(module, "MIN_VERSION", versions[0]))
        high = min(versions[1], getattr(module, "MAX_VERSION", versions[1]))
        HANDLERS[key] = module.handle
        if getattr(module, "INTERNAL", False):
            INTERNAL_VERSIONS[key] = (low, high)
        else:
            SUPPORTED_VERSIONS[key] = (low, high)
        SERVED_VERSIONS[key] = (low, high)


_register()
