"""Installing the provider: the plugin run by hand says what it is; a filesystem mirror
(``terraform-provider-sluice mirror``) lets ``terraform init`` install it with no network;
``cloudctl terraform-config`` prints the CLI configuration the provider's ``cli-config``
prints (cli/ has its own copy of the text); terraform/README.md's tables are the schema's;
the build script of the binary is a no-op when there is one. No control plane is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli import terraform_config
from terraform import docs, mirror
from terraform.mirror import HOSTS, provider_version, target
from tests.conftest import REPO
from tests.terraform.harness import Terraform, write

PROVIDER = str(Path(sys.executable).parent / "terraform-provider-sluice")
CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "TF_PLUGIN_MAGIC_COOKIE"}
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=120,
        check=False,
    )


def test_the_plugin_run_by_hand_says_what_it_is() -> None:
    done = run(PROVIDER)
    assert done.returncode == 1
    assert "Terraform runs this program" in done.stderr
    assert done.stdout == ""
    version = run(PROVIDER, "--version")
    assert version.stdout == f"terraform-provider-sluice {provider_version()}\n"
    assert run(PROVIDER, "serve", "now").returncode == 2


def test_a_filesystem_mirror_installs_it_with_no_network(
    tmp_path: Path, terraform_bin: Path
) -> None:
    mirror = tmp_path / "mirror"
    made = run(PROVIDER, "mirror", str(mirror))
    assert made.returncode == 0, made.stderr
    version = provider_version()
    for host in HOSTS:
        launcher = mirror / host / "sluice" / "sluice" / version / target()
        assert (launcher / f"terraform-provider-sluice_v{version}").stat().st_mode & 0o111
    config = run(PROVIDER, "cli-config", "--mirror", str(mirror))
    assert config.returncode == 0, config.stderr
    assert "filesystem_mirror" in config.stdout

    tf = Terraform.make(terraform_bin, tmp_path / "home", tmp_path / "no-sluice", "127.0.0.1:9",
                        cli_config=config.stdout)  # fmt: skip
    workdir = write(
        tmp_path / "work",
        f"""
terraform {{
  required_providers {{
    sluice = {{
      source  = "sluice/sluice"
      version = "{version}"
    }}
  }}
}}
resource "sluice_topic" "t" {{
  cluster = "c"
  name    = "t"
}}
""",
    )
    init = tf.run(workdir, "init", "-no-color", "-input=false")
    assert init.returncode == 0, init.output
    assert f"Installed sluice/sluice v{version}" in init.stdout
    lock = (workdir / ".terraform.lock.hcl").read_text()
    assert "/sluice/sluice" in lock
    assert f'version     = "{version}"' in lock
    # the installed plugin answers: validate asks it for the schema
    tf.run(workdir, "validate", "-no-color").ok()


@pytest.mark.parametrize("where", [None, "mirror", "relative/mirror", "with space"])
def test_cloudctl_and_the_provider_print_the_same_cli_configuration(
    where: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    directory = None if where is None else Path(where)
    expected = mirror.cli_config(directory)
    assert terraform_config.cli_config(terraform_config.provider_dir(), directory) == expected
    source = f"{mirror.NAMESPACE}/{mirror.TYPE}"
    assert (source, mirror.HOSTS) == (terraform_config.SOURCE, terraform_config.HOSTS)
    args = [] if directory is None else ["--mirror", str(directory)]
    printed = subprocess.run(
        [CLOUDCTL, "terraform-config", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr
    provider = subprocess.run(
        [PROVIDER, "cli-config", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert printed.stdout == provider.stdout == expected


def test_the_readme_tables_are_generated_from_the_schema() -> None:
    text = docs.README.read_text()
    assert docs.replaced(text, docs.render()) == text, (
        "terraform/README.md is out of date: run `python -m terraform.docs --write`"
    )


def test_the_build_script_uses_terraform_from_path_when_there_is_one(terraform_bin: Path) -> None:
    if terraform_bin.name != "terraform":
        return  # OpenTofu (or SLUICE_TERRAFORM): the script's other branch is in use
    done = subprocess.run(
        [str(REPO / "tools" / "terraform-bin.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PATH": f"{terraform_bin.parent}:{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stderr
    assert "using terraform on PATH" in done.stdout
    assert "nothing to build" in done.stdout
