"""Typed object-store errors, mapped once from botocore's exceptions (``map_error``).

Callers see three kinds, never a botocore exception:

- ``ObjectNotFound``: the key (or bucket) does not exist. Not retriable.
- ``ObjectStoreUnavailable``: the store could not be reached or answered 5xx/throttled
  (connection refused, connect/read timeout, reset connection, 500/503, SlowDown). Retriable:
  the uploader keeps the local data and retries with backoff.
- ``ObjectStoreError``: everything else (access denied, bad request, invalid range…). Not
  retriable without a change of configuration.
"""

from __future__ import annotations

from botocore import exceptions as bc

_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404", "NoSuchBucket", "NoSuchUpload"})
_UNAVAILABLE_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "Throttling",
        "ThrottlingException",
        "503",
        "500",
        "502",
        "504",
    }
)


class ObjectStoreError(Exception):
    """An object-store operation failed; ``retriable`` tells whether trying again may help."""

    retriable = False

    def __init__(self, message: str, *, op: str = "", key: str = "") -> None:
        super().__init__(message)
        self.op = op
        self.key = key


class ObjectNotFound(ObjectStoreError):
    """The object (or its bucket) does not exist."""


class ObjectStoreUnavailable(ObjectStoreError):
    """The store is unreachable, timed out, or answered with a server error: retry later."""

    retriable = True


def map_status(status: int, code: str, message: str, *, op: str, key: str = "") -> ObjectStoreError:
    """An S3 error answer (HTTP ``status``, S3's error ``code`` and message) as ours: the
    mapping ``map_error`` applies to botocore's ClientError, for requests made without it."""
    where = f"{op} {key}".strip()
    text = f"{where}: {code or status} {message}".strip()
    if code in _NOT_FOUND_CODES or (status == 404 and not code):
        return ObjectNotFound(text, op=op, key=key)
    if code in _UNAVAILABLE_CODES or status >= 500 or status == 429:
        return ObjectStoreUnavailable(text, op=op, key=key)
    return ObjectStoreError(text, op=op, key=key)


def map_error(exc: BaseException, *, op: str, key: str = "") -> ObjectStoreError:
    """The one place where botocore exceptions become ours."""
    where = f"{op} {key}".strip()
    if isinstance(exc, ObjectStoreError):
        return exc
    if isinstance(exc, bc.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return map_status(status, code, str(error.get("Message", "")), op=op, key=key)
    if isinstance(
        exc,
        bc.ConnectionError  # refused, connect/read timeouts, resets, proxy errors
        | bc.HTTPClientError  # connection closed mid-response
        | ConnectionError
        | TimeoutError,
    ):
        return ObjectStoreUnavailable(f"{where}: {exc}", op=op, key=key)
    if isinstance(exc, bc.NoCredentialsError | bc.PartialCredentialsError):
        return ObjectStoreError(f"{where}: {exc}", op=op, key=key)
    return ObjectStoreError(f"{where}: {type(exc).__name__}: {exc}", op=op, key=key)
