"""API auth: one bearer token per control plane, made by ``cloudctl up``.

The token lives in ``$SLUICE_HOME/token`` (mode 0600). Every RPC except gRPC health checking
must carry ``authorization: Bearer <token>`` (the scheme in any case, as RFC 9110 has it); a
missing or wrong token gets UNAUTHENTICATED (ErrorInfo reason TOKEN_INVALID). ``RotateToken``
(``cloudctl rotate-token``) replaces it; the one replaced may stay valid for a grace period.
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from controlplane.errors import Unauthenticated, rich_status
from sluice_client.client import write_token_file

TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret
PUBLIC_PREFIXES = ("/grpc.health.v1.Health/",)


def ensure_token(home: Path) -> str:
    """Read the token, creating it (0600) when missing; the file is never group/world readable."""
    path = home / TOKEN_FILE
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def read_token(home: Path) -> str:
    return (home / TOKEN_FILE).read_text().strip()


MAX_GRACE_S = 3600
"""The longest a rotated-out token may stay valid."""


class Tokens:
    """The token the API accepts, and the tokens rotated out whose grace period runs.

    Each rotation's grace applies to the token it replaces: a second rotation within a grace
    period does not cut the first one's short (a client that read the token file before
    either keeps its full grace). A rotation with no grace revokes every earlier token at
    once (the rotation of a token that leaked)."""

    def __init__(self, home: Path, token: str) -> None:
        self.path = home / TOKEN_FILE
        self._current = token.encode()
        self._graced: list[tuple[bytes, float]] = []
        """Rotated-out tokens and the monotonic time their grace ends."""

    def accepts(self, given: bytes) -> bool:
        if hmac.compare_digest(given, self._current):
            return True
        now = time.monotonic()
        # every entry is compared (no early exit), expired ones too, then ignored
        matched = [
            hmac.compare_digest(given, token) and now < until for token, until in self._graced
        ]
        return any(matched)

    def rotate(self, grace_s: int) -> str:
        """A new random token, written to the token file before it is accepted; the current
        one stays valid ``grace_s`` seconds more (0: it and every earlier one no longer)."""
        if not 0 <= grace_s <= MAX_GRACE_S:
            raise ValueError(f"the grace period is 0 to {MAX_GRACE_S} seconds, not {grace_s}")
        token = secrets.token_urlsafe(32)
        write_token_file(self.path, token)
        now = time.monotonic()
        if grace_s:
            graced = [(old, until) for old, until in self._graced if until > now]
            self._graced = [*graced, (self._current, now + grace_s)]
        else:
            self._graced = []
        self._current = token.encode()
        return token


def bearer_token(value: str | bytes) -> bytes | None:
    """The token of an ``authorization`` value ``Bearer <token>``; the scheme is
    case-insensitive (RFC 9110: ``bearer``, ``BEARER`` ...), spaces around the token are
    ignored. None for another scheme or no token."""
    raw = value.encode() if isinstance(value, str) else bytes(value)
    scheme, _, token = raw.strip().partition(b" ")
    if scheme.lower() != b"bearer" or not token.strip():
        return None
    return token.strip()


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens

    def _allowed(self, details: grpc.HandlerCallDetails) -> bool:
        if details.method.startswith(PUBLIC_PREFIXES):
            return True
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = bearer_token(value)
                return given is not None and self.tokens.accepts(given)
        return False

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None or self._allowed(details):
            return handler
        return _deny(handler)


MESSAGE = (
    "missing or invalid bearer token: send 'authorization: Bearer <token>' with the token "
    "from $SLUICE_HOME/token"
)


def _deny(handler: Any) -> Any:
    status = rich_status(Unauthenticated(MESSAGE))

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(status.code, status.details, status.trailing_metadata)

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await context.abort(status.code, status.details, status.trailing_metadata)
        yield None  # pragma: no cover - abort raises

    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streaming, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streaming, **kwargs)
    return grpc.unary_unary_rpc_method_handler(unary, **kwargs)
