"""AlterUserScramCredentials (51): create, replace or delete users' SCRAM credentials,
decided by the active controller (forwarded from any other broker) and recorded in the
metadata log, so they survive restarts and failover. Clients send the salted password
(KIP-554: salt and iterations chosen client-side); the controller keeps only the salt,
iterations, StoredKey and ServerKey, as Kafka's ScramControlManager does, with its errors
and messages: UNSUPPORTED_SASL_MECHANISM (unknown mechanism), UNACCEPTABLE_CREDENTIAL
(empty user name, iterations outside 4096-16384), DUPLICATE_RESOURCE (a user altered twice
in one request), RESOURCE_NOT_FOUND (deleting a credential that does not exist)."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.alter_user_scram_credentials.v0 import request as req
from kio.schema.alter_user_scram_credentials.v0 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster.changes import Changes
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext
from dataplane.security import credentials

API_KEY = 51
ZERO = datetime.timedelta(0)
TWICE = "A user credential cannot be altered twice in the same request"
log = logging.getLogger(__name__)
Error = tuple[ErrorCode, str]


def handle(ctx: RequestContext, request: req.AlterUserScramCredentialsRequest) -> Any:
    if not ctx.on_cluster(Operation.ALTER):  # Kafka's; here: the controller sees this broker
        names = dict.fromkeys(
            [*(d.name for d in request.deletions), *(u.name for u in request.upsertions)]
        )
        denied = ErrorCode.cluster_authorization_failed
        results = tuple(_result(ctx, n, denied, "Cluster authorization failed.") for n in names)
        return ctx.make(resp.AlterUserScramCredentialsResponse, throttle_time=ZERO, results=results)
    return via_controller(ctx, request, decide, _settled(ctx, request))


def _settled(ctx: RequestContext, request: req.AlterUserScramCredentialsRequest) -> Any:
    """A forwarded change is answered once this broker's image shows it (a login here right
    after sees the new user)."""
    image = ctx.broker.metadata

    def settled(response: Any) -> bool:
        done = {x.user for x in response.results if x.error_code == ErrorCode.none}
        for d in request.deletions:
            if d.name in done and d.mechanism in image.scram.get(d.name, {}):
                return False
        for u in request.upsertions:
            if u.name in done and u.mechanism not in image.scram.get(u.name, {}):
                return False
        return True

    return settled


def _check_name_and_mechanism(name: str, mechanism: int) -> Error | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in credentials.NAMES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def decide(
    ctx: RequestContext, request: req.AlterUserScramCredentialsRequest, changes: Changes
) -> Any:
    """On the active controller: Kafka's ScramControlManager.alterCredentials."""
    errors: dict[str, Error] = {}
    deletions = _valid_deletions(request, changes.image.scram, errors)
    upserts = _valid_upsertions(request, deletions, errors)
    results = []
    for name, deletion in deletions.items():
        changes.remove_scram_credential(name, int(deletion.mechanism))
        results.append(_result(ctx, name, ErrorCode.none, None))
        log.info("deleted the %s credential of %s", credentials.NAMES[deletion.mechanism], name)
    for name, upsert in upserts.items():
        changes.set_scram_credential(
            credentials.from_salted(
                name,
                int(upsert.mechanism),
                bytes(upsert.salt),
                bytes(upsert.salted_password),
                int(upsert.iterations),
            )
        )
        results.append(_result(ctx, name, ErrorCode.none, None))
        log.info("set the %s credential of %s", credentials.NAMES[upsert.mechanism], name)
    results.extend(_result(ctx, name, code, message) for name, (code, message) in errors.items())
    return ctx.make(
        resp.AlterUserScramCredentialsResponse, throttle_time=ZERO, results=tuple(results)
    )


def _valid_deletions(
    request: req.AlterUserScramCredentialsRequest,
    scram: dict[str, Any],
    errors: dict[str, Error],
) -> dict[str, req.ScramCredentialDeletion]:
    deletions: dict[str, req.ScramCredentialDeletion] = {}
    for deletion in request.deletions:
        name = deletion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = (ErrorCode.duplicate_resource, TWICE)
            continue
        error = _check_name_and_mechanism(name, deletion.mechanism)
        if error is None and deletion.mechanism not in scram.get(name, {}):
            error = (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        if error is not None:
            errors[name] = error
        else:
            deletions[name] = deletion
    return deletions


def _valid_upsertions(
    request: req.AlterUserScramCredentialsRequest,
    deletions: dict[str, req.ScramCredentialDeletion],
    errors: dict[str, Error],
) -> dict[str, req.ScramCredentialUpsertion]:
    upserts: dict[str, req.ScramCredentialUpsertion] = {}
    for upsert in request.upsertions:
        name = upsert.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upserts.pop(name, None) is not None:
            errors[name] = (ErrorCode.duplicate_resource, TWICE)
            continue
        error = _check_name_and_mechanism(name, upsert.mechanism)
        if error is None and upsert.iterations < credentials.MIN_ITERATIONS:
            error = (ErrorCode.unacceptable_credential, "Too few iterations")
        elif error is None and upsert.iterations > credentials.MAX_ITERATIONS:
            error = (ErrorCode.unacceptable_credential, "Too many iterations")
        if error is not None:
            errors[name] = error
        else:
            upserts[name] = upsert
    return upserts


def _result(
    ctx: RequestContext, name: str, code: ErrorCode, message: str | None
) -> resp.AlterUserScramCredentialsResult:
    return ctx.make(
        resp.AlterUserScramCredentialsResult, user=name, error_code=code, error_message=message
    )
