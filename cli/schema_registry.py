"""``cloudctl get-schema-registry-url NAME``: the base URL of a cluster's schema registry
(Confluent's REST API, served by the control plane), as ``Cluster.schema_registry_url`` gives
it: what Confluent's clients take as ``url`` (``schema.registry.url``) and what curl examples
put before ``/subjects``. A cluster that is not ACTIVE has none yet: an error (exit 1).
"""

from __future__ import annotations

import click

from cli.client import Api, Env
from cli.options import cluster_argument, output_option
from cli.output import CliError, cluster_state, emit
from proto.sluice.v1 import clusters_pb2 as pb

SECURED = (pb.CLIENT_AUTH_SCRAM, pb.CLIENT_AUTH_TLS)


@click.command("get-schema-registry-url")
@cluster_argument
@output_option
@click.pass_obj
def get_schema_registry_url(env: Env, *, name: str, output: str) -> None:
    """Print the base URL of the cluster's schema registry, and nothing else.

    Confluent's clients take it as their url: SchemaRegistryClient({"url": URL}). A cluster
    with SCRAM or TLS clients wants HTTP basic auth with one of its SCRAM users
    ("basic.auth.user.info": "USER:PASSWORD"; curl -u USER). JSON: {cluster, state,
    schema_registry_url, basic_auth}.
    """
    api = Api(env)
    cluster = api.call(api.clusters.GetCluster, pb.GetClusterRequest(name=name))
    url = cluster.schema_registry_url
    if not url:
        raise CliError(
            f"cluster {name!r} is {cluster_state(cluster)}: its schema registry is served once "
            "it is ACTIVE",
            f"wait with cloudctl describe-cluster {name}",
        )
    basic_auth = any(mode in SECURED for mode in cluster.client_auth)
    doc = {
        "cluster": name,
        "state": cluster_state(cluster),
        "schema_registry_url": url,
        "basic_auth": basic_auth,
    }
    emit(output, doc, url)


COMMANDS = [get_schema_registry_url]
