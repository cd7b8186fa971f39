"""Authentication of one connection: the SASL state machine of a SASL listener, the TLS
principal, session expiry (KIP-368), and ``Security``, what the server needs to open its
listeners and give each connection its ``Session``.

As Kafka's SaslServerAuthenticator: on a SASL listener a connection may send only
ApiVersions and SaslHandshake, then only SaslAuthenticate until it is authenticated;
anything else closes the connection. A handshake naming a mechanism that is not enabled is
answered UNSUPPORTED_SASL_MECHANISM, a failed authentication SASL_AUTHENTICATION_FAILED,
and the connection is then closed (after ``connection.failed.authentication.delay.ms``).
With ``connections.max.reauth.ms`` > 0 a session expires that long after it began; a
client re-authenticates on the same connection (SaslHandshake + SaslAuthenticate again,
same mechanism and principal) and a request that arrives after expiry closes it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from scramp import ScramException, ScramMechanism
from scramp.core import ScramServer

from dataplane.cluster import records as r
from dataplane.config import Settings
from dataplane.security import credentials
from dataplane.security.listeners import (
    ANONYMOUS,
    Listener,
    allowed_principals,
    certificate_principal,
    check_security,
    parse_listeners,
    server_context,
)

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class Credentials(Protocol):
    """Where users' SCRAM credentials are read (the metadata image: its ``scram`` is read
    at each login, never kept, since a snapshot restore replaces it)."""

    scram: dict[str, dict[int, r.ScramCredential]]


PLAIN_FAILED = "Authentication failed: Invalid username or password"


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer of one SaslAuthenticate: ``error`` None on success or a step of SCRAM."""

    error: str | None
    token: bytes = b""
    session_lifetime_ms: int = 0


class Security:
    """The broker's listeners, TLS context and SASL settings, read once at start."""

    def __init__(self, config: Settings, host: str, port: int, users: Credentials) -> None:
        self.listeners = parse_listeners(config, host, port)
        check_security(config, self.listeners)
        self.mechanisms = tuple(config.get_list("sasl.enabled.mechanisms"))
        self.reauth_ms = config.get_int("connections.max.reauth.ms")
        self.fail_delay_s = config.get_seconds("connection.failed.authentication.delay.ms")
        self.users = users
        self.allowed = allowed_principals(config, self.listeners)
        """Listeners that admit only some principals (``listener.allowed.principals``)."""
        self.ssl_context: ssl.SSLContext | None = None
        """TLS of SSL listeners: client certificates as ``ssl.client.auth`` says."""
        self.sasl_ssl_context: ssl.SSLContext | None = None
        """TLS of SASL_SSL listeners: no client certificate (Kafka applies the broker-wide
        ``ssl.client.auth`` to SSL listeners only, KIP-684), so one broker may have a
        SASL_SSL listener and an SSL listener that requires certificates."""
        if any(x.tls for x in self.listeners):
            self.ssl_context = server_context(config)
            self.sasl_ssl_context = server_context(config, client_auth="none")

    def lookup(self, user: str) -> dict[int, r.ScramCredential] | None:
        """The SCRAM credentials of ``user`` by mechanism type, or None."""
        return self.users.scram.get(user)

    def tls_context(self, listener: Listener) -> ssl.SSLContext | None:
        """The TLS context of ``listener`` (None: not a TLS listener)."""
        if not listener.tls:
            return None
        return self.sasl_ssl_context if listener.sasl else self.ssl_context

    def session(self, listener: Listener) -> Session:
        return Session(self, listener)


class Session:
    """One connection's authentication; ``principal`` is what a later authorizer checks."""

    def __init__(self, security: Security, listener: Listener) -> None:
        self.security = security
        self.listener = listener
        self.principal = ANONYMOUS
        self.state = State.HANDSHAKE if listener.sasl else State.AUTHENTICATED
        self.mechanism: str | None = None
        self.expires_at: float | None = None
        """time.monotonic() after which a request closes the connection (KIP-368)."""
        self.reauthenticating = False
        self.raw_tokens = False
        """After a SaslHandshake v0: the next frames are raw SASL tokens, not requests."""
        self._scram: ScramServer | None = None
        self._scram_user = ""
        self._close: Callable[[str], None] | None = None

    def connected(self, transport: asyncio.BaseTransport, close: Callable[[str], None]) -> None:
        """The transport is up (its TLS handshake done): take the certificate principal of
        an SSL listener."""
        self._close = close
        if self.listener.protocol == "SSL":
            ssl_object = transport.get_extra_info("ssl_object")
            der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
            self.principal = certificate_principal(der)
        if not self.listener.sasl and not self.admits(self.principal):
            self.state = State.FAILED
            text = f"{self.principal} may not connect through listener {self.listener.name}"
            asyncio.get_running_loop().call_soon(close, text)

    def disconnected(self) -> None:
        """The connection is gone: drop the reference back to it (and SCRAM state)."""
        self._close = None
        self._scram = None

    def admits(self, principal: str) -> bool:
        """Whether this connection's listener lets ``principal`` in."""
        allowed = self.security.allowed.get(self.listener.name)
        return allowed is None or principal in allowed

    # ------------------------------------------------------------------ the gate

    def refuse(self, api_key: int) -> str | None:
        """Why a request of ``api_key`` closes the connection now, or None to serve it."""
        if self.expires_at is not None and time.monotonic() >= self.expires_at:
            return "the SASL session expired (connections.max.reauth.ms) without re-authentication"
        state = self.state
        if state is State.AUTHENTICATED:
            return None
        if state is State.HANDSHAKE:
            allowed = api_key in (API_VERSIONS, SASL_HANDSHAKE)
        elif state is State.AUTHENTICATE:
            allowed = api_key == SASL_AUTHENTICATE or self.reauthenticating
        else:
            return "SASL authentication failed"
        if allowed:
            return None
        return f"unexpected Kafka request of API key {api_key} during SASL {state.value}"

    # ------------------------------------------------------------------ SaslHandshake

    def handshake(self, mechanism: str, *, raw_tokens: bool = False) -> str | None:
        """Start authenticating with ``mechanism`` (after ``illegal_handshake`` said no):
        None when accepted, else why not (the caller answers UNSUPPORTED_SASL_MECHANISM and
        the connection closes)."""
        if mechanism not in self.security.mechanisms:
            self._fail(f"unsupported SASL mechanism {mechanism!r}", delay=False)
            return f"Unsupported SASL mechanism {mechanism}"
        if self.reauthenticating and mechanism != self.mechanism:
            self._fail("SASL mechanism changed during re-authentication", delay=False)
            return (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'"
            )
        self.mechanism = mechanism
        self.state = State.AUTHENTICATE
        self.raw_tokens = raw_tokens
        self._scram = None
        return None

    def illegal_handshake(self) -> bool:
        """True when a SaslHandshake cannot start (re-)authentication here: a listener
        without SASL, or an authenticated session that does not expire (Kafka answers
        ILLEGAL_SASL_STATE). On an authenticated session that expires, it begins
        re-authentication (KIP-368)."""
        if not self.listener.sasl:
            return True
        if self.state is State.AUTHENTICATED:
            if self.expires_at is None:
                return True
            self.reauthenticating = True
        return False

    # ------------------------------------------------------------------ SaslAuthenticate

    def authenticating(self) -> bool:
        return self.state is State.AUTHENTICATE

    def authenticate(self, token: bytes) -> Outcome | Awaitable[Outcome]:
        """One SaslAuthenticate token of the chosen mechanism."""
        if self.mechanism == "PLAIN":
            return self._plain(token)
        return self._scram_step(token)

    async def _plain(self, token: bytes) -> Outcome:
        parsed = _parse_plain(token)
        if isinstance(parsed, Outcome):
            return self._failed(str(parsed.error), str(parsed.error))
        authzid, user, password = parsed
        if user is None:
            return self._failed(password, self._generic_failure())
        known = self.security.lookup(user) or {}
        credential = known.get(2) or known.get(1)  # SHA-512 first
        matches = credential is not None and await asyncio.to_thread(
            credentials.password_matches, credential, password
        )
        if not matches:
            return self._failed(f"wrong password or unknown user {user!r}", PLAIN_FAILED)
        if authzid and authzid != user:  # checked after the password, as Kafka
            return self._failed(
                "authorization id differs from the user name",
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        return self._succeeded(user)

    def _scram_step(self, token: bytes) -> Outcome:
        try:
            message = token.decode()
            if self._scram is None:
                mechanism = str(self.mechanism)
                server = ScramMechanism(mechanism).make_server(self._auth_fn(mechanism))
                self._scram = server
                server.set_client_first(message)
                return Outcome(None, server.get_server_first().encode())
            self._scram.set_client_final(message)
            final = self._scram.get_server_final().encode()
        except (ScramException, UnicodeDecodeError, ValueError) as exc:
            reason = str(exc) if not isinstance(exc, UnicodeDecodeError) else "not UTF-8"
            who = f" of {self._scram_user!r}" if self._scram_user else ""
            return self._failed(f"SCRAM{who}: {reason}", self._generic_failure())
        outcome = self._succeeded(self._scram_user)
        if outcome.error is not None:
            return outcome
        return Outcome(None, final, outcome.session_lifetime_ms)

    def _auth_fn(self, mechanism: str) -> Callable[[str], tuple[bytes, bytes, bytes, int]]:
        kind = credentials.MECHANISMS[mechanism]

        def lookup(user: str) -> tuple[bytes, bytes, bytes, int]:
            self._scram_user = user
            found = (self.security.lookup(user) or {}).get(kind)
            if found is None:
                raise KeyError("unknown user")  # scramp answers "auth_fn exception"
            return credentials.auth_info(found)

        return lookup

    def _generic_failure(self) -> str:
        phase = "re-authentication" if self.reauthenticating else "authentication"
        return (
            f"Authentication failed during {phase} due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )

    def _succeeded(self, user: str) -> Outcome:
        principal = f"User:{user}"
        if not self.admits(principal):
            return self._failed(
                f"{principal} may not connect through listener {self.listener.name}",
                f"Authentication failed: {principal} may not connect through {self.listener.name}",
            )
        if self.reauthenticating and principal != self.principal:
            return self._failed(
                "principal changed during re-authentication",
                f"Cannot change principals during re-authentication from {self.principal}: "
                f"{principal}",
            )
        self.principal = principal
        self.state = State.AUTHENTICATED
        self._scram = None
        lifetime = self.security.reauth_ms
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetime > 0 else None
        if not self.reauthenticating:
            log.debug("%s authenticated with %s", principal, self.mechanism)
        self.reauthenticating = False
        return Outcome(None, b"", lifetime)

    def _failed(self, reason: str, message: str) -> Outcome:
        self._fail(reason, delay=True)
        return Outcome(message)

    def _fail(self, reason: str, *, delay: bool) -> None:
        """Close the connection once the answer has left (Kafka closes it after a failed
        authentication); the reason is logged, never a password."""
        self.state = State.FAILED
        self._scram = None
        close = self._close
        if close is None:
            return
        text = f"SASL authentication failed ({self.mechanism}): {reason}"
        loop = asyncio.get_running_loop()
        loop.call_later(self.security.fail_delay_s if delay else 0.0, close, text)


def _parse_plain(token: bytes) -> tuple[str, str | None, str] | Outcome:
    """(authzid, user, password) of a SASL/PLAIN token (RFC 4616: authzid NUL user NUL
    password); ("", None, reason) for a malformed token (Kafka's generic failure message),
    or an Outcome with Kafka's own message for an empty field."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return "", None, f"malformed SASL/PLAIN token: expected 3 fields, got {len(parts)}"
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        return "", None, "SASL/PLAIN token is not UTF-8"
    if not user:
        return Outcome("Authentication failed: username not specified")
    if not password:
        return Outcome("Authentication failed: password not specified")
    return authzid, user, password
