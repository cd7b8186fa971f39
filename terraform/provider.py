"""The provider itself: its configuration (``endpoint``, ``token``, ``ca_file``), the
connection every resource shares, and the list of resources and data sources.

Terraform configures the provider once per run (ConfigureProvider) and then calls resources
from several threads: the connection is made once, on first use, under a lock (a gRPC
channel is thread-safe).
"""

from __future__ import annotations

import threading
from typing import Any

from tf.iface import Provider
from tf.schema import Attribute, Schema
from tf.types import String
from tf.utils import Diagnostics

from terraform.api import Api, ProviderError, Settings, resolve
from terraform.cluster import BootstrapBrokersData, ClusterData, ClusterResource
from terraform.common import known
from terraform.configuration import ConfigurationData, ConfigurationResource
from terraform.endpoint import PrivateEndpointResource
from terraform.security import AclResource, UserResource
from terraform.topic import TopicData, TopicResource
from terraform.transform import TransformResource

SOURCE = "sluice/sluice"
"""The provider's source address (`required_providers`); Terraform and OpenTofu expand it
to their own registry host."""
FULL_NAME = f"registry.terraform.io/{SOURCE}"

RESOURCES: list[Any] = [
    ClusterResource,
    TopicResource,
    UserResource,
    AclResource,
    PrivateEndpointResource,
    TransformResource,
    ConfigurationResource,
]
DATA_SOURCES: list[Any] = [ClusterData, BootstrapBrokersData, TopicData, ConfigurationData]

SCHEMA = Schema(
    version=0,
    description="Sluice: clusters, configurations, topics, users, ACLs, private endpoints and "
    "transforms of a Sluice control plane.",
    attributes=[
        Attribute(
            "endpoint",
            String(),
            description="The control plane's HOST:PORT. Default: `SLUICE_ENDPOINT`, else the "
            "address `cloudctl up` recorded in `$SLUICE_HOME/endpoint` (`SLUICE_HOME` defaults "
            "to `~/.sluice`).",
            optional=True,
        ),
        Attribute(
            "token",
            String(),
            description="The API token. Default: `SLUICE_TOKEN`, else `$SLUICE_HOME/token`. "
            "Sensitive: pass it in a variable or the environment, never in a file you commit.",
            optional=True,
            sensitive=True,
        ),
        Attribute(
            "ca_file",
            String(),
            description="PEM file of the CA certificates the control plane's TLS endpoint is "
            "signed by (a control plane behind a TLS-terminating proxy). Unset: plaintext gRPC.",
            optional=True,
        ),
    ],
)


class SluiceProvider(Provider):  # tf ships no type information: Provider is Any
    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._error: ProviderError | None = None
        self._api: Api | None = None
        self._lock = threading.Lock()

    def get_model_prefix(self) -> str:
        return "sluice_"

    def full_name(self) -> str:
        return FULL_NAME

    def get_provider_schema(self, diags: Diagnostics) -> Schema:
        return SCHEMA

    def validate_config(self, diags: Diagnostics, config: dict[str, Any]) -> None:
        unknown = sorted(set(config or {}) - {a.name for a in SCHEMA.attributes})
        for name in unknown:
            diags.add_error(f"Unknown provider argument {name!r}", "Use endpoint, token, ca_file.")

    def configure_provider(self, diags: Diagnostics, config: dict[str, Any]) -> None:
        config = config or {}
        late = [k for k, v in config.items() if v is not None and not known(v)]
        try:
            if late:
                raise ProviderError(
                    f"The provider's {', '.join(late)} is known only after apply",
                    "Give the provider values known at plan time (variables, the environment).",
                    [late[0]],
                )
            self._settings = resolve(
                config.get("endpoint"), config.get("token"), config.get("ca_file")
            )
        except ProviderError as exc:
            self._error = exc
            diags.add_error(exc.summary, exc.detail, path=exc.path)

    def settings(self) -> Settings:
        if self._settings is None:
            raise self._error or ProviderError(
                "The Sluice provider is not configured", "This is a bug of the provider."
            )
        return self._settings

    def api(self) -> Api:
        with self._lock:
            if self._api is None:
                self._api = Api(self.settings())
            return self._api

    def get_data_sources(self) -> list[Any]:
        return DATA_SOURCES

    def get_resources(self) -> list[Any]:
        return RESOURCES
