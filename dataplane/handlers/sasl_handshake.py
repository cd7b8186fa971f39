"""SaslHandshake (17): the client names its SASL mechanism. v1: the tokens follow in
SaslAuthenticate requests; v0 (older clients, e.g. librdkafka before 1.x and the kcat of
Debian's librdkafka 2.0, which look for v0 in ApiVersions): they follow as raw
size-prefixed frames outside Kafka's request framing, answered the same way, and a failure
closes the connection without an error message (as Kafka's SaslServerAuthenticator).

On a SASL listener before authentication, or to re-authenticate a session that expires
(KIP-368): NONE and the enabled mechanisms, or UNSUPPORTED_SASL_MECHANISM and the enabled
mechanisms (then the connection is closed, as Kafka does). Anywhere else (a PLAINTEXT or
SSL listener, an authenticated session that does not expire): ILLEGAL_SASL_STATE, as
Kafka's request handler answers.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1 import request as req
from kio.schema.sasl_handshake.v1 import response as resp

from dataplane.handlers.context import RequestContext

API_KEY = 17


def handle(ctx: RequestContext, request: req.SaslHandshakeRequest) -> Any:
    session = ctx.session
    if session is None or session.illegal_handshake():
        return ctx.make(resp.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state)
    refused = session.handshake(request.mechanism, raw_tokens=ctx.api_version == 0)
    return ctx.make(
        resp.SaslHandshakeResponse,
        error_code=ErrorCode.none if refused is None else ErrorCode.unsupported_sasl_mechanism,
        mechanisms=session.security.mechanisms,
    )
