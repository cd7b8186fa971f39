"""SCRAM users and ACLs of a cluster (the Users and Acls APIs), over the Kafka protocol as
kafka-configs.sh and kafka-acls.sh manage them (the requests: ``kafka_security.py``).

- **Users**: CreateUser checks the iteration count (Kafka's bounds, before any hashing) and
  that the user has no credential of the mechanism yet, then sets it (AlterUserScramCredentials
  with a salted password computed here). DeleteUser removes the credentials the user has
  (every mechanism, or the one named). ListUsers: DescribeUserScramCredentials, every user.
- **ACLs**: CreateAcl fills in Kafka's defaults (LITERAL, ALLOW, host ``*``, the cluster
  resource's name), refuses an operation the resource type does not have with kafka-acls.sh's
  message, then the broker checks the rest with Kafka's messages. ListAcls / DeleteAcls send
  the filter as given.
- **Settling**: a change is decided by the active controller and answered once the broker
  asked has applied it; the others apply it a moment later. After each change every broker is
  asked until each that answers shows it (up to ``kafka.request.timeout.ms``), so a login or a
  listing that follows, at any broker, sees it.

Every request goes to one broker, the first in id order that can be reached
(``kafka.on_any``); a read is retried on the next broker after a broken connection, a change
is not. Kafka errors become typed errors here, in one place (:func:`SecurityOps._error`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kio.schema.errors import ErrorCode

from controlplane import errors
from controlplane.kafka import Admin, KafkaResponseError, on_any
from controlplane.kafka_security import (
    CLUSTER_RESOURCE,
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SUPPORTED_OPERATIONS,
    Acl,
    AclFilter,
    Credential,
    Operation,
    ResourceType,
    ScramMechanism,
    create,
    delete,
    delete_credential,
    describe,
    describe_credentials,
    upsert_credential,
)
from controlplane.store import BrokerRecord, Store
from controlplane.topics import map_kafka_error

T = TypeVar("T")
log = logging.getLogger("sluice.controlplane.security")

SETTLE_POLL = 0.1
"""Seconds between two rounds of asking every broker whether it shows a change."""
BAD_REQUEST = {
    ErrorCode.invalid_request,
    ErrorCode.unacceptable_credential,
    ErrorCode.unsupported_sasl_mechanism,
    ErrorCode.duplicate_resource,
}
"""Kafka's refusals of a bad user or ACL: INVALID_ARGUMENT with Kafka's message."""


class SecurityOps:
    def __init__(self, store_: Store, timeout: float) -> None:
        self.store = store_
        self.timeout = timeout

    def _brokers(self, name: str) -> list[BrokerRecord]:
        hint = "; its users and ACLs can be managed once it is ACTIVE"
        return errors.ready_brokers(self.store, name, hint)

    async def _call(
        self,
        cluster: str,
        what: str,
        call: Callable[[Admin], Awaitable[T]],
        *,
        read_only: bool,
        user: str = "",
    ) -> T:
        """One admin call at any broker; Kafka errors and transport failures typed."""
        brokers = self._brokers(cluster)
        try:
            return await on_any(brokers, call, self.timeout, read_only=read_only)
        except KafkaResponseError as exc:
            raise self._error(exc, cluster, user) from None
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            raise errors.broker_unavailable(exc, cluster, what, user=user) from None

    @staticmethod
    def _error(exc: KafkaResponseError, cluster: str, user: str) -> errors.ControlPlaneError:
        about: dict[str, str | int] = {"cluster": cluster, "user": user}
        if exc.code in BAD_REQUEST:
            return errors.BadRequest(exc.detail, **about, kafkaError=exc.code.name)
        if exc.code == ErrorCode.resource_not_found and user:
            return errors.UserNotFound(
                f"user {user!r} has no SCRAM credential in cluster {cluster!r}", **about
            )
        if exc.code == ErrorCode.security_disabled:
            return errors.PreconditionFailed(
                f"cluster {cluster!r} has no authorizer, so it keeps no ACLs (Kafka's "
                "SECURITY_DISABLED): ACLs apply to clusters created with client "
                "authentication (scram or tls)",
                **about,
                kafkaError=exc.code.name,
            )
        if exc.code == ErrorCode.cluster_authorization_failed:
            return errors.PreconditionFailed(
                f"cluster {cluster!r} refused the control plane's admin request "
                f"(CLUSTER_AUTHORIZATION_FAILED: {exc.detail}); its principal needs ALTER and "
                "DESCRIBE on the cluster resource, or to be in super.users",
                **about,
                kafkaError=exc.code.name,
            )
        return map_kafka_error(exc, cluster, "")

    async def _settle(
        self, cluster: str, shows: Callable[[Admin], Awaitable[bool]], what: str
    ) -> None:
        """Until every broker that answers shows a change (``shows``), for up to
        ``kafka.request.timeout.ms``; a broker that does not answer is left to catch up."""
        brokers = self._brokers(cluster)
        pending = list(brokers)
        deadline = time.monotonic() + self.timeout
        while pending and time.monotonic() < deadline:
            answers = await asyncio.gather(
                # one broker each (on_any: connected and logged in as every admin call is)
                *(on_any([b], shows, self.timeout, read_only=True) for b in pending),
                return_exceptions=True,
            )
            pending = [b for b, seen in zip(pending, answers, strict=True) if seen is False]
            if pending:
                await asyncio.sleep(SETTLE_POLL)
        if pending:
            log.warning(
                "cluster %s: broker(s) %s did not show %s within %.0f s",
                cluster,
                ", ".join(str(b.broker_id) for b in pending),
                what,
                self.timeout,
            )

    # ------------------------------------------------------------------ users

    async def list_users(self, cluster: str) -> dict[str, tuple[Credential, ...]]:
        found = await self._call(
            cluster, "DescribeUserScramCredentials", describe_credentials, read_only=True
        )
        return dict(sorted(found.items()))

    async def _credentials(self, cluster: str, name: str) -> tuple[Credential, ...]:
        found = await self._call(
            cluster,
            "DescribeUserScramCredentials",
            lambda a: describe_credentials(a, [name]),
            read_only=True,
            user=name,
        )
        return found.get(name, ())

    async def create_user(
        self,
        cluster: str,
        name: str,
        mechanism: ScramMechanism,
        password: str,
        iterations: int | None = None,
    ) -> tuple[Credential, ...]:
        """Give ``name`` a credential of ``mechanism``; its credentials afterwards."""
        about: dict[str, str | int] = {"cluster": cluster, "user": name}
        if not name:
            raise errors.BadRequest(
                "Username must not be empty",
                **about,
                kafkaError=ErrorCode.unacceptable_credential.name,
            )
        count = DEFAULT_ITERATIONS if iterations is None else iterations
        if not MIN_ITERATIONS <= count <= MAX_ITERATIONS:
            few = "Too few iterations" if count < MIN_ITERATIONS else "Too many iterations"
            raise errors.BadRequest(
                f"{few}: {count} (SCRAM iterations go from {MIN_ITERATIONS} to "
                f"{MAX_ITERATIONS}, Kafka's bounds)",
                **about,
                kafkaError=ErrorCode.unacceptable_credential.name,
            )
        if not password:
            raise errors.BadRequest(f"the password of user {name!r} is empty", **about)
        existing = await self._credentials(cluster, name)
        if any(c.mechanism == mechanism for c in existing):
            raise errors.UserAlreadyExists(
                f"user {name!r} already has a {mechanism.kafka_name} credential in cluster "
                f"{cluster!r}",
                **about,
            )
        await self._call(
            cluster,
            "AlterUserScramCredentials",
            lambda a: upsert_credential(a, name, mechanism, password, count),
            read_only=False,
            user=name,
        )
        log.info(
            "cluster %s: user %s got a %s credential (%d iterations)",
            cluster,
            name,
            mechanism.kafka_name,
            count,
        )

        async def shows(admin: Admin) -> bool:
            found = (await describe_credentials(admin, [name])).get(name, ())
            return any(c.mechanism == mechanism for c in found)

        await self._settle(cluster, shows, f"the credential of user {name!r}")
        return await self._credentials(cluster, name)

    async def delete_user(
        self, cluster: str, name: str, mechanism: ScramMechanism | None = None
    ) -> list[ScramMechanism]:
        """Remove ``name``'s credentials (of ``mechanism`` only, when given)."""
        existing = {c.mechanism for c in await self._credentials(cluster, name)}
        wanted = sorted(existing if mechanism is None else existing & {mechanism})
        if not wanted:
            which = "" if mechanism is None else f"{mechanism.kafka_name} "
            raise errors.UserNotFound(
                f"user {name!r} has no {which}SCRAM credential in cluster {cluster!r}",
                cluster=cluster,
                user=name,
            )
        for each in wanted:  # one request each: Kafka refuses a user named twice in one
            await self._call(
                cluster,
                "AlterUserScramCredentials",
                functools.partial(delete_credential, name=name, mechanism=each),
                read_only=False,
                user=name,
            )
        log.info(
            "cluster %s: user %s lost its %s credential(s)",
            cluster,
            name,
            ", ".join(m.kafka_name for m in wanted),
        )

        async def shows(admin: Admin) -> bool:
            found = (await describe_credentials(admin, [name])).get(name, ())
            return not any(c.mechanism in wanted for c in found)

        await self._settle(cluster, shows, f"the deletion of user {name!r}")
        return wanted

    # ------------------------------------------------------------------ ACLs

    @staticmethod
    def check(acl: Acl, cluster: str) -> Acl:
        """``acl`` with the cluster resource's name filled in; an operation its resource
        type does not have is refused with kafka-acls.sh's message (the broker checks the
        rest, with Kafka's messages)."""
        if acl.resource_type == ResourceType.CLUSTER and not acl.resource_name:
            acl = Acl(
                acl.resource_type,
                CLUSTER_RESOURCE,
                acl.pattern_type,
                acl.principal,
                acl.host,
                acl.operation,
                acl.permission,
            )
        supported = SUPPORTED_OPERATIONS.get(acl.resource_type)
        concrete = acl.operation not in (Operation.UNKNOWN, Operation.ANY)  # the broker's
        if supported is not None and concrete and acl.operation not in supported:
            raise errors.BadRequest(
                f"ResourceType {acl.resource_type.name} only supports operations "
                f"[{', '.join(o.name for o in supported)}] (not {acl.operation.name})",
                cluster=cluster,
            )
        return acl

    async def create_acl(self, cluster: str, acl: Acl) -> Acl:
        acl = self.check(acl, cluster)
        await self._call(cluster, "CreateAcls", lambda a: create(a, acl), read_only=False)
        log.info("cluster %s: created ACL %s", cluster, acl)
        exactly = AclFilter.exactly(acl)

        async def shows(admin: Admin) -> bool:
            return bool(await describe(admin, exactly))

        await self._settle(cluster, shows, f"ACL {acl}")
        return acl

    async def list_acls(self, cluster: str, selected: AclFilter) -> list[Acl]:
        return await self._call(
            cluster, "DescribeAcls", lambda a: describe(a, selected), read_only=True
        )

    async def delete_acls(self, cluster: str, selected: AclFilter) -> list[Acl]:
        deleted = await self._call(
            cluster, "DeleteAcls", lambda a: delete(a, selected), read_only=False
        )
        for acl in deleted:
            log.info("cluster %s: deleted ACL %s", cluster, acl)
        if deleted:

            async def shows(admin: Admin) -> bool:
                left = set(await describe(admin, selected))
                return not left & set(deleted)

            await self._settle(cluster, shows, f"the deletion of {len(deleted)} ACL(s)")
        return deleted
