"""ApiVersions (18): the API keys and version ranges this broker speaks."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.api_versions.v4 import request as req
from kio.schema.api_versions.v4 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.handlers._versions import SUPPORTED_VERSIONS
from dataplane.handlers.context import RequestContext

API_KEY = 18
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.ApiVersionsRequest) -> Any:
    keys = tuple(
        ctx.make(resp.ApiVersion, api_key=key, min_version=lo, max_version=hi)
        for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
    )
    return ctx.make(
        resp.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=keys, throttle_time=ZERO
    )


def unsupported_version_response() -> Any:
    """The v0 answer to an ApiVersions request of a version we do not speak (KIP-511)."""
    return ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(
            ApiVersion(api_key=k, min_version=lo, max_version=hi)  # type: ignore[arg-type]
            for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
        ),
    )
