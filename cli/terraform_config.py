"""``cloudctl terraform-config``: the Terraform (and OpenTofu) CLI configuration that installs
the Sluice provider of this installation: ``dev_overrides`` pointing at the directory of the
``terraform-provider-sluice`` console script installed beside cloudctl, or with ``--mirror
DIR`` the ``filesystem_mirror`` block for a mirror that ``terraform-provider-sluice mirror
DIR`` wrote (terraform/README.md "Install").

It prints what ``terraform-provider-sluice cli-config`` prints for the same inputs. cli/ does
not import terraform/ (clients use public APIs only: tests/test_architecture.py), so the
few lines are written here again; tests/terraform/test_install.py checks that both print
the same.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from cli.options import output_option
from cli.output import CliError, emit, progress

EXECUTABLE = "terraform-provider-sluice"
SOURCE = "sluice/sluice"
"""The provider's source address: Terraform and OpenTofu expand it to their own registry."""
HOSTS = ("registry.terraform.io", "registry.opentofu.org")
"""The registry hosts a mirror is written for (one mirror serves both programs)."""


def provider_dir() -> Path:
    """The directory of ``terraform-provider-sluice``: this interpreter's bin directory (the
    venv cloudctl runs in), else the one PATH finds it in."""
    beside = Path(sys.executable).parent
    if (beside / EXECUTABLE).exists():
        return beside
    found = shutil.which(EXECUTABLE)
    if found:
        return Path(found).parent
    raise CliError(
        f"{EXECUTABLE} is not installed beside cloudctl ({beside}) nor on PATH",
        "install Sluice with pip into the environment cloudctl runs from: it brings the "
        "provider's console script",
    )


def cli_config(directory: Path, mirror: Path | None = None) -> str:
    """The CLI configuration: ``dev_overrides`` to ``directory`` (no ``terraform init``
    needed for the provider), or the filesystem mirror ``mirror`` (``terraform init`` works
    offline) with every other provider installed directly."""
    if mirror is None:
        return (
            "provider_installation {\n"
            "  dev_overrides {\n"
            f'    "{SOURCE}" = "{directory}"\n'
            "  }\n"
            "  direct {}\n"
            "}\n"
        )
    listed = ", ".join(f'"{host}/{SOURCE}"' for host in HOSTS)
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


@click.command("terraform-config")
@click.option(
    "--mirror",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help=f"A filesystem mirror (written by `{EXECUTABLE} mirror DIR`) instead of dev_overrides.",
)
@output_option
def terraform_config(*, mirror: Path | None, output: str) -> None:
    """Print the Terraform CLI configuration that installs the Sluice provider.

    \b
    cloudctl terraform-config > ~/.sluice.tfrc
    export TF_CLI_CONFIG_FILE=~/.sluice.tfrc
    With --mirror DIR, `terraform init` installs it from that mirror, offline.
    """
    if mirror is None:
        directory = provider_dir()
    else:
        directory = mirror.resolve()
        if not any((directory / host / SOURCE).is_dir() for host in HOSTS):
            progress(
                f"cloudctl: note: {directory} holds no mirror of the provider yet: write it "
                f"with `{EXECUTABLE} mirror {mirror}`"
            )
    text = cli_config(directory, mirror)
    emit(output, {"cli_config": text, "provider_dir": str(directory)}, text.rstrip("\n"))


COMMANDS = [terraform_config]
