"""``terraform-provider-sluice``: the provider plugin Terraform and OpenTofu run, and two
commands for people.

    terraform-provider-sluice                  (run by Terraform: serves plugin protocol 6)
    terraform-provider-sluice mirror DIR       a filesystem mirror for `terraform init`
    terraform-provider-sluice cli-config [--mirror DIR]
                                               the CLI configuration block that installs it
    terraform-provider-sluice --version

Terraform starts the plugin with ``TF_PLUGIN_MAGIC_COOKIE`` set; run by hand without it, the
plugin says what it is instead of waiting for a handshake. Its log lines go to stderr, which
Terraform records in its own log (``TF_LOG``); no value of a resource is logged.
"""

from __future__ import annotations

import logging
import os
import sys

from tf.runner import run_provider

from terraform.mirror import cli_config, main_cli_config, main_mirror, provider_version
from terraform.provider import SluiceProvider

__all__ = ["cli_config", "main"]

USAGE = """\
terraform-provider-sluice: the Sluice provider for Terraform and OpenTofu (plugin protocol 6).

Terraform runs this program; to install it, either
  - print a CLI configuration with dev_overrides:   terraform-provider-sluice cli-config
  - or write a filesystem mirror for `terraform init`:
        terraform-provider-sluice mirror DIR
        terraform-provider-sluice cli-config --mirror DIR
and point TF_CLI_CONFIG_FILE at the configuration (terraform/README.md has the details).
"""


def _version(argv: list[str]) -> int:
    print(f"terraform-provider-sluice {provider_version()}")
    return 0


def _help(argv: list[str]) -> int:
    print(USAGE, end="")
    return 0


COMMANDS = {
    "mirror": main_mirror,
    "cli-config": main_cli_config,
    "--version": _version,
    "-h": _help,
    "--help": _help,
    "help": _help,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in COMMANDS:
        return COMMANDS[args[0]](args[1:])
    if args or not os.environ.get("TF_PLUGIN_MAGIC_COOKIE"):
        print(USAGE, end="", file=sys.stderr)
        if args:
            print(f"unknown arguments: {' '.join(args)}", file=sys.stderr)
            return 2
        return 1
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="[%(levelname)s] %(message)s")
    run_provider(SluiceProvider(), [sys.argv[0]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
