"""tiered.s3.* settings."""

from __future__ import annotations

import pytest

from tiered.config import MiB, ObjectStoreSettings


def test_from_properties() -> None:
    s = ObjectStoreSettings.from_properties(
        {
            "tiered.s3.endpoint": "http://127.0.0.1:9000",
            "tiered.s3.bucket": "c1",
            "tiered.s3.connect.timeout.ms": "500",
            "tiered.s3.path.style": "false",
            "other.key": "ignored",
        }
    )
    assert (s.endpoint, s.bucket, s.connect_timeout_ms, s.path_style) == (
        "http://127.0.0.1:9000",
        "c1",
        500,
        False,
    )
    assert not s.use_path_style
    assert ObjectStoreSettings(endpoint="http://x").use_path_style
    assert not ObjectStoreSettings().use_path_style
    keys = ObjectStoreSettings.keys()
    assert "tiered.s3.multipart.part.bytes" in keys


@pytest.mark.parametrize(
    "raw",
    [
        {"tiered.s3.max.attempts": "many"},
        {"tiered.s3.max.attempts": "0"},
        {"tiered.s3.path.style": "yes"},
        {"tiered.s3.multipart.part.bytes": str(MiB)},
        {"tiered.s3.list.page.size": "1001"},
    ],
)
def test_bad_values_refused(raw: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"tiered\.s3"):
        ObjectStoreSettings.from_properties(raw)
