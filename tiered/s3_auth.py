"""The embedded S3 server's door: AWS Signature Version 4 checked on every request.

``SigV4Front`` is WSGI middleware in front of moto's app (and the disk mirror). A request
reaches moto only when it is signed (``Authorization: AWS4-HMAC-SHA256 …`` header, or a
presigned URL's ``X-Amz-*`` query) with a key of the key file (``tiered.access_keys``), the
signature matches, its time is within 15 minutes, its body matches the signed SHA-256, and
the key may make that request on that bucket. Otherwise S3's own errors, as S3 words them:

- no signature: 403 ``AccessDenied``;
- an unknown access key id: 403 ``InvalidAccessKeyId``;
- a wrong signature (wrong secret, altered request): 403 ``SignatureDoesNotMatch``;
- too old or too new: 403 ``RequestTimeTooSkewed``; a presigned URL past its expiry: 403
  ``AccessDenied``;
- a body whose SHA-256 is not the signed one: 400 ``XAmzContentSHA256Mismatch``;
- a key without the right: 403 ``AccessDenied``.

Also refused: moto's own ``/moto-api/`` (its reset would wipe every bucket), credential
scopes of other services than ``s3`` (moto serves IAM, STS... on the same port), and hosts
other than an IP address or ``localhost`` (buckets are addressed by path only: the bucket a
key's scope is checked against is the one moto serves; the server runs moto with
``S3_IGNORE_SUBDOMAIN_BUCKETNAME``).

Not checked: the per-chunk signatures of ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD`` uploads (the
request's own signature is; boto3 does not send them over plain HTTP), and
``UNSIGNED-PAYLOAD`` bodies (allowed, as S3 does).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from tiered.access_keys import AccessKey, KeyFile

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW = timedelta(minutes=15)
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_SPOOL_BYTES = 8 * 1024 * 1024
_READ_CHUNK = 1024 * 1024
_AUTH_FIELD = re.compile(r"(\w+)=([^,\s]+)")
ACCESS_KEY_ENVIRON = "sluice.s3.access_key"
"""Where ``SigV4Front`` leaves the request's ``AccessKey`` for the apps behind it."""


class Refusal(Exception):
    """A request refused with S3's error ``code`` and HTTP ``status``."""

    def __init__(self, code: str, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Signed:
    """What a request's signature says: the key id, scope, time, headers and signature."""

    key_id: str
    date: str
    region: str
    service: str
    timestamp: str
    signed_headers: list[str]
    signature: str
    payload_hash: str
    presigned_expires: int | None = None


class Keys:
    """The key file's keys by id, read again whenever the file changes (one ``stat`` per
    request)."""

    def __init__(self, key_file: KeyFile) -> None:
        self.key_file = key_file
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._keys: dict[str, AccessKey] = {}

    def get(self, key_id: str) -> AccessKey | None:
        try:
            st = os.stat(self.key_file.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                try:
                    keys = self.key_file.load() if stamp is not None else []
                except (OSError, ValueError, KeyError):
                    keys = list(self._keys.values())  # half-written by hand: keep the last
                self._keys = {k.access_key_id: k for k in keys}
                self._stamp = stamp
            return self._keys.get(key_id)


def _parse_time(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Refusal("AccessDenied", f"bad request time {text!r}") from None


def _query_pairs(query: str) -> list[tuple[str, str]]:
    pairs = []
    for part in query.split("&") if query else []:
        name, _, value = part.partition("=")
        pairs.append((unquote(name), unquote(value)))
    return pairs


def canonical_query(pairs: Iterable[tuple[str, str]]) -> str:
    encoded = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _header(environ: dict[str, Any], name: str) -> str | None:
    if name == "content-type":
        return environ.get("CONTENT_TYPE")
    if name == "content-length":
        return environ.get("CONTENT_LENGTH")
    value = environ.get("HTTP_" + name.upper().replace("-", "_"))
    return value if value is None else str(value)


def parse_signature(environ: dict[str, Any], pairs: list[tuple[str, str]]) -> Signed:
    """The signature of a request, from its Authorization header or presigned query."""
    query = dict(pairs)
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if auth:
        scheme, _, rest = auth.partition(" ")
        if scheme != ALGORITHM:
            raise Refusal(
                "AccessDenied",
                f"only AWS Signature Version 4 ({ALGORITHM}) is accepted by this server",
            )
        fields = dict(_AUTH_FIELD.findall(rest))
        credential = fields.get("Credential", "")
        headers = fields.get("SignedHeaders", "")
        signature = fields.get("Signature", "")
        timestamp = _header(environ, "x-amz-date") or ""
        payload = _header(environ, "x-amz-content-sha256") or ""
        expires = None
    elif "X-Amz-Algorithm" in query:
        if query["X-Amz-Algorithm"] != ALGORITHM:
            raise Refusal("AccessDenied", f"only {ALGORITHM} presigned URLs are accepted")
        credential = query.get("X-Amz-Credential", "")
        headers = query.get("X-Amz-SignedHeaders", "")
        signature = query.get("X-Amz-Signature", "")
        timestamp = query.get("X-Amz-Date", "")
        payload = "UNSIGNED-PAYLOAD"
        try:
            expires = int(query.get("X-Amz-Expires", ""))
        except ValueError:
            raise Refusal("AccessDenied", "X-Amz-Expires is not a number") from None
    else:
        raise Refusal("AccessDenied", "Access Denied (anonymous requests are not accepted)")
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not headers or not signature:
        raise Refusal("AccessDenied", "malformed AWS Signature Version 4 credential")
    key_id, date, region, service, _ = parts
    if service != "s3":
        raise Refusal("AccessDenied", f"this server serves S3 only, not {service!r}")
    if not timestamp.startswith(date):
        raise Refusal("SignatureDoesNotMatch", "the credential's date is not the request's")
    return Signed(
        key_id=key_id,
        date=date,
        region=region,
        service=service,
        timestamp=timestamp,
        signed_headers=headers.split(";"),
        signature=signature,
        payload_hash=payload or "UNSIGNED-PAYLOAD",
        presigned_expires=expires,
    )


def expected_signatures(
    environ: dict[str, Any], pairs: list[tuple[str, str]], signed: Signed, secret: str
) -> list[str]:
    """The signatures the request may carry: its path as sent, and re-encoded (clients
    differ in how they encode a key's characters; S3 accepts either)."""
    raw = str(environ.get("RAW_URI") or environ.get("REQUEST_URI") or "")
    raw_path = raw.split("?", 1)[0] or "/"
    if "://" in raw_path:  # an absolute-form request target
        raw_path = "/" + raw_path.split("://", 1)[1].partition("/")[2]
    paths = [raw_path]
    normalized = quote(unquote(raw_path), safe="/~")
    if normalized != raw_path:
        paths.append(normalized)
    if signed.presigned_expires is not None:
        pairs = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]
    lines = []
    for name in signed.signed_headers:
        value = _header(environ, name)
        if value is None:
            raise Refusal("SignatureDoesNotMatch", f"signed header {name!r} is missing")
        lines.append(f"{name}:{' '.join(value.split())}")
    key = signing_key(secret, signed.date, signed.region, signed.service)
    out = []
    for path in paths:
        canonical = "\n".join(
            [
                str(environ.get("REQUEST_METHOD", "GET")).upper(),
                path,
                canonical_query(pairs),
                "\n".join(lines) + "\n",
                ";".join(signed.signed_headers),
                signed.payload_hash,
            ]
        )
        to_sign = "\n".join(
            [
                ALGORITHM,
                signed.timestamp,
                f"{signed.date}/{signed.region}/{signed.service}/aws4_request",
                hashlib.sha256(canonical.encode()).hexdigest(),
            ]
        )
        out.append(hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest())
    return out


@dataclass(frozen=True)
class Target:
    """What a request acts on and whether it changes anything."""

    bucket: str
    key: str
    write: bool
    manage: bool
    """It changes the bucket itself: DeleteBucket, Put/DeleteBucket* (policy, versioning...)."""
    copy_source_bucket: str


def target(environ: dict[str, Any], pairs: list[tuple[str, str]]) -> Target:
    path = str(environ.get("PATH_INFO") or "/")
    bucket, _, key = path.lstrip("/").partition("/")
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    write = method not in ("GET", "HEAD")
    names = {k for k, _ in pairs}
    create_bucket = method == "PUT" and not names
    delete_objects = method == "POST" and "delete" in names
    manage = write and not key and not (create_bucket or delete_objects)
    source = _header(environ, "x-amz-copy-source") or ""
    source_bucket = unquote(source).lstrip("/").partition("/")[0] if source else ""
    return Target(bucket, key, write, manage, source_bucket)


def _host_allowed(host: str) -> bool:
    if host.startswith("["):  # [v6]:port
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check(environ: dict[str, Any], keys: Keys, now: datetime | None = None) -> AccessKey:
    """The key that signed the request, if the request may pass; else raises ``Refusal``."""
    return _check(environ, keys, now)[0]


def _check(
    environ: dict[str, Any], keys: Keys, now: datetime | None = None
) -> tuple[AccessKey, Signed]:
    path = str(environ.get("PATH_INFO") or "/")
    if path.startswith("/moto-api"):
        raise Refusal("AccessDenied", "moto's API is not served")
    if not _host_allowed(str(environ.get("HTTP_HOST", ""))):
        raise Refusal(
            "AccessDenied",
            "address the server by IP address or localhost, buckets by path (path-style)",
        )
    pairs = _query_pairs(str(environ.get("QUERY_STRING", "")))
    signed = parse_signature(environ, pairs)
    key = keys.get(signed.key_id)
    if key is None:
        raise Refusal(
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records.",
        )
    when = _parse_time(signed.timestamp)
    now = now or datetime.now(UTC)
    if signed.presigned_expires is not None:
        if not 0 < signed.presigned_expires <= MAX_PRESIGN_SECONDS:
            raise Refusal("AccessDenied", "X-Amz-Expires must be 1 to 604800 seconds")
        if now > when + timedelta(seconds=signed.presigned_expires):
            raise Refusal("AccessDenied", "Request has expired")
        if when - now > MAX_SKEW:
            raise Refusal("RequestTimeTooSkewed", "the request's time is in the future")
    elif abs(now - when) > MAX_SKEW:
        raise Refusal(
            "RequestTimeTooSkewed",
            "The difference between the request time and the current time is too large.",
        )
    candidates = expected_signatures(environ, pairs, signed, key.secret_access_key)
    if not any(hmac.compare_digest(sig, signed.signature) for sig in candidates):
        raise Refusal(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.",
        )
    what = target(environ, pairs)
    allowed = key.may(what.bucket, write=what.write, manage=what.manage)
    if allowed and what.copy_source_bucket:
        allowed = key.may(what.copy_source_bucket, write=False)
    if not allowed:
        raise Refusal("AccessDenied", "Access Denied")
    return key, signed


def _verify_body(environ: dict[str, Any], payload_hash: str) -> None:
    """Replace ``wsgi.input`` with a checked copy of the body (spooled to disk above 8 MiB);
    a body whose SHA-256 is not the signed one is refused."""
    if not _HEX64.match(payload_hash):
        return  # UNSIGNED-PAYLOAD, streaming
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length <= 0:
        if payload_hash != EMPTY_SHA256 and not environ.get("HTTP_TRANSFER_ENCODING"):
            raise Refusal("XAmzContentSHA256Mismatch", "the body is not the signed one", 400)
        return
    source = environ["wsgi.input"]
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - handed on
    digest = hashlib.sha256()
    left = length
    while left > 0:
        block = source.read(min(_READ_CHUNK, left))
        if not block:
            break
        digest.update(block)
        spool.write(block)
        left -= len(block)
    spool.seek(0)
    environ["wsgi.input"] = spool
    if left or digest.hexdigest() != payload_hash:
        spool.close()
        raise Refusal(
            "XAmzContentSHA256Mismatch",
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
            400,
        )


def error_body(refusal: Refusal, resource: str) -> bytes:
    def esc(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{refusal.code}</Code><Message>{esc(refusal.message)}</Message>"
        f"<Resource>{esc(resource)}</Resource><RequestId>{uuid.uuid4().hex}</RequestId></Error>"
    ).encode()


_REASONS = {400: "Bad Request", 403: "Forbidden"}


class SigV4Front:
    """WSGI middleware: only signed, allowed requests reach ``app``."""

    def __init__(self, app: Callable[..., Any], key_file: Path) -> None:
        self.app = app
        self.keys = Keys(KeyFile(key_file))

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        try:
            key, signed = _check(environ, self.keys)
            _verify_body(environ, signed.payload_hash)
            environ[ACCESS_KEY_ENVIRON] = key
        except Refusal as refusal:
            body = error_body(refusal, str(environ.get("PATH_INFO") or "/"))
            head = str(environ.get("REQUEST_METHOD", "")).upper() == "HEAD"
            start_response(
                f"{refusal.status} {_REASONS.get(refusal.status, 'Error')}",
                [
                    ("Content-Type", "application/xml"),
                    ("Content-Length", "0" if head else str(len(body))),
                    ("x-amz-error-code", refusal.code),
                ],
            )
            return [] if head else [body]
        return self.app(environ, start_response)
