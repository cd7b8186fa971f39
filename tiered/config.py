"""Object-store settings of a cluster; attribute ``a_b_c`` is key ``tiered.s3.a.b.c``.

Every limit has a number and a key (tiered/README.md lists them). Settings are a frozen,
picklable value: the S3 client is built from them lazily, in the process that uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

PREFIX = "tiered.s3."

MiB = 1024 * 1024


@dataclass(frozen=True)
class ObjectStoreSettings:
    """Where the remote tier lives and how hard to try; one bucket per cluster by default."""

    endpoint: str | None = None
    """S3 endpoint URL (MinIO, Ceph, the embedded server); None: AWS's own for the region."""
    bucket: str = "sluice"
    """Bucket of the cluster (objects go under ``CLUSTER/TOPIC-TOPICID/PARTITION/``)."""
    region: str = "us-east-1"
    """Region the client signs for and the bucket is created in."""
    access_key_id: str | None = None
    """Static credentials; None: boto3's default chain (env, profile, instance role)."""
    secret_access_key: str | None = None
    session_token: str | None = None
    path_style: bool | None = None
    """Path-style addressing; None: on for a custom endpoint, virtual-hosted for AWS."""
    connect_timeout_ms: int = 2_000
    """Time to open a TCP connection before the attempt fails."""
    read_timeout_ms: int = 30_000
    """Time to wait for bytes on an open connection (a 64 MiB part on a slow link)."""
    max_attempts: int = 3
    """Attempts per request, first included (botocore ``standard`` retries with jitter)."""
    max_pool_connections: int = 16
    """HTTP connections one client keeps (>= multipart concurrency)."""
    multipart_threshold_bytes: int = 16 * MiB
    """Uploads larger than this use multipart upload."""
    multipart_part_bytes: int = 8 * MiB
    """Size of one part (S3: 5 MiB..5 GiB, at most 10,000 parts)."""
    multipart_concurrency: int = 4
    """Parts in flight at once; memory held is about concurrency x part size."""
    list_page_size: int = 1_000
    """Keys per ListObjectsV2 page (S3 maximum 1,000)."""
    delete_batch_size: int = 1_000
    """Keys per DeleteObjects request (S3 maximum 1,000)."""

    def __post_init__(self) -> None:
        if self.multipart_part_bytes < 5 * MiB:
            raise ValueError("tiered.s3.multipart.part.bytes must be at least 5 MiB (S3)")
        if not 1 <= self.list_page_size <= 1_000:
            raise ValueError("tiered.s3.list.page.size must be 1..1000")
        if not 1 <= self.delete_batch_size <= 1_000:
            raise ValueError("tiered.s3.delete.batch.size must be 1..1000")
        for name in ("connect_timeout_ms", "read_timeout_ms", "max_attempts"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{PREFIX}{name.replace('_', '.')} must be positive")

    @property
    def use_path_style(self) -> bool:
        return self.path_style if self.path_style is not None else self.endpoint is not None

    @classmethod
    def keys(cls) -> list[str]:
        return [PREFIX + f.name.replace("_", ".") for f in fields(cls)]

    @classmethod
    def from_properties(cls, raw: Mapping[str, str]) -> ObjectStoreSettings:
        """Settings from ``tiered.s3.*`` keys; other keys are ignored, bad values refused."""
        by_key = {PREFIX + f.name.replace("_", "."): f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, text in raw.items():
            field = by_key.get(key)
            if field is None:
                continue
            kind = str(field.type)
            if "int" in kind:
                try:
                    values[field.name] = int(text)
                except ValueError:
                    raise ValueError(f"{key}: not an integer: {text!r}") from None
            elif "bool" in kind:
                if text.lower() not in ("true", "false"):
                    raise ValueError(f"{key}: not true/false: {text!r}")
                values[field.name] = text.lower() == "true"
            else:
                values[field.name] = (text or None) if "None" in kind else text
        return cls(**values)
