"""SaslAuthenticate (36): one token of the mechanism chosen by SaslHandshake (PLAIN: one
round; SCRAM: client-first, then client-final), answered with the server's token.
SASL_AUTHENTICATION_FAILED carries Kafka's message (the connection is then closed);
v1+ answers carry the session lifetime (``connections.max.reauth.ms``, KIP-368). Outside
an authentication (a listener without SASL, an authenticated session):
ILLEGAL_SASL_STATE, as Kafka's request handler answers.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import request as req
from kio.schema.sasl_authenticate.v2 import response as resp

from dataplane.handlers.context import RequestContext
from dataplane.security.session import Outcome

API_KEY = 36


def handle(ctx: RequestContext, request: req.SaslAuthenticateRequest) -> Any:
    session = ctx.session
    if session is None or not session.authenticating():
        return _answer(
            ctx,
            Outcome("SaslAuthenticate request received after successful authentication"),
            ErrorCode.illegal_sasl_state,
        )
    outcome = session.authenticate(bytes(request.auth_bytes))
    if isinstance(outcome, Awaitable):
        return _later(ctx, outcome)
    return _answer(ctx, outcome)


async def _later(ctx: RequestContext, outcome: Awaitable[Outcome]) -> Any:
    return _answer(ctx, await outcome)


def _answer(ctx: RequestContext, outcome: Outcome, code: ErrorCode | None = None) -> Any:
    if code is None:
        code = ErrorCode.none if outcome.error is None else ErrorCode.sasl_authentication_failed
    return ctx.make(
        resp.SaslAuthenticateResponse,
        error_code=code,
        error_message="" if outcome.error is None else outcome.error,  # Kafka's default
        auth_bytes=outcome.token,
        session_lifetime=datetime.timedelta(milliseconds=outcome.session_lifetime_ms),
    )
