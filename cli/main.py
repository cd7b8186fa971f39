"""``cloudctl``: the command line of the Sluice control plane.

One module per noun (daemon.py, cluster.py, topic.py, data.py); output.py formats results and
errors; client.py finds and talks to the control plane. Every failure is one line on stderr,
``cloudctl: error: WHAT (what to do)``, with a non-zero exit code (1; 2 for usage errors).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from cli import cluster, daemon, data, topic
from cli.client import Env
from cli.output import CliError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CloudctlGroup(click.Group):
    """A click group whose errors are one line on stderr."""

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(
                args, prog_name or "cloudctl", complete_var, standalone_mode=False, **extra
            )
        except CliError as exc:
            click.echo(exc.line(), err=True)
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "cloudctl"
            click.echo(
                f"cloudctl: error: {exc.format_message()} (see `{command} --help`)", err=True
            )
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            click.echo(f"cloudctl: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except (click.Abort, KeyboardInterrupt):
            click.echo("cloudctl: error: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=CloudctlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option("0.1.0", prog_name="cloudctl")
@click.pass_context
def cloudctl(ctx: click.Context) -> None:
    """Run Kafka-compatible clusters on this machine, as AWS MSK or Redpanda Cloud would.

    \b
    Start here:
      cloudctl up                              start the control plane
      cloudctl create-cluster demo --wait      a 3-broker cluster
      cloudctl get-bootstrap-brokers demo      give this to any Kafka client

    SLUICE_HOME (default ~/.sluice) and SLUICE_ENDPOINT select the state directory and the
    control-plane address.
    """
    if ctx.obj is None:
        ctx.obj = Env.from_environ()


for module in (daemon, cluster, topic, data):
    for command in module.COMMANDS:
        cloudctl.add_command(command)


def main() -> None:
    cloudctl.main()


if __name__ == "__main__":
    main()
