"""Real Terraform (or OpenTofu) against a real control plane, for tests/terraform.

The binary: ``$SLUICE_TERRAFORM``, else ``terraform`` on PATH, else the OpenTofu that
``make terraform-bin`` (tools/terraform-bin.sh) built under .cache/opentofu/. Every run has
its own HOME and CLI configuration (``dev_overrides`` for ``sluice/sluice`` pointing at the
venv's bin directory, which holds the ``terraform-provider-sluice`` console script),
CHECKPOINT_DISABLE=1 and no network: the proxies point at a closed port on loopback, so a
download attempt fails at once instead of reaching the internet. Terraform runs in its own
process group, killed (with its provider plugins) if it outlives its timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO

PROVIDER_DIR = Path(sys.executable).parent
"""The venv's bin directory: ``terraform-provider-sluice`` (the console script) is there."""
RUN_TIMEOUT = 600.0
"""Longest one terraform command may take (a cluster's create, update or delete waits)."""
DEAD_PROXY = "http://127.0.0.1:9"
"""A proxy nothing listens on: any download attempt fails at once."""


def terraform_binary() -> Path | None:
    override = os.environ.get("SLUICE_TERRAFORM")
    if override:
        return Path(override)
    found = shutil.which("terraform")
    if found:
        return Path(found)
    built = sorted((REPO / ".cache" / "opentofu").glob("*/tofu"))
    return built[-1] if built else None


def dev_overrides_config() -> str:
    return (
        "provider_installation {\n"
        "  dev_overrides {\n"
        f'    "sluice/sluice" = "{PROVIDER_DIR}"\n'
        "  }\n"
        "  direct {}\n"
        "}\n"
    )


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def ok(self) -> Result:
        assert self.returncode == 0, (
            f"terraform {' '.join(self.args)} exited {self.returncode}:\n{self.stderr[-5000:]}"
            f"\n--- stdout (its end) ---\n{self.stdout[-2000:]}"
        )
        return self


@dataclass
class Terraform:
    """One test's Terraform: its binary, HOME, CLI configuration and environment."""

    binary: Path
    home: Path
    environ: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(
        cls, binary: Path, home: Path, sluice_home: Path, endpoint: str, cli_config: str = ""
    ) -> Terraform:
        home.mkdir(parents=True, exist_ok=True)
        config = home / "cli.tfrc"
        config.write_text(cli_config or dev_overrides_config())
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TF_", "SLUICE_", "CHECKPOINT_"))
            and k.lower() not in ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
        }
        environ = {
            **keep,
            "HOME": str(home),
            "TF_CLI_CONFIG_FILE": str(config),
            "CHECKPOINT_DISABLE": "1",
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "SLUICE_HOME": str(sluice_home),
            "SLUICE_ENDPOINT": endpoint,
            "HTTP_PROXY": DEAD_PROXY,
            "HTTPS_PROXY": DEAD_PROXY,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        return cls(binary, home, environ)

    def run(
        self,
        workdir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        drop: tuple[str, ...] = (),
        timeout: float = RUN_TIMEOUT,
    ) -> Result:
        """``terraform ARGS`` in ``workdir``; ``env`` adds variables, ``drop`` removes some."""
        environ = {k: v for k, v in {**self.environ, **(env or {})}.items() if k not in drop}
        proc = subprocess.Popen(
            [str(self.binary), *args],
            cwd=workdir,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            raise AssertionError(
                f"terraform {' '.join(args)} ran over {timeout}s:\n{stdout}{stderr}"
            ) from None
        return Result(tuple(args), proc.returncode, stdout, stderr)

    def apply(self, workdir: Path, *args: str, **kw: Any) -> Result:
        return self.run(workdir, "apply", "-auto-approve", "-no-color", *args, **kw)

    def destroy(self, workdir: Path, **kw: Any) -> Result:
        return self.run(workdir, "destroy", "-auto-approve", "-no-color", **kw)

    def plan(self, workdir: Path, *args: str, **kw: Any) -> Result:
        return self.run(workdir, "plan", "-no-color", *args, **kw)

    def changes(self, workdir: Path, **kw: Any) -> dict[str, list[str]]:
        """The plan's actions by resource address, no-ops and data reads left out."""
        self.plan(workdir, "-out=tfplan", **kw).ok()
        shown = self.run(workdir, "show", "-json", "tfplan", **kw).ok()
        plan = json.loads(shown.stdout)
        return {
            change["address"]: change["change"]["actions"]
            for change in plan.get("resource_changes", [])
            if change["change"]["actions"] not in (["no-op"], ["read"])
        }

    def outputs(self, workdir: Path) -> dict[str, Any]:
        shown = self.run(workdir, "output", "-json").ok()
        return {name: out["value"] for name, out in json.loads(shown.stdout).items()}

    def state(self, workdir: Path) -> dict[str, dict[str, Any]]:
        """Every resource in the state (data sources included): address -> attributes."""
        shown = self.run(workdir, "show", "-json").ok()
        values = json.loads(shown.stdout).get("values") or {}
        root = values.get("root_module") or {}
        return {r["address"]: r["values"] for r in root.get("resources", [])}


def write(workdir: Path, text: str) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "main.tf").write_text(text)
    return workdir
