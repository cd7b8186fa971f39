"""The options every noun shares, so that the grammar is the same everywhere (cli/README.md):

- ``--home DIR`` / ``--endpoint HOST:PORT`` on the group and on every command (global
  options: before or after the command name), processed first;
- ``-o table|json|yaml`` on every command (they all print);
- ``--cluster C`` on every noun but clusters, defaulting to ``$SLUICE_CLUSTER`` or the
  cluster chosen with ``cloudctl use-cluster C`` (kept in ``$SLUICE_HOME/context.json``);
- ``--config KEY=VALUE`` (repeatable) on every create and update;
- ``--yes`` and ``--if-exists`` on every delete (a delete asks on a terminal, never without
  one);
- ``--wait`` / ``--timeout`` on every command that starts a long operation.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click
import click.shell_completion

from cli.output import CliError
from proto.sluice.v1 import clusters_pb2
from sluice_client.client import ApiError, Client, Env, home_dir

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_FILE = "context.json"
"""``$SLUICE_HOME/context.json``: ``{"cluster": NAME}``, written by ``cloudctl use-cluster``."""
CLUSTER_VARIABLE = "SLUICE_CLUSTER"
FORMATS = ("table", "json", "yaml")


# ---------------------------------------------------------------------- global options


def _set_home(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.obj = replace(_env(ctx), home=home_dir(value))


def _set_endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.obj = replace(_env(ctx), endpoint_override=value)


def _env(ctx: click.Context) -> Env:
    if ctx.obj is None:
        ctx.obj = Env.from_environ()
    env: Env = ctx.obj
    return env


def global_options() -> list[click.Option]:
    """``--home`` and ``--endpoint``: eager (processed before every other option, so that
    ``--cluster``'s default is read from the right home)."""
    return [
        click.Option(
            ["--home"],
            metavar="DIR",
            type=click.Path(file_okay=False),
            expose_value=False,
            is_eager=True,
            callback=_set_home,
            help="State directory (default: $SLUICE_HOME, else ~/.sluice).",
        ),
        click.Option(
            ["--endpoint"],
            metavar="HOST:PORT",
            expose_value=False,
            is_eager=True,
            callback=_set_endpoint,
            help="Control-plane address (default: $SLUICE_ENDPOINT, else the one `cloudctl up` "
            "recorded).",
        ),
    ]


def add_global_options(command: click.Command) -> None:
    names = {opt for p in command.params for opt in getattr(p, "opts", [])}
    for option in global_options():
        if not names & set(option.opts):
            command.params.append(option)


# ---------------------------------------------------------------------- output


def output_option(func: F) -> F:
    """``-o/--output table|json|yaml``."""
    option = click.option(
        "-o",
        "--output",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Output format; json and yaml carry the same fields and are stable.",
    )
    return option(func)


# ---------------------------------------------------------------------- --cluster


def context_path(env: Env) -> Path:
    return env.home / CONTEXT_FILE


def chosen_cluster(env: Env) -> tuple[str | None, str]:
    """The default cluster and where it comes from: ``$SLUICE_CLUSTER``, else the context
    that ``cloudctl use-cluster`` wrote; (None, "") when neither says."""
    from_env = os.environ.get(CLUSTER_VARIABLE, "").strip()
    if from_env:
        return from_env, CLUSTER_VARIABLE
    try:
        data = json.loads(context_path(env).read_text())
    except (OSError, ValueError):
        return None, ""
    name = data.get("cluster") if isinstance(data, dict) else None
    if isinstance(name, str) and name:
        return name, f"`cloudctl use-cluster` ({context_path(env)})"
    return None, ""


def write_context(env: Env, cluster: str | None) -> None:
    env.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = context_path(env)
    if cluster is None:
        path.unlink(missing_ok=True)
        return
    # a temporary file of its own (two cloudctl at once must not share one), then an
    # atomic rename: readers see the old context or the new one
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(json.dumps({"cluster": cluster}, indent=2) + "\n")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _resolve_cluster(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if value:
        return value
    found, _ = chosen_cluster(_env(ctx))
    if found:
        return found
    raise click.UsageError(
        "no cluster given: add --cluster NAME, set SLUICE_CLUSTER, or choose one with "
        "`cloudctl use-cluster NAME`",
        ctx,
    )


COMPLETION_TIMEOUT = 2.0
"""Seconds shell completion waits for the control plane's list of clusters."""


def complete_cluster(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    """Shell completion of a cluster name: the clusters of the control plane (none when it
    does not answer)."""
    env = ctx.obj if isinstance(ctx.obj, Env) else Env.from_environ()
    endpoint, token = env.endpoint(), env.token()
    if not endpoint or not token:
        return []
    try:
        with Client(endpoint, token) as client:
            reply = client.call(
                client.clusters.ListClusters,
                clusters_pb2.ListClustersRequest(),
                COMPLETION_TIMEOUT,
            )
    except ApiError:
        return []
    return [
        click.shell_completion.CompletionItem(c.name)
        for c in reply.clusters
        if c.name.startswith(incomplete)
    ]


def cluster_argument(func: F) -> F:
    """The NAME argument of a cluster command (completed with the cluster names)."""
    return click.argument("name", shell_complete=complete_cluster)(func)


def cluster_option(func: F) -> F:
    """``--cluster C`` of every noun but clusters (its default: SLUICE_CLUSTER, else
    `cloudctl use-cluster`)."""
    option = click.option(
        "--cluster",
        metavar="C",
        callback=_resolve_cluster,
        shell_complete=complete_cluster,
        help="Cluster (default: $SLUICE_CLUSTER, else the one `cloudctl use-cluster` chose).",
    )
    return option(func)


# ---------------------------------------------------------------------- --config


def parse_settings(items: tuple[str, ...], option: str = "--config") -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        out[key.strip()] = value.strip()
    return out


def config_option(what: str, *, alias: bool = False) -> Callable[[F], F]:
    """``--config KEY=VALUE`` (repeatable); with ``alias``, also the hidden ``--set`` that
    update commands had before (deprecated: scripts keep working)."""

    def decorate(func: F) -> F:
        func = click.option(
            "--config",
            "settings",
            multiple=True,
            metavar="KEY=VALUE",
            help=f"{what} setting (Kafka's name); repeatable.",
        )(func)
        if alias:
            func = click.option(
                "--set",
                "legacy_settings",
                multiple=True,
                metavar="KEY=VALUE",
                hidden=True,
                help="Deprecated alias of --config.",
            )(func)
        return func

    return decorate


def configuration_option(help_text: str) -> Callable[[F], F]:
    """``--configuration NAME[:REVISION]`` (cli.configuration.parse_reference reads it)."""
    return click.option("--configuration", default=None, metavar="NAME[:REVISION]", help=help_text)


tag_option = click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="KEY=VALUE",
    help="A tag of the cluster (MSK's tags); repeatable.",
)
"""``--tag KEY=VALUE`` (repeatable) on the cluster commands that set tags."""


# ---------------------------------------------------------------------- deletes


def delete_options(func: F) -> F:
    """``--yes`` (no question) and ``--if-exists`` (a missing resource is not an error)."""
    func = click.option(
        "--if-exists",
        is_flag=True,
        help="Succeed (exit 0, a note on stderr) when it does not exist.",
    )(func)
    return click.option(
        "-y",
        "--yes",
        is_flag=True,
        help="Do not ask for confirmation (only asked on a terminal).",
    )(func)


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` on a terminal unless ``yes``; without a terminal (scripts, CI) never
    ask. A no is an error: nothing was done."""
    if yes or not sys.stdin.isatty():
        return
    if not click.confirm(f"{question}", default=False, err=True):
        raise CliError("not confirmed; nothing was deleted", "answer y, or add --yes")


# ---------------------------------------------------------------------- waiting

wait_option = click.option(
    "--wait",
    is_flag=True,
    help="Wait until the operation is done, showing progress on stderr.",
)
timeout_option = click.option(
    "--timeout",
    default=300.0,
    show_default=True,
    help="Seconds --wait waits before giving up (the operation goes on).",
)


class BareHelpGroup(click.Group):
    """A command group that prints its help when run without a command (``cloudctl``,
    ``cloudctl billing``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            click.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)
