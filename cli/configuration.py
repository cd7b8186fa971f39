"""Configuration commands (the Configurations service), as MSK's configurations: named,
revisioned sets of broker settings of the installation. Clusters start with one
(`create-cluster --configuration NAME[:REVISION]`) and move to another revision with
`update-cluster-config NAME --configuration NAME[:REVISION]` (cluster.py). Their output
(JSON with the fields of the gRPC messages, tables) is here too.
"""

from __future__ import annotations

from typing import Any

import click

from cli.client import Api, ApiError, Env, explain
from cli.options import confirm, delete_options, output_option, parse_settings
from cli.output import config_text, emit, fields, progress, rfc3339, table
from proto.sluice.v1 import configurations_pb2 as pb
from proto.sluice.v1 import configurations_pb2_grpc as pb_grpc
from proto.sluice.v1 import errors_pb2 as epb


def configuration_json(found: pb.Configuration) -> dict[str, Any]:
    return {
        "name": found.name,
        "arn": found.arn,
        "revision": found.revision,
        "latest_revision": found.latest_revision,
        "description": found.description,
        "server_properties": dict(sorted(found.server_properties.items())),
        "revisions": [
            {
                "revision": r.revision,
                "description": r.description,
                "created_at": rfc3339(r.created_at),
            }
            for r in found.revisions
        ],
        "clusters": list(found.clusters),
        "created_at": rfc3339(found.created_at),
    }


def configuration_table(found: pb.Configuration) -> str:
    head = fields(
        [
            ("configuration", found.name),
            ("arn", found.arn),
            ("revision", f"{found.revision} of {found.latest_revision}"),
            ("description", found.description or "-"),
            ("settings", config_text(found.server_properties)),
            ("clusters", ", ".join(found.clusters) or "-"),
            ("created", rfc3339(found.created_at)),
        ]
    )
    revisions = table(
        ["REVISION", "CREATED", "DESCRIPTION"],
        [(r.revision, rfc3339(r.created_at), r.description or "-") for r in found.revisions],
    )
    return f"{head}\n\n{revisions}"


def configurations_table(found: list[pb.Configuration]) -> str:
    if not found:
        return "no configurations"
    return table(
        ["NAME", "LATEST", "SETTINGS", "CLUSTERS"],
        [
            (c.name, c.latest_revision, len(c.server_properties), ", ".join(c.clusters) or "-")
            for c in found
        ],
    )


def parse_reference(text: str) -> tuple[str, int]:
    """``NAME`` or ``NAME:REVISION`` (a revision of 0 or none: the latest)."""
    name, sep, revision = text.partition(":")
    if not name or (sep and not revision.isdigit()):
        raise click.BadParameter(
            f"expected NAME or NAME:REVISION, got {text!r}", param_hint="--configuration"
        )
    return name, int(revision) if sep else 0


def _stub(api: Api) -> Any:
    return pb_grpc.ConfigurationsStub(api.client.channel)


def _settings(settings: tuple[str, ...]) -> dict[str, str]:
    if not settings:
        raise click.UsageError("give the revision's settings with --config KEY=VALUE")
    return parse_settings(settings, "--config")


description_option = click.option(
    "--description", default="", help="What the revision is for (at most 1,024 characters)."
)
config_settings_option = click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Broker setting (Kafka's name) of the revision; repeatable.",
)


@click.command("create-configuration")
@click.argument("name")
@config_settings_option
@description_option
@output_option
@click.pass_obj
def create_configuration(
    env: Env, *, name: str, settings: tuple[str, ...], description: str, output: str
) -> None:
    """Create a configuration (its revision 1) of broker settings for clusters to use."""
    api = Api(env)
    request = pb.CreateConfigurationRequest(
        name=name, description=description, server_properties=_settings(settings)
    )
    found = api.call(_stub(api).CreateConfiguration, request)
    emit(output, configuration_json(found), lambda: configuration_table(found))


@click.command("update-configuration")
@click.argument("name")
@config_settings_option
@description_option
@output_option
@click.pass_obj
def update_configuration(
    env: Env, *, name: str, settings: tuple[str, ...], description: str, output: str
) -> None:
    """Make the next revision of a configuration, with exactly the settings given (as MSK).

    Clusters stay on their revision until `cloudctl update-cluster-config C --configuration
    NAME` moves them."""
    api = Api(env)
    request = pb.UpdateConfigurationRequest(
        name=name, description=description, server_properties=_settings(settings)
    )
    found = api.call(_stub(api).UpdateConfiguration, request)
    emit(output, configuration_json(found), lambda: configuration_table(found))


@click.command("describe-configuration")
@click.argument("name")
@click.option("--revision", type=int, default=0, help="Which revision (default: the latest).")
@output_option
@click.pass_obj
def describe_configuration(env: Env, *, name: str, revision: int, output: str) -> None:
    """A configuration's settings at one revision, its revisions and the clusters using it."""
    api = Api(env)
    request = pb.GetConfigurationRequest(name=name, revision=revision)
    found = api.call(_stub(api).GetConfiguration, request)
    emit(output, configuration_json(found), lambda: configuration_table(found))


@click.command("list-configurations")
@output_option
@click.pass_obj
def list_configurations(env: Env, *, output: str) -> None:
    """Every configuration at its latest revision."""
    api = Api(env)
    reply = api.call(_stub(api).ListConfigurations, pb.ListConfigurationsRequest())
    found = list(reply.configurations)
    emit(
        output,
        {"configurations": [configuration_json(c) for c in found]},
        lambda: configurations_table(found),
    )


@click.command("delete-configuration")
@click.argument("name")
@delete_options
@output_option
@click.pass_obj
def delete_configuration(env: Env, *, name: str, yes: bool, if_exists: bool, output: str) -> None:
    """Delete a configuration and its revisions (refused while a cluster uses it)."""
    confirm(f"Delete configuration {name!r} and every revision of it?", yes)
    api = Api(env)
    result = {"name": name, "existed": True, "deleted": True}
    try:
        api.try_call(_stub(api).DeleteConfiguration, pb.DeleteConfigurationRequest(name=name))
    except ApiError as exc:
        if exc.reason != epb.CONFIGURATION_NOT_FOUND or not if_exists:
            raise explain(exc, env) from None
        progress(f"cloudctl: note: configuration {name!r} does not exist; nothing to delete")
        emit(
            output,
            {**result, "existed": False, "deleted": False},
            f"configuration {name!r} does not exist",
        )
        return
    emit(output, result, f"configuration {name!r} deleted")


COMMANDS = [
    create_configuration,
    update_configuration,
    describe_configuration,
    list_configurations,
    delete_configuration,
]
