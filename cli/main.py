"""``cloudctl``: the command line of the Sluice control plane.

One module per noun (daemon.py, context.py, cluster.py, operation.py, logs.py, topic.py,
group.py, data.py, transform.py, security.py, endpoint.py, configuration.py, billing.py,
terraform_config.py, schema_registry.py, replicator.py); options.py holds the options
every noun shares (the grammar of cli/README.md), output.py and formats.py the output;
client.py finds and talks to the control plane. Exit codes: 0 success, 1 error (one line on
stderr, ``cloudctl: error: WHAT (what to do)``), 2 usage error, 130 interrupted.
``cloudctl`` alone prints the help and exits 0.
"""

from __future__ import annotations

import faulthandler
import importlib
import signal
import sys
from typing import Any

import click

from cli.client import Env
from cli.options import BareHelpGroup, add_global_options, global_options
from cli.output import CliError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
SHORT_HELP_LIMIT = 120
"""Characters of a command's one-line help in `cloudctl --help` (click's default, 45, cut
them off)."""

SECTIONS: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    (
        "Control plane",
        (
            ("daemon", ("up", "down", "status", "rotate-token")),
            ("context", ("use-cluster",)),
            ("terraform_config", ("terraform-config",)),
        ),
    ),
    (
        "Clusters (NAME argument)",
        (
            (
                "cluster",
                (
                    "create-cluster",
                    "describe-cluster",
                    "list-clusters",
                    "get-bootstrap-brokers",
                    "get-ca-cert",
                    "update-broker-count",
                    "update-cluster-config",
                    "update-cluster-security",
                    "tag-cluster",
                    "reboot-broker",
                    "delete-cluster",
                ),
            ),
            ("schema_registry", ("get-schema-registry-url",)),
            ("operation", ("list-operations", "describe-operation")),
            ("logs", ("logs",)),
        ),
    ),
    (
        "Configurations (of every cluster)",
        (
            (
                "configuration",
                (
                    "create-configuration",
                    "update-configuration",
                    "describe-configuration",
                    "list-configurations",
                    "delete-configuration",
                ),
            ),
        ),
    ),
    (
        "Topics (--cluster C)",
        (
            (
                "topic",
                (
                    "create-topic",
                    "list-topics",
                    "describe-topic",
                    "add-partitions",
                    "alter-topic-config",
                    "delete-topic",
                    "find-orphans",
                ),
            ),
        ),
    ),
    (
        "Consumer groups (--cluster C)",
        (("group", ("list-groups", "describe-group", "reset-offsets", "delete-group")),),
    ),
    ("Records (--cluster C)", (("data", ("produce", "consume")),)),
    (
        "Transforms (--cluster C)",
        (
            (
                "transform",
                (
                    "deploy-transform",
                    "list-transforms",
                    "describe-transform",
                    "pause-transform",
                    "resume-transform",
                    "delete-transform",
                    "transform-logs",
                ),
            ),
        ),
    ),
    (
        "Users and ACLs (--cluster C)",
        (
            (
                "security",
                (
                    "create-user",
                    "list-users",
                    "delete-user",
                    "create-acl",
                    "list-acls",
                    "delete-acl",
                ),
            ),
        ),
    ),
    (
        "Private endpoints (--cluster C)",
        (
            (
                "endpoint",
                (
                    "create-private-endpoint",
                    "list-private-endpoints",
                    "describe-private-endpoint",
                    "delete-private-endpoint",
                ),
            ),
        ),
    ),
    (
        "Replicators (between two clusters)",
        (
            (
                "replicator",
                (
                    "create-replicator",
                    "describe-replicator",
                    "list-replicators",
                    "delete-replicator",
                ),
            ),
        ),
    ),
    (
        "Usage and billing (every cluster; --cluster C for one)",
        (("billing", ("usage", "invoice", "list-invoices", "cost-chart", "billing")),),
    ),
)
"""The help's sections: each lists the commands of its noun modules (``cli.<module>``'s
``COMMANDS``, in that order). A command's module is imported only when the command runs
(or the whole help is printed): with every noun and its dependencies loaded, a command
took 450-500 ms of CPU to start, with its own 280-330 (tests/cli/test_grammar.py checks this
table against the modules' ``COMMANDS``)."""

MODULE_OF: dict[str, str] = {
    name: module for _, nouns in SECTIONS for module, names in nouns for name in names
}
"""Command name -> the noun module (under ``cli``) that defines it."""


class CloudctlGroup(BareHelpGroup):
    """A click group whose errors are one line on stderr, whose help lists the commands by
    noun with their whole one-line help, and which prints that help when run alone."""

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

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(MODULE_OF) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in MODULE_OF:
            self.load(MODULE_OF[cmd_name])
        return self.commands.get(cmd_name)

    def load(self, module: str) -> None:
        """Add the commands of ``cli.<module>``, with the options every command takes."""
        for command in importlib.import_module(f"cli.{module}").COMMANDS:
            if command.name not in self.commands:
                add_global_options(command)
                self.add_command(command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed = set()
        for title, nouns in SECTIONS:
            rows = []
            for _module, names in nouns:
                for name in names:
                    command = self.get_command(ctx, name)
                    if command is not None and not command.hidden:
                        rows.append((name, command.get_short_help_str(SHORT_HELP_LIMIT)))
                        listed.add(name)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        others = [
            (name, cmd.get_short_help_str(SHORT_HELP_LIMIT))
            for name in self.list_commands(ctx)
            if name not in listed and (cmd := self.get_command(ctx, name)) and not cmd.hidden
        ]
        if others:
            with formatter.section("Other commands"):
                formatter.write_dl(others)


@click.group(
    cls=CloudctlGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    params=global_options(),
)
@click.version_option("0.1.0", prog_name="cloudctl")
@click.pass_context
def cloudctl(ctx: click.Context) -> None:
    """Run Kafka-compatible clusters on this machine, as AWS MSK or Redpanda Cloud would.

    \b
    Start here:
      cloudctl up                              start the control plane
      cloudctl create-cluster demo --wait      a 3-broker cluster
      cloudctl use-cluster demo                the default of --cluster from now on
      cloudctl get-bootstrap-brokers demo      give this to any Kafka client

    \b
    Every command takes --home DIR and --endpoint HOST:PORT (also $SLUICE_HOME,
    $SLUICE_ENDPOINT) and -o table|json|yaml. Exit codes: 0 ok, 1 error, 2 usage.
    Shell completion: eval "$(_CLOUDCTL_COMPLETE=bash_source cloudctl)" (zsh_source,
    fish_source). The full grammar: cli/README.md.
    """
    if ctx.obj is None:
        ctx.obj = Env.from_environ()


def all_commands() -> dict[str, click.Command]:
    """Every command of ``cloudctl`` by name, each noun module loaded."""
    for module in dict.fromkeys(MODULE_OF.values()):
        cloudctl.load(module)
    return dict(cloudctl.commands)


def main() -> None:
    # SIGQUIT (Ctrl-\) prints every thread's stack to stderr and cloudctl goes on, as a JVM
    # does: where a cloudctl that does not answer is waiting. Its own handler, not the
    # inherited disposition (a shell's background job starts with SIGQUIT ignored).
    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=False)
    cloudctl.main()


if __name__ == "__main__":
    main()
