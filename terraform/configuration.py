"""``sluice_configuration`` (resource and data source), and the ``configuration_info`` block
of ``sluice_cluster``: named, revisioned broker settings, as MSK's configurations.

A configuration is of the installation, not of a cluster (MSK's are of the account). Its
``server_properties`` is text in Kafka's properties format, exactly as
``aws_msk_configuration``'s (a ``<<PROPERTIES`` heredoc ports unchanged), parsed here into
the map the Configurations API takes (:mod:`terraform.properties`). A new
``server_properties`` or ``description`` makes the next revision (UpdateConfiguration) in
place; revisions never change, so ``latest_revision`` moves on and clusters that refer to it
(``configuration_info { revision = sluice_configuration.x.latest_revision }``) are moved to
it in the same apply. Destroy is DeleteConfiguration, which the control plane refuses while
a cluster uses the configuration. Import id: its name.

Reading keeps the text as written while it means the settings the API has (order, spacing
and comments are the configuration's own); otherwise (a revision made outside Terraform, an
import) the text is the settings as ``key = value`` lines sorted by key.

``configuration_info`` names a revision as ``aws_msk_cluster``'s does: ``arn`` (the
configuration's ARN, ``arn:sluice:kafka:local:configuration/NAME/ID``: NAME is taken from
it) or ``name``, and ``revision``. The state keeps the form the configuration used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tf.schema import Attribute, Block, Schema
from tf.types import Number, String, Unknown
from tf.utils import Diagnostics

from proto.sluice.v1 import configurations_pb2 as pb
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ApiError
from terraform.api import Api, ProviderError
from terraform.common import (
    DataSourceBase,
    ResourceBase,
    SingleBlock,
    State,
    blank,
    given,
    known,
)
from terraform.properties import PropertiesError, parse, render

ARN = re.compile(r"arn:sluice:kafka:local:configuration/([A-Za-z0-9][A-Za-z0-9-]{0,63})/([^/]+)")
"""A configuration's ARN (the Configurations API's ``Configuration.arn``): its name and id."""
ARN_EXAMPLE = "arn:sluice:kafka:local:configuration/NAME/ID"


def arn_name(arn: str) -> str | None:
    """NAME of ``arn:sluice:kafka:local:configuration/NAME/ID``; None for another text."""
    found = ARN.fullmatch(arn)
    return found.group(1) if found else None


def get_configuration(api: Api, name: str, revision: int = 0) -> pb.Configuration | None:
    """``name`` at ``revision`` (0: the latest), or None when there is no such one."""
    try:
        found: pb.Configuration = api.call(
            api.configurations.GetConfiguration,
            pb.GetConfigurationRequest(name=name, revision=revision),
        )
    except ApiError as exc:
        if exc.reason == epb.CONFIGURATION_NOT_FOUND:
            return None
        raise
    return found


# ---------------------------------------------------------------------- configuration_info


INFO_BLOCK = SingleBlock(
    "configuration_info",
    Block(
        attributes=[
            Attribute(
                "arn",
                String(),
                description=f"The configuration's ARN, `{ARN_EXAMPLE}` "
                "(`sluice_configuration.x.arn`, as aws_msk_cluster takes it); or give `name`.",
                optional=True,
            ),
            Attribute(
                "name",
                String(),
                description="The configuration's name, instead of `arn`.",
                optional=True,
            ),
            Attribute(
                "revision",
                Number(),
                description="The revision, 1 or more (`sluice_configuration.x.latest_revision`).",
                required=True,
            ),
        ],
        description="The configuration revision whose settings the brokers start with (MSK's "
        "`configuration_info`); `kafka_config` wins where both set a key. Another revision or "
        "configuration is applied in place by a rolling restart; the block cannot be removed "
        "once the cluster has one (the API keeps the revision a cluster uses).",
    ),
)


@dataclass(frozen=True)
class Revision:
    """The revision a ``configuration_info`` block names."""

    name: str
    revision: int
    arn: str | None
    """The ARN the block gave, to compare with the configuration's (None: given by name)."""


def wanted_revision(block: Any) -> Revision | None:
    """The revision of a block whose values are known (None: no block)."""
    if not isinstance(block, dict):
        return None
    arn = given(block, "arn")
    name = arn_name(arn) if arn else given(block, "name")
    if not name or not known(block.get("revision")):
        raise ProviderError(
            "configuration_info names no configuration",
            f"Give `arn` ({ARN_EXAMPLE}) or `name`, and `revision`.",
            ["configuration_info"],
        )
    return Revision(name, int(block["revision"]), arn)


def check_info(diags: Diagnostics, config: State) -> None:
    """The block's values, as far as they are known when validating."""
    block = config.get("configuration_info")
    if not isinstance(block, dict):
        return
    arn, name, revision = block.get("arn"), block.get("name"), block.get("revision")
    path = ["configuration_info"]
    if arn is not None and name is not None:
        diags.add_error(
            "configuration_info has both arn and name",
            "Give one of them (arn as aws_msk_cluster does, or name).",
            path=path,
        )
    elif arn is None and name is None:
        diags.add_error(
            "configuration_info has neither arn nor name",
            "Give `arn = sluice_configuration.x.arn` (or `name`).",
            path=path,
        )
    if known(arn) and arn_name(arn) is None:
        diags.add_error(
            f"configuration_info.arn {arn!r} is not a configuration's ARN",
            f"Give {ARN_EXAMPLE} (`sluice_configuration.x.arn`), or `name` instead.",
            path=[*path, "arn"],
        )
    if known(revision) and (revision != int(revision) or revision < 1):
        diags.add_error(
            f"configuration_info.revision must be a whole number of at least 1, not {revision}",
            "Give the revision to use, e.g. `sluice_configuration.x.latest_revision`.",
            path=[*path, "revision"],
        )


def find_revision(api: Api, wanted: Revision) -> pb.Configuration:
    """The revision a block names, checked: it exists, and the ARN given is its
    configuration's (not one of a configuration deleted and made again under its name)."""
    found = get_configuration(api, wanted.name, wanted.revision)
    if found is None:
        raise ProviderError(
            f"Configuration {wanted.name!r} has no revision {wanted.revision}",
            "Check `configuration_info`; `cloudctl describe-configuration "
            f"{wanted.name}` lists its revisions (`cloudctl list-configurations` the "
            "configurations).",
            ["configuration_info"],
        )
    if wanted.arn is not None and found.arn != wanted.arn:
        raise ProviderError(
            f"configuration_info.arn {wanted.arn!r} is not configuration {wanted.name!r}'s ARN",
            f"Its ARN is {found.arn} (the configuration was made again under its name): use "
            "`sluice_configuration.x.arn`, or `name`.",
            ["configuration_info", "arn"],
        )
    return found


def info_state(prior: Any, found: pb.Configuration) -> dict[str, Any]:
    """The block as the state holds it: in the form the prior block used (ARN, as MSK's,
    when there is none: an import)."""
    by_name = isinstance(prior, dict) and given(prior, "arn") is None and given(prior, "name")
    return {
        "arn": None if by_name else found.arn,
        "name": found.name if by_name else None,
        "revision": found.revision,
    }


# ---------------------------------------------------------------------- the resource


COMPUTED = [
    Attribute("id", String(), description="The configuration's name.", computed=True),
    Attribute("arn", String(), description=f"ARN-like id, `{ARN_EXAMPLE}`.", computed=True),
]
LATEST = Attribute(
    "latest_revision",
    Number(),
    description="The newest revision (1 when made; each update adds one).",
    computed=True,
)


def configuration_state(found: pb.Configuration, prior: State | None, schema: Schema) -> State:
    """The state of a configuration at its latest revision; ``prior`` keeps the text of
    ``server_properties`` while it means the same settings, and a null description null."""
    prior = prior or {}
    text = given(prior, "server_properties")
    settings = dict(found.server_properties)
    if text is None or _settings(text) != settings:
        text = render(settings)
    state = blank(schema)
    state.update(
        id=found.name,
        arn=found.arn,
        name=found.name,
        description=found.description or ("" if given(prior, "description") is not None else None),
        server_properties=text,
        latest_revision=found.latest_revision,
    )
    return state


def _settings(text: str) -> dict[str, str] | None:
    try:
        return parse(text)
    except PropertiesError:
        return None


def settings_of(text: str) -> dict[str, str]:
    """The settings of ``server_properties``; a mistake is a diagnostic on it."""
    try:
        return parse(text)
    except PropertiesError as exc:
        raise ProviderError(
            f"server_properties is not in the properties format: {exc}",
            "Write one `key = value` a line (Kafka's server.properties; `#` starts a comment).",
            ["server_properties"],
        ) from None


class ConfigurationResource(ResourceBase):
    NAME = "configuration"
    SCHEMA = Schema(
        version=0,
        description="Named, revisioned broker settings (MSK's `aws_msk_configuration`), of "
        "the installation: clusters refer to a revision in their `configuration_info`. "
        "Import id: its name.",
        attributes=[
            *COMPUTED,
            Attribute(
                "name",
                String(),
                description="1-64 ASCII letters, digits and hyphens, not starting with a "
                "hyphen. A new name replaces the configuration.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "description",
                String(),
                description="Description of the revision; a new one makes the next revision.",
                optional=True,
            ),
            Attribute(
                "server_properties",
                String(),
                description="Broker settings in Kafka's properties format, one `key = value` a "
                "line, as aws_msk_configuration's (a `<<PROPERTIES` heredoc). A change makes the "
                "next revision, in place.",
                required=True,
            ),
            LATEST,
        ],
    )

    def check(self, diags: Diagnostics, config: State) -> None:
        text = config.get("server_properties")
        if known(text):
            try:
                settings_of(text)
            except ProviderError as exc:
                diags.add_error(exc.summary, exc.detail, path=exc.path)

    def do_create(self, planned: State) -> State:
        api = self.api()
        request = pb.CreateConfigurationRequest(
            name=planned["name"],
            description=given(planned, "description") or "",
            server_properties=settings_of(planned["server_properties"]),
        )
        found = api.call(api.configurations.CreateConfiguration, request)
        return configuration_state(found, planned, self.SCHEMA)

    def do_read(self, current: State) -> State | None:
        found = get_configuration(self.api(), current["name"])
        return None if found is None else configuration_state(found, current, self.SCHEMA)

    def do_plan(self, current: State, planned: State, changed: set[str]) -> State:
        if self.new_revision(current, planned):
            planned["latest_revision"] = Unknown
        return planned

    @staticmethod
    def new_revision(current: State, planned: State) -> bool:
        """Whether the plan makes a revision: other settings or another description (text
        that means the same settings does not)."""
        text, described = planned.get("server_properties"), planned.get("description")
        if not known(text) or (described is not None and not known(described)):
            return True
        return _settings(text) != _settings(current.get("server_properties") or "") or (
            described or ""
        ) != (given(current, "description") or "")

    def do_update(self, current: State, planned: State) -> State:
        api = self.api()
        name = current["name"]
        if self.new_revision(current, planned):
            request = pb.UpdateConfigurationRequest(
                name=name,
                description=given(planned, "description") or "",
                server_properties=settings_of(planned["server_properties"]),
            )
            found = api.call(api.configurations.UpdateConfiguration, request)
        else:
            found = get_configuration(api, name)
            if found is None:
                raise ProviderError(
                    f"Configuration {name!r} is gone",
                    "Something deleted it meanwhile; apply again to create it.",
                )
        return configuration_state(found, planned, self.SCHEMA)

    def do_delete(self, current: State) -> None:
        api = self.api()
        name = current["name"]
        try:
            api.call(
                api.configurations.DeleteConfiguration, pb.DeleteConfigurationRequest(name=name)
            )
        except ApiError as exc:
            if exc.reason == epb.CONFIGURATION_NOT_FOUND:
                return
            if exc.code.name == "FAILED_PRECONDITION":
                raise ProviderError(
                    f"Configuration {name!r} cannot be deleted: {exc.message}",
                    "A configuration is deleted once no cluster uses it: move those clusters "
                    "to another configuration (their `configuration_info`) or destroy them "
                    "first. Nothing was deleted.",
                ) from None
            raise

    def do_import(self, id_: str) -> State | None:
        found = get_configuration(self.api(), id_)
        return None if found is None else configuration_state(found, None, self.SCHEMA)


class ConfigurationData(DataSourceBase):
    NAME = "configuration"
    SCHEMA = Schema(
        version=0,
        description="An existing configuration at its latest revision (MSK's "
        "`aws_msk_configuration` data source).",
        attributes=[
            Attribute("name", String(), description="The configuration's name.", required=True),
            *COMPUTED,
            Attribute(
                "description",
                String(),
                description="Description of the latest revision.",
                computed=True,
            ),
            Attribute(
                "server_properties",
                String(),
                description="Its settings, `key = value` lines sorted by key.",
                computed=True,
            ),
            LATEST,
        ],
    )

    def do_read(self, config: State) -> State:
        name = config["name"]
        found = get_configuration(self.api(), name)
        if found is None:
            raise ProviderError(
                f"No configuration named {name!r}",
                "Check `name`; `cloudctl list-configurations` lists the configurations.",
                ["name"],
            )
        state = configuration_state(found, None, self.SCHEMA)
        state["description"] = found.description
        return state
