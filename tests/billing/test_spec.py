"""The billing job's spec: what ``parse_spec`` accepts and what it refuses, by name."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from billing.spec import SpecError, parse_spec


def spec(clusters: list[dict[str, Any]], archives: list[dict[str, Any]] | None = None) -> Any:
    return {
        "output": "out",
        "checkpoints": "checkpoints",
        "clusters": clusters,
        "archives": archives or [],
    }


# Cluster ids are base64url of a UUID: 2 in 64 of them begin with - or _.
DASH_ID = base64.urlsafe_b64encode(b"\xf9" + bytes(15)).decode().rstrip("=")
UNDERSCORE_ID = base64.urlsafe_b64encode(b"\xfd" + bytes(15)).decode().rstrip("=")


@pytest.mark.parametrize("cluster_id", [DASH_ID, UNDERSCORE_ID, "MkU3OEVBNTcwNTJENDM2Qk"])
def test_every_base64url_cluster_id_is_accepted(cluster_id: str) -> None:
    assert cluster_id[0] in "-_M"
    parsed = parse_spec(
        spec(
            [{"name": "c1", "id": cluster_id, "bootstrap": "127.0.0.1:9092"}],
            [{"name": "old", "id": cluster_id, "path": "old.jsonl"}],
        )
    )
    assert parsed.clusters[0].id == cluster_id
    assert parsed.archives[0].id == cluster_id


@pytest.mark.parametrize("cluster_id", ["", "a/b", "a b", "x" * 65, "../up"])
def test_a_cluster_id_outside_base64url_is_refused_by_name(cluster_id: str) -> None:
    with pytest.raises(SpecError, match=r"clusters\[0\]\.id .* is not a cluster id"):
        parse_spec(spec([{"name": "c1", "id": cluster_id, "bootstrap": "127.0.0.1:9092"}]))


def test_a_cluster_name_must_begin_with_a_letter_or_digit() -> None:
    with pytest.raises(SpecError, match=r"clusters\[0\]\.name '-c1' is not a cluster name"):
        parse_spec(spec([{"name": "-c1", "id": "abc", "bootstrap": "127.0.0.1:9092"}]))
