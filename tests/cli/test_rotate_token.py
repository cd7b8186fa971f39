"""`cloudctl rotate-token`: a new API token in the token file (0600, never printed); the
previous one refused at once, or after a grace period; a client on another home gets the
new token in its own token file."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from proto.sluice.v1 import controlplane_pb2 as pb
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ApiError, Client
from tests.cli.conftest import Cloud


def token(cloud: Cloud) -> str:
    return (cloud.home / "token").read_text().strip()


def status_with(cloud: Cloud, given: str) -> pb.Status:
    with Client(cloud.endpoint, given) as client:
        answer: pb.Status = client.call(client.control_plane.GetStatus, pb.GetStatusRequest(), 10)
        return answer


def test_rotation_refuses_the_previous_token(cloud: Cloud) -> None:
    old = token(cloud)
    done = cloud.run("rotate-token")
    assert done.returncode == 0, done.stderr
    new = token(cloud)
    assert new != old
    assert new not in done.stdout + done.stderr
    assert stat.S_IMODE((cloud.home / "token").stat().st_mode) == 0o600
    assert status_with(cloud, new).pid > 0
    with pytest.raises(ApiError) as refused:
        status_with(cloud, old)
    assert refused.value.reason == epb.TOKEN_INVALID
    assert cloud.run("status").returncode == 0, "cloudctl reads the new token from the file"


GRACE_S = 20


def test_grace_keeps_the_previous_token_for_a_while(cloud: Cloud) -> None:
    old = token(cloud)
    # The server's grace ends GRACE_S after the rotation, which happened before `answered`:
    # once `answered + GRACE_S` has passed, it has ended whatever the machine's load.
    done = cloud.run("rotate-token", "--grace", str(GRACE_S))
    answered = time.monotonic()
    assert done.returncode == 0, done.stderr
    assert "valid until" in done.stdout
    assert status_with(cloud, old).pid > 0, "refused within its grace period"
    time.sleep(max(0.0, answered + GRACE_S + 0.5 - time.monotonic()))
    with pytest.raises(ApiError):
        status_with(cloud, old)
    assert cloud.run("rotate-token", "--grace", "5000").returncode == 2


def test_a_client_on_another_home_gets_the_new_token(cloud: Cloud, tmp_path: Path) -> None:
    other = Cloud(tmp_path / "other", cloud.endpoint)
    other.home.mkdir()
    (other.home / "token").write_text(token(cloud) + "\n")
    done = other.run("rotate-token", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert token(other) == token(cloud), "both token files hold the new token"
    assert stat.S_IMODE((other.home / "token").stat().st_mode) == 0o600


def test_a_second_rotation_keeps_the_first_ones_grace(cloud: Cloud) -> None:
    """Each rotation's grace is the replaced token's own: a later rotation does not cut it
    short. A rotation without grace ends them all (a token that leaked)."""
    tokens = [token(cloud)]
    for _ in range(2):
        done = cloud.run("rotate-token", "--grace", "600")
        assert done.returncode == 0, done.stderr
        tokens.append(token(cloud))
    assert len(set(tokens)) == 3
    for given in tokens:
        assert status_with(cloud, given).pid > 0, "a token within its grace was refused"
    done = cloud.run("rotate-token")
    assert done.returncode == 0, done.stderr
    for given in tokens:
        with pytest.raises(ApiError) as refused:
            status_with(cloud, given)
        assert refused.value.reason == epb.TOKEN_INVALID
    assert status_with(cloud, token(cloud)).pid > 0
