"""Installing the provider: a filesystem mirror for ``terraform init``, and the CLI
configuration that points Terraform at it (or at the venv, with ``dev_overrides``).

The mirror uses Terraform's *unpacked* layout, once per registry host, so that one mirror
serves Terraform (``registry.terraform.io``) and OpenTofu (``registry.opentofu.org``), which
each expand the source ``sluice/sluice`` to their own host::

    DIR/registry.terraform.io/sluice/sluice/VERSION/linux_amd64/terraform-provider-sluice_vVERSION
    DIR/registry.opentofu.org/sluice/sluice/VERSION/linux_amd64/terraform-provider-sluice_vVERSION

The executable is a three-line Python launcher bound to this interpreter (the venv the
provider is installed in): the mirror works as long as that venv does.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

HOSTS = ("registry.terraform.io", "registry.opentofu.org")
NAMESPACE, TYPE = "sluice", "sluice"
EXECUTABLE = "terraform-provider-sluice"
ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def provider_version() -> str:
    """The provider's version: the ``sluice`` distribution's."""
    # importlib.metadata only here: Terraform starts the provider for every plan and apply,
    # and serving never asks for the version (the import is ~40 ms of each start's CPU)
    from importlib import metadata  # noqa: PLC0415

    try:
        return metadata.version("sluice")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def target() -> str:
    """Terraform's name of this platform, e.g. ``linux_amd64``."""
    machine = platform.machine().lower()
    return f"{sys.platform.removesuffix('2')}_{ARCH.get(machine, machine)}"


def addresses() -> list[str]:
    return [f"{host}/{NAMESPACE}/{TYPE}" for host in HOSTS]


def write_mirror(directory: Path, version: str | None = None) -> list[Path]:
    """The launcher under ``directory`` for every host; returns their paths."""
    version = version or provider_version()
    launcher = (
        f"#!{sys.executable}\n"
        f"# {EXECUTABLE} {version}, written by `{EXECUTABLE} mirror`\n"
        "import sys\n"
        "from terraform.main import main\n"
        "sys.exit(main())\n"
    )
    written = []
    for address in addresses():
        folder = directory / address / version / target()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{EXECUTABLE}_v{version}"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(launcher)
        tmp.chmod(0o755)
        os.replace(tmp, path)
        written.append(path)
    return written


def installed_dir() -> Path:
    """The directory of the ``terraform-provider-sluice`` console script (the venv's bin)."""
    return Path(sys.executable).parent


def cli_config(mirror: Path | None = None) -> str:
    """A CLI configuration (``TF_CLI_CONFIG_FILE``) that installs the provider: from the
    filesystem mirror ``mirror`` (``terraform init`` works offline), or without one by
    ``dev_overrides`` to the installed console script (no ``init`` needed for it)."""
    if mirror is None:
        return (
            "provider_installation {\n"
            "  dev_overrides {\n"
            f'    "{NAMESPACE}/{TYPE}" = "{installed_dir()}"\n'
            "  }\n"
            "  direct {}\n"
            "}\n"
        )
    listed = ", ".join(f'"{a}"' for a in addresses())
    return (
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{mirror.resolve()}"\n'
        f"    include = [{listed}]\n"
        "  }\n"
        "  direct {\n"
        f"    exclude = [{listed}]\n"
        "  }\n"
        "}\n"
    )


def main_mirror(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"{EXECUTABLE} mirror",
        description="Write a filesystem mirror of this provider (Terraform's unpacked layout, "
        "for registry.terraform.io and registry.opentofu.org) into DIR.",
    )
    parser.add_argument("dir", type=Path, metavar="DIR")
    parser.add_argument("--version", default=None, help="version to publish (default: installed)")
    args = parser.parse_args(argv)
    for path in write_mirror(args.dir, args.version):
        print(f"wrote {path}")
    print(
        f"next: `{EXECUTABLE} cli-config --mirror {args.dir}` > FILE and "
        "TF_CLI_CONFIG_FILE=FILE, then `terraform init`",
        file=sys.stderr,
    )
    return 0


def main_cli_config(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"{EXECUTABLE} cli-config",
        description="Print a Terraform CLI configuration that installs this provider: "
        "dev_overrides to this venv, or --mirror DIR (written by `mirror`).",
    )
    parser.add_argument("--mirror", type=Path, default=None, metavar="DIR")
    args = parser.parse_args(argv)
    print(cli_config(args.mirror), end="")
    return 0
