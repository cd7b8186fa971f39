"""DescribeUserScramCredentials (50): the SCRAM mechanisms and iteration counts of users
(never salts or keys), from this broker's metadata image, with Kafka's per-user errors:
RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE for a user named
twice. No users (null or empty): every user."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.describe_user_scram_credentials.v0 import request as req
from kio.schema.describe_user_scram_credentials.v0 import response as resp
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext

API_KEY = 50
ZERO = datetime.timedelta(0)
DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
MISSING = "Attempt to describe a user credential that does not exist: "


def handle(ctx: RequestContext, request: req.DescribeUserScramCredentialsRequest) -> Any:
    if not ctx.on_cluster(Operation.DESCRIBE):  # Kafka's: DESCRIBE on the cluster
        return ctx.make(
            resp.DescribeUserScramCredentialsResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
            results=(),
        )
    scram = ctx.broker.metadata.scram
    names = [u.name for u in request.users or ()]
    wanted = sorted(scram) if not names else list(dict.fromkeys(names))
    results = []
    for name in wanted:
        if names.count(name) > 1:
            results.append(_result(ctx, name, ErrorCode.duplicate_resource, DUPLICATE + name))
            continue
        known = scram.get(name)
        if not known:
            results.append(_result(ctx, name, ErrorCode.resource_not_found, MISSING + name))
            continue
        infos = tuple(
            ctx.make(resp.CredentialInfo, mechanism=i8(kind), iterations=i32(c.iterations))
            for kind, c in sorted(known.items())
        )
        results.append(_result(ctx, name, ErrorCode.none, None, infos))
    return ctx.make(
        resp.DescribeUserScramCredentialsResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


def _result(
    ctx: RequestContext,
    name: str,
    code: ErrorCode,
    message: str | None,
    infos: tuple[resp.CredentialInfo, ...] = (),
) -> resp.DescribeUserScramCredentialsResult:
    return ctx.make(
        resp.DescribeUserScramCredentialsResult,
        user=name,
        error_code=code,
        error_message=message,
        credential_infos=infos,
    )
