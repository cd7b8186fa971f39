"""SCRAM credentials (RFC 5802/7677), as Kafka stores them: the salt, the iteration count,
StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword,
"Server Key"). Neither the password nor the salted password is kept anywhere: a client
proves it knows the password (SCRAM), or sends it over the connection (PLAIN) and the
broker derives StoredKey from it with the stored salt and iterations and compares."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from dataplane.cluster import records as r

MECHANISMS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""Kafka's SCRAM mechanism types (AlterUserScramCredentials, DescribeUserScramCredentials)."""
NAMES: dict[int, str] = {v: k for k, v in MECHANISMS.items()}
HASHES: dict[int, str] = {1: "sha256", 2: "sha512"}
MIN_ITERATIONS = 4096
"""Kafka's ScramMechanism.minIterations for both mechanisms."""
MAX_ITERATIONS = 16384
"""Kafka's ScramControlManager.MAX_ITERATIONS."""
SALT_BYTES = 32


def _hmac(key: bytes, message: bytes, digest: str) -> bytes:
    return hmac.new(key, message, digest).digest()


def salted_password(password: str, salt: bytes, iterations: int, mechanism: int) -> bytes:
    """Hi() of RFC 5802: PBKDF2 with the mechanism's HMAC (the password's UTF-8 bytes, as
    Kafka's ScramFormatter)."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def from_salted(
    name: str, mechanism: int, salt: bytes, salted: bytes, iterations: int
) -> r.ScramCredential:
    """The record of a credential from a salted password (what admin clients send)."""
    digest = HASHES[mechanism]
    client_key = _hmac(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = _hmac(salted, b"Server Key", digest)
    return r.ScramCredential(
        name=name,
        mechanism=mechanism,
        salt=_b64(salt),
        stored_key=_b64(stored_key),
        server_key=_b64(server_key),
        iterations=iterations,
    )


def from_password(
    name: str, mechanism: int, password: str, iterations: int = MIN_ITERATIONS
) -> r.ScramCredential:
    salt = os.urandom(SALT_BYTES)
    salted = salted_password(password, salt, iterations, mechanism)
    return from_salted(name, mechanism, salt, salted, iterations)


def auth_info(credential: r.ScramCredential) -> tuple[bytes, bytes, bytes, int]:
    """What ``scramp``'s server asks of its auth_fn: salt, StoredKey, ServerKey, i."""
    return (
        base64.b64decode(credential.salt),
        base64.b64decode(credential.stored_key),
        base64.b64decode(credential.server_key),
        credential.iterations,
    )


def password_matches(credential: r.ScramCredential, password: str) -> bool:
    """PLAIN against a stored SCRAM credential: derive StoredKey from ``password`` with the
    credential's salt and iterations and compare in constant time. CPU-bound (PBKDF2):
    call it in a thread (hashlib releases the GIL)."""
    salt, stored_key, _, iterations = auth_info(credential)
    derived = from_salted(
        credential.name,
        credential.mechanism,
        salt,
        salted_password(password, salt, iterations, credential.mechanism),
        iterations,
    )
    return hmac.compare_digest(base64.b64decode(derived.stored_key), stored_key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
