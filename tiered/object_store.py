"""The remote object store behind one interface: ``ObjectStore`` and its S3 implementation.

``S3ObjectStore`` speaks to any endpoint boto3 reaches (AWS S3, MinIO, Ceph, the embedded moto
server). Its only state is its settings: the boto3 client is created on first use in each
process (and again after a fork), so the object pickles (Spark ships it to executors).
Every botocore exception is mapped once, in ``tiered.errors.map_error``. Ranged GETs, the
remote tier's read path, are signed by boto3 and received by ``tiered.ranged_get``
straight into the caller's buffer (``get_range_into``), unless a proxy is configured.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectNotFound, ObjectStoreError, ObjectStoreUnavailable, map_error
from tiered.ranged_get import PRESIGN_SECONDS, RangedGets, proxied


@dataclass(frozen=True)
class ObjectInfo:
    """What a listing or HEAD tells about one object."""

    key: str
    """Full key inside the bucket."""
    size: int
    """Length in bytes."""
    etag: str
    """Entity tag without quotes (an MD5 for single PUTs, ``md5-N`` for multipart)."""
    last_modified: datetime | None = None
    """When the store last wrote it (None where the store does not say)."""


@runtime_checkable
class ObjectStore(Protocol):
    """A bucket of immutable objects. Every method raises only ``ObjectStoreError``s."""

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (idempotent)."""

    def put(self, key: str, data: bytes | Path) -> ObjectInfo:
        """Store ``data`` (bytes, or a file streamed from disk) under ``key``, replacing it."""

    def get(self, key: str) -> bytes:
        """The whole object; ``ObjectNotFound`` if absent."""

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (shorter if it ends first)."""

    def get_range_into(self, key: str, start: int, end: int, out: memoryview) -> int:
        """``get_range`` into the first bytes of ``out`` (at least ``end - start`` long);
        how many were written."""

    def head(self, key: str) -> ObjectInfo:
        """Size and etag; ``ObjectNotFound`` if absent."""

    def exists(self, key: str) -> bool:
        """Whether ``key`` exists."""

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` in key order, page by page."""

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete the keys (absent ones are fine), in batches."""


def _etag(raw: str | None) -> str:
    return (raw or "").strip('"')


class S3ObjectStore:
    """``ObjectStore`` over boto3. Thread-safe; picklable (holds settings only)."""

    def __init__(self, settings: ObjectStoreSettings) -> None:
        self.settings = settings
        self._client: Any = None
        self._gets: RangedGets | None = None
        self._pid = 0
        self._lock = threading.Lock()

    # --- pickling: settings only, the client is rebuilt where it is used -------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"])  # type: ignore[misc]

    def __repr__(self) -> str:
        s = self.settings
        return f"S3ObjectStore(endpoint={s.endpoint!r}, bucket={s.bucket!r})"

    @property
    def bucket(self) -> str:
        return self.settings.bucket

    @property
    def client(self) -> Any:
        """The process's boto3 S3 client, created on first use (and again after a fork)."""
        pid = os.getpid()
        if self._client is None or self._pid != pid:
            with self._lock:
                if self._client is None or self._pid != pid:
                    self._client = self._make_client()
                    self._gets = (
                        None
                        if proxied(self._client.meta.endpoint_url)
                        else (RangedGets(self.settings, self._presign_get, _tls_context))
                    )
                    self._pid = pid
        return self._client

    def _presign_get(self, key: str) -> str:
        return str(
            self.client.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=PRESIGN_SECONDS
            )
        )

    def _make_client(self) -> Any:
        # boto3 is imported here, on the first use, not with this module: it is 0.2-0.5 s
        # of every broker's start, which waits for nothing from the object store
        import boto3  # noqa: PLC0415 - deferred to the first client, see above
        from botocore.config import Config  # noqa: PLC0415 - as boto3

        s = self.settings
        config = Config(
            region_name=s.region,
            connect_timeout=s.connect_timeout_ms / 1000,
            read_timeout=s.read_timeout_ms / 1000,
            retries={"max_attempts": s.max_attempts, "mode": "standard"},
            signature_version="s3v4",  # presigned GETs too (tiered.ranged_get)
            max_pool_connections=s.max_pool_connections,
            s3={"addressing_style": "path" if s.use_path_style else "auto"},
            # only send/verify checksums where S3 requires them: MinIO, Ceph and older
            # gateways reject or ignore the newer default CRC trailers
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        session = boto3.session.Session(
            aws_access_key_id=s.access_key_id,
            aws_secret_access_key=s.secret_access_key,
            aws_session_token=s.session_token,
            region_name=s.region,
        )
        return session.client("s3", endpoint_url=s.endpoint, config=config)

    # --- bucket -----------------------------------------------------------------------------

    def ensure_bucket(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return
        except Exception as exc:
            err = map_error(exc, op="head_bucket", key=self.bucket)
            if not isinstance(err, ObjectNotFound):
                raise err from exc
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.settings.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.settings.region}
        try:
            self.client.create_bucket(**kwargs)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                return
            raise map_error(exc, op="create_bucket", key=self.bucket) from exc

    # --- writes -----------------------------------------------------------------------------

    def put(self, key: str, data: bytes | Path) -> ObjectInfo:
        size = len(data) if isinstance(data, bytes) else self._file_size(data, key)
        if size > self.settings.multipart_threshold_bytes:
            return self._put_multipart(key, data, size)
        try:
            if isinstance(data, bytes):
                resp = self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
            else:
                with open(data, "rb") as f:
                    resp = self.client.put_object(
                        Bucket=self.bucket, Key=key, Body=f, ContentLength=size
                    )
        except Exception as exc:
            raise map_error(exc, op="put", key=key) from exc
        return ObjectInfo(key, size, _etag(resp.get("ETag")))

    @staticmethod
    def _file_size(path: Path, key: str) -> int:
        try:
            return path.stat().st_size
        except OSError as exc:
            raise ObjectStoreError(f"put {key}: cannot read {path}: {exc}", op="put") from exc

    def _put_multipart(self, key: str, data: bytes | Path, size: int) -> ObjectInfo:
        part_bytes = self.settings.multipart_part_bytes
        parts = (size + part_bytes - 1) // part_bytes
        if parts > 10_000:
            raise ObjectStoreError(f"put {key}: {size} bytes need > 10,000 parts", op="put")
        try:
            upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise map_error(exc, op="create_multipart_upload", key=key) from exc
        upload_id = upload["UploadId"]

        def read_part(number: int) -> bytes:
            offset = (number - 1) * part_bytes
            if isinstance(data, bytes):
                return data[offset : offset + part_bytes]
            with open(data, "rb") as f:
                f.seek(offset)
                return f.read(part_bytes)

        def send(number: int) -> dict[str, Any]:
            body = read_part(number)
            resp = self.client.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
            )
            return {"PartNumber": number, "ETag": resp["ETag"]}

        try:
            workers = max(1, min(self.settings.multipart_concurrency, parts))
            with ThreadPoolExecutor(workers, thread_name_prefix="s3-part") as pool:
                done = list(pool.map(send, range(1, parts + 1)))
            resp = self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": done}
            )
        except Exception as exc:
            # best effort: an unreachable store keeps the parts until its lifecycle rule
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise map_error(exc, op="put_multipart", key=key) from exc
        return ObjectInfo(key, size, _etag(resp.get("ETag")))

    def delete_many(self, keys: Iterable[str]) -> None:
        batch: list[str] = []
        for key in keys:
            batch.append(key)
            if len(batch) == self.settings.delete_batch_size:
                self._delete_batch(batch)
                batch = []
        if batch:
            self._delete_batch(batch)

    def _delete_batch(self, keys: list[str]) -> None:
        try:
            resp = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
            )
        except Exception as exc:
            raise map_error(exc, op="delete_many", key=keys[0]) from exc
        errors = resp.get("Errors") or []
        if errors:
            first = errors[0]
            code = str(first.get("Code", ""))
            message = f"delete_many: {len(errors)} keys failed, first {first.get('Key')}: {code}"
            retriable = code in ("InternalError", "SlowDown", "ServiceUnavailable")
            cls = ObjectStoreUnavailable if retriable else ObjectStoreError
            raise cls(message, op="delete_many", key=str(first.get("Key", "")))

    # --- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=key)
            return bytes(resp["Body"].read())
        except Exception as exc:
            raise map_error(exc, op="get", key=key) from exc

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if start < 0 or end <= start:
            raise ValueError(f"get_range {key}: empty or negative range [{start}, {end})")
        self.client  # noqa: B018 - made (with the ranged-GET path) on first use
        if self._gets is not None:
            return bytes(self._gets.get(key, start, end))
        return self._boto_range(key, start, end)

    def get_range_into(self, key: str, start: int, end: int, out: memoryview) -> int:
        if start < 0 or end <= start or len(out) < end - start:
            raise ValueError(f"get_range {key}: bad range [{start}, {end}) or short buffer")
        self.client  # noqa: B018 - as get_range
        if self._gets is not None:
            return int(self._gets.get(key, start, end, out))
        data = self._boto_range(key, start, end)
        out[: len(data)] = data
        return len(data)

    def _boto_range(self, key: str, start: int, end: int) -> bytes:
        try:
            resp = self.client.get_object(
                Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}"
            )
            return bytes(resp["Body"].read())
        except Exception as exc:
            raise map_error(exc, op="get_range", key=key) from exc

    def head(self, key: str) -> ObjectInfo:
        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise map_error(exc, op="head", key=key) from exc
        return ObjectInfo(
            key, int(resp["ContentLength"]), _etag(resp.get("ETag")), resp.get("LastModified")
        )

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
        except ObjectNotFound:
            return False
        return True

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": prefix,
            "MaxKeys": self.settings.list_page_size,
        }
        while True:
            try:
                resp = self.client.list_objects_v2(**kwargs)
            except Exception as exc:
                raise map_error(exc, op="list", key=prefix) from exc
            for item in resp.get("Contents") or []:
                yield ObjectInfo(
                    item["Key"],
                    int(item["Size"]),
                    _etag(item.get("ETag")),
                    item.get("LastModified"),
                )
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                return
            kwargs["ContinuationToken"] = token


def _tls_context() -> ssl.SSLContext:
    """What boto3 verifies an HTTPS endpoint with: ``AWS_CA_BUNDLE``, else botocore's bundle."""
    from botocore.httpsession import get_cert_path  # noqa: PLC0415 - botocore is deferred

    return ssl.create_default_context(cafile=os.environ.get("AWS_CA_BUNDLE") or get_cert_path(True))
