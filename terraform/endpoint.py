"""``sluice_private_endpoint``: a private endpoint of a cluster (MSK's multi-VPC private
connectivity, Redpanda's private links): a listener of its own on every broker, bound to its
own loopback address, whose clients learn only that endpoint's addresses.

Creating and deleting one is a cluster operation (UPDATE_CONNECTIVITY: the brokers restart
one at a time), waited for within the ``timeouts`` block. The API changes nothing of an
endpoint in place: every argument replaces it. Import id: ``CLUSTER/NAME``.
"""

from __future__ import annotations

import time

from tf.schema import Attribute, Schema
from tf.types import String
from tf.utils import Diagnostics

from proto.sluice.v1 import endpoints_pb2 as pb
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ApiError
from terraform.api import Api, ProviderError
from terraform.cluster import AUTH_NAME, CLIENT_AUTH
from terraform.common import (
    POLL_INTERVAL,
    Deadline,
    ResourceBase,
    SetOf,
    State,
    Timeouts,
    blank,
    create_busy,
    given,
    id_parts,
    known,
    list_value,
    log,
    retry_busy,
)

GONE = (epb.CLUSTER_NOT_FOUND, epb.ENDPOINT_NOT_FOUND)


def state_name(state: int) -> str:
    return pb.PrivateEndpointState.Name(state).removeprefix("PRIVATE_ENDPOINT_STATE_")


def get(api: Api, cluster: str, name: str) -> pb.PrivateEndpoint | None:
    try:
        found: pb.PrivateEndpoint = api.call(
            api.endpoints.GetPrivateEndpoint,
            pb.GetPrivateEndpointRequest(cluster=cluster, name=name),
        )
    except ApiError as exc:
        if exc.reason in GONE:
            return None
        raise
    return found


class PrivateEndpointResource(ResourceBase):
    NAME = "private_endpoint"
    TIMEOUTS = Timeouts(create=30 * 60, update=30 * 60, delete=30 * 60)
    SCHEMA = Schema(
        version=0,
        description="A private endpoint of a cluster (MSK's multi-VPC connectivity). Import "
        "id: `CLUSTER/NAME`.",
        attributes=[
            Attribute("id", String(), description="`CLUSTER/NAME`.", computed=True),
            Attribute(
                "cluster",
                String(),
                description="Name of the cluster; a new one replaces the endpoint.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "name",
                String(),
                description="1-32 ASCII letters, digits and hyphens, starting with a letter; "
                "unique in the cluster regardless of case. A new name replaces the endpoint.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "client_authentication",
                String(),
                description="How its clients authenticate: `none`, `scram` or `tls`, one of the "
                "cluster's modes (default: its first). A new value replaces the endpoint.",
                optional=True,
                computed=True,
                requires_replace=True,
            ),
            Attribute(
                "allowed_principals",
                SetOf(String()),
                description="Principals it admits (`User:NAME`, `User:CN=...` for TLS); unset: "
                "every principal the cluster admits. Not with `none`. A new set replaces the "
                "endpoint.",
                optional=True,
                requires_replace=True,
            ),
            Attribute(
                "state", String(), description="CREATING, ACTIVE or DELETING.", computed=True
            ),
            Attribute(
                "listener_name",
                String(),
                description="Its Kafka listener name on every broker, `ENDPOINT_<NAME>`.",
                computed=True,
            ),
            Attribute(
                "security_protocol",
                String(),
                description="PLAINTEXT, SASL_SSL or SSL (Kafka clients' `security.protocol`).",
                computed=True,
            ),
            Attribute(
                "address",
                String(),
                description="The loopback address it is bound to.",
                computed=True,
            ),
            Attribute(
                "bootstrap_brokers",
                String(),
                description="host:port,... of its listener on every broker, as clients take it.",
                computed=True,
            ),
        ],
        block_types=[TIMEOUTS.block()],
    )

    def check(self, diags: Diagnostics, config: State) -> None:
        mode = config.get("client_authentication")
        if known(mode) and mode not in CLIENT_AUTH:
            diags.add_error(
                f"Invalid client_authentication {mode!r}",
                "Use none, scram or tls (one of the cluster's modes).",
                path=["client_authentication"],
            )

    def state_of(self, found: pb.PrivateEndpoint, prior: State | None) -> State:
        prior = prior or {}
        state = blank(self.SCHEMA)
        state.update(
            id=f"{found.cluster}/{found.name}",
            cluster=found.cluster,
            name=found.name,
            client_authentication=AUTH_NAME.get(found.client_auth, str(found.client_auth)),
            allowed_principals=list_value(
                prior.get("allowed_principals"), sorted(found.allowed_principals)
            ),
            state=state_name(found.state),
            listener_name=found.listener_name,
            security_protocol=found.security_protocol,
            address=found.address,
            bootstrap_brokers=found.bootstrap_brokers,
            timeouts=prior.get("timeouts"),
        )
        return state

    def _wait(
        self, api: Api, cluster: str, name: str, deadline: Deadline, *, gone: bool
    ) -> pb.PrivateEndpoint | None:
        last = ""
        while True:
            found = get(api, cluster, name)
            if found is None:
                if gone:
                    return None
                raise ProviderError(
                    f"Private endpoint {name!r} of cluster {cluster!r} vanished while created",
                    "Something deleted it meanwhile; apply again to create it.",
                )
            state = state_name(found.state)
            if state != last:
                log.info("sluice: private endpoint %s/%s: %s", cluster, name, state)
                last = state
            if not gone and found.state == pb.PRIVATE_ENDPOINT_STATE_ACTIVE:
                return found
            if deadline.passed():
                raise ProviderError(
                    f"Private endpoint {name!r} of cluster {cluster!r} still {state} "
                    f"{deadline.describe()}",
                    "The operation goes on in the control plane: follow it with `cloudctl "
                    f"describe-private-endpoint --cluster {cluster} {name}` and apply again.",
                    state=self.state_of(found, None),
                )
            time.sleep(POLL_INTERVAL)

    def do_create(self, planned: State) -> State:
        api = self.api()
        cluster, name = planned["cluster"], planned["name"]
        deadline = Deadline(self.TIMEOUTS.of(planned, "create"), "create")
        mode = given(planned, "client_authentication")
        request = pb.CreatePrivateEndpointRequest(
            cluster=cluster,
            name=name,
            client_auth=CLIENT_AUTH[mode] if mode else None,
            allowed_principals=given(planned, "allowed_principals") or [],
        )
        create_busy(api, deadline, lambda: api.call(api.endpoints.CreatePrivateEndpoint, request))
        try:
            found = self._wait(api, cluster, name, deadline, gone=False)
        except ProviderError as exc:
            if exc.state is not None:
                exc.state["timeouts"] = planned.get("timeouts")
                exc.state["allowed_principals"] = planned.get("allowed_principals")
            raise
        assert found is not None
        return self.state_of(found, planned)

    def do_read(self, current: State) -> State | None:
        found = get(self.api(), current["cluster"], current["name"])
        if found is None or found.state == pb.PRIVATE_ENDPOINT_STATE_DELETING:
            return None
        return self.state_of(found, current)

    def do_update(self, current: State, planned: State) -> State:
        return {**current, "timeouts": planned.get("timeouts")}  # every argument replaces

    def do_delete(self, current: State) -> None:
        api = self.api()
        cluster, name = current["cluster"], current["name"]
        deadline = Deadline(self.TIMEOUTS.of(current, "delete"), "delete")
        request = pb.DeletePrivateEndpointRequest(cluster=cluster, name=name)
        try:
            retry_busy(
                api, deadline, lambda: api.call(api.endpoints.DeletePrivateEndpoint, request)
            )
        except ApiError as exc:
            if exc.reason in GONE:
                return
            raise
        self._wait(api, cluster, name, deadline, gone=True)

    def do_import(self, id_: str) -> State | None:
        cluster, name = id_parts(id_, ("cluster", "name"), "sluice_private_endpoint")
        found = get(self.api(), cluster, name)
        return None if found is None else self.state_of(found, None)
