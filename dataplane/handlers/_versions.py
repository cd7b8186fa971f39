"""The API versions the broker announces in ApiVersions (filled by ``registry`` when it
loads the handler modules; a leaf module, so that the ApiVersions handler reads it without
importing the registry that imports it)."""

from __future__ import annotations

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {}
