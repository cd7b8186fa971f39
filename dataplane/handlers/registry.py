"""The handler of every API the broker serves: which modules, which versions.

Each handler module has ``API_KEY`` and ``handle(ctx, request)``, and may narrow its
versions (kio's full range otherwise) with ``MIN_VERSION`` / ``MAX_VERSION``;
``INTERNAL = True`` serves an API (broker to controller) without announcing it. The
modules are imported here by name, so a module that fails to import stops the broker at
start instead of silently leaving its API out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeAlias

from dataplane.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    allocate_producer_ids,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    broker_heartbeat,
    broker_registration,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_remote_log,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fence_broker,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    remote_log_metadata,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    transforms,
    txn_offset_commit,
    unregister_broker,
    write_txn_markers,
)
from dataplane.handlers._versions import SUPPORTED_VERSIONS
from dataplane.handlers.context import RequestContext
from wire.framing import kio_versions

Reply: TypeAlias = Any | Awaitable[Any | None] | None
"""A response entity (kio, or an already encoded ``EncodedResponse``), None for no answer
(Produce with acks=0), or an awaitable of either when the handler must wait."""
Handler: TypeAlias = Callable[[RequestContext, Any], Reply]

MODULES: tuple[ModuleType, ...] = (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    list_transactions,
    txn_offset_commit,
    write_txn_markers,
    allocate_producer_ids,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    broker_heartbeat,
    broker_registration,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_remote_log,
    describe_user_scram_credentials,
    fence_broker,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    remote_log_metadata,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    transforms,
    unregister_broker,
)


@dataclass(frozen=True, slots=True)
class Served:
    handle: Handler
    versions: tuple[int, int]
    internal: bool


def _served(module: ModuleType) -> Served:
    versions = kio_versions(module.API_KEY)
    if versions is None:
        raise RuntimeError(f"{module.__name__}: no schema for API key {module.API_KEY}")
    low = max(versions[0], getattr(module, "MIN_VERSION", versions[0]))
    high = min(versions[1], getattr(module, "MAX_VERSION", versions[1]))
    return Served(module.handle, (low, high), bool(getattr(module, "INTERNAL", False)))


SERVED: dict[int, Served] = {module.API_KEY: _served(module) for module in MODULES}
"""Every API the server accepts, by key."""
SUPPORTED_VERSIONS.update({k: s.versions for k, s in SERVED.items() if not s.internal})
