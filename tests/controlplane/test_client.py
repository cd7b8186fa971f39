"""The shared control-plane client (sluice_client/client.py): where the control plane is,
and the import rules around it (clients use public APIs only; no cycles in spark/)."""

from __future__ import annotations

import ast
from pathlib import Path

import grpc
import pytest

from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ApiError, Env, home_dir
from tests.conftest import REPO


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at top level or inside functions (``from a import b``
    counts as ``a`` and as ``a.b``, which may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module in ("controlplane", "spark"):  # packages: names are modules
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def ours(modules: set[str], package: str) -> set[str]:
    return {m for m in modules if m == package or m.startswith(package + ".")}


def test_the_client_imports_nothing_of_the_server() -> None:
    modules = imported_modules(REPO / "sluice_client" / "client.py")
    assert ours(modules, "controlplane") == set()
    allowed = {"__future__", "collections", "dataclasses", "os", "pathlib", "types", "typing"}
    allowed |= {"grpc", "grpc_status", "google", "proto"}
    assert {m.split(".")[0] for m in modules} <= allowed


@pytest.mark.parametrize("package", ["cli", "spark"])
def test_clients_use_only_the_shared_client_of_the_control_plane(package: str) -> None:
    for path in sorted((REPO / package).rglob("*.py")):
        used = ours(imported_modules(path), "controlplane")
        assert not used, f"{path.relative_to(REPO)} imports {used}"


def test_spark_options_and_control_plane_import_no_cycle() -> None:
    options = imported_modules(REPO / "spark" / "options.py")
    control_plane = imported_modules(REPO / "spark" / "control_plane.py")
    keys = imported_modules(REPO / "spark" / "keys.py")
    assert "spark.control_plane" in options
    assert ours(control_plane, "spark.options") == set()
    assert ours(keys, "spark") == set()


def test_explicit_values_win_over_the_environment_and_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "endpoint").write_text("127.0.0.1:1\n")
    (tmp_path / "token").write_text("from-file\n")
    monkeypatch.setenv("SLUICE_HOME", str(tmp_path))
    monkeypatch.delenv("SLUICE_ENDPOINT", raising=False)
    monkeypatch.delenv("SLUICE_TOKEN", raising=False)
    env = Env.from_environ()
    assert (env.home, env.endpoint(), env.token()) == (tmp_path, "127.0.0.1:1", "from-file")
    monkeypatch.setenv("SLUICE_ENDPOINT", "127.0.0.1:2")
    monkeypatch.setenv("SLUICE_TOKEN", "from-env")
    env = Env.from_environ()
    assert (env.endpoint(), env.token()) == ("127.0.0.1:2", "from-env")
    env = Env.from_environ(endpoint="127.0.0.1:3", token="given")
    assert (env.endpoint(), env.token()) == ("127.0.0.1:3", "given")
    assert Env.from_environ(str(tmp_path / "other")).home == tmp_path / "other"


def test_nothing_recorded(tmp_path: Path) -> None:
    env = Env(tmp_path)
    assert (env.endpoint(), env.token()) == (None, None)
    assert env.token_path == tmp_path / "token"


def test_home_defaults_to_dot_sluice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLUICE_HOME", raising=False)
    assert home_dir() == Path("~/.sluice").expanduser().absolute()


class BareRpcError(grpc.RpcError):
    """An RpcError that is no grpc.Call (so it has no trailers)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_errors_without_error_info() -> None:
    down = ApiError.from_rpc(BareRpcError(grpc.StatusCode.UNAVAILABLE, "connect failed"), "e:1")
    assert (down.reason, down.reason_name) == (
        epb.CONTROL_PLANE_UNAVAILABLE,
        "CONTROL_PLANE_UNAVAILABLE",
    )
    assert (down.message, down.endpoint, str(down)) == ("connect failed", "e:1", "connect failed")
    other = ApiError.from_rpc(BareRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, ""))
    assert (other.reason, other.message) == (epb.ERROR_REASON_UNSPECIFIED, "DEADLINE_EXCEEDED")
